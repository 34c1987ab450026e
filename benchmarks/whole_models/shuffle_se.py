import torch, torch.nn as nn, torch.nn.functional as F
class ChannelShuffle(nn.Module):
    def __init__(self, groups): super().__init__(); self.groups=groups
    def forward(self,x):
        b,c,h,w=x.size(); x=x.view(b,self.groups,c//self.groups,h,w).transpose(1,2).contiguous(); return x.view(b,-1,h,w)
class Model(nn.Module):
    def __init__(self, cin=240, cout=240, groups=3):
        super().__init__()
        mid=cout//4
        self.c1=nn.Conv2d(cin,mid,1,groups=groups,bias=False); self.b1=nn.BatchNorm2d(mid)
        self.c2=nn.Conv2d(mid,mid,3,padding=1,groups=mid,bias=False); self.b2=nn.BatchNorm2d(mid)
        self.c3=nn.Conv2d(mid,cout,1,groups=groups,bias=False); self.b3=nn.BatchNorm2d(cout)
        self.shuffle=ChannelShuffle(groups)
        self.se1=nn.Conv2d(cout,cout//4,1); self.se2=nn.Conv2d(cout//4,cout,1)
    def forward(self,x):
        out=F.relu(self.b1(self.c1(x))); out=self.shuffle(out); out=self.b2(self.c2(out)); out=F.relu(self.b3(self.c3(out)))
        s=F.adaptive_avg_pool2d(out,1); s=torch.sigmoid(self.se2(F.silu(self.se1(s))))
        return out*s + x
def get_inputs(): return [torch.randn(10,240,56,56)]
def get_init_inputs(): return [240,240,3]
