import torch, torch.nn as nn, torch.nn.functional as F
class Layer(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.bn=nn.BatchNorm2d(cin); self.conv=nn.Conv2d(cin,growth,3,padding=1,bias=False); self.drop=nn.Dropout(0.0)
    def forward(self,x): return self.drop(self.conv(F.relu(self.bn(x))))
class Model(nn.Module):
    def __init__(self, growth_rate=32, num_classes=1000):
        super().__init__()
        self.features=nn.Sequential(nn.Conv2d(3,64,7,2,3,bias=False),nn.BatchNorm2d(64),nn.ReLU(inplace=True),nn.MaxPool2d(3,2,1))
        self.layers=nn.ModuleList([Layer(64+i*growth_rate,growth_rate) for i in range(6)])
        cout=64+6*growth_rate
        self.trans=nn.Sequential(nn.BatchNorm2d(cout),nn.ReLU(inplace=True),nn.Conv2d(cout,cout//2,1,bias=False),nn.AvgPool2d(2,2))
        self.cls=nn.Linear(cout//2,num_classes)
    def forward(self,x):
        x=self.features(x); feats=[x]
        for l in self.layers:
            feats.append(l(x)); x=torch.cat(feats,1)
        x=self.trans(x)
        x=F.adaptive_avg_pool2d(x,(1,1)).view(x.size(0),-1)
        return self.cls(x)
batch_size=10
def get_inputs(): return [torch.randn(batch_size,3,224,224)]
def get_init_inputs(): return [32,1000]
