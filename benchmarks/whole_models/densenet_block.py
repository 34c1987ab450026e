import torch, torch.nn as nn, torch.nn.functional as F
class Layer(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.seq = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(inplace=True), nn.Conv2d(cin, 4 * growth, 1, bias=False),
                                 nn.BatchNorm2d(4 * growth), nn.ReLU(inplace=True), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False), nn.Dropout(0.0))
    def forward(self, x): return self.seq(x)
class Model(nn.Module):
    def __init__(self, growth=32, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.ModuleList(Layer(64 + i * growth, growth) for i in range(6))
        c = 64 + 6 * growth
        self.trans = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2, 2))
        self.fc = nn.Linear(c // 2, classes)
    def forward(self, x):
        x = self.stem(x)
        feats = [x]
        for layer in self.layers:
            feats.append(layer(torch.cat(feats, 1)))
        x = self.trans(torch.cat(feats, 1))
        x = F.adaptive_avg_pool2d(F.relu(x, inplace=True), (1, 1)).view(x.size(0), -1)
        return self.fc(x)
def get_inputs(): return [torch.randn(10, 3, 224, 224)]
def get_init_inputs(): return [32, 1000]
