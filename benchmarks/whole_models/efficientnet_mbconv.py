import torch, torch.nn as nn, torch.nn.functional as F
class MBConv(nn.Module):
    def __init__(self, cin, cout, k, s, e):
        super().__init__()
        h = cin * e
        self.use_res = s == 1 and cin == cout
        self.expand = nn.Sequential(nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True)) if e != 1 else nn.Identity()
        self.dw = nn.Sequential(nn.Conv2d(h, h, k, s, k // 2, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True))
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(h, h // 4, 1), nn.ReLU(inplace=True), nn.Conv2d(h // 4, h, 1), nn.Sigmoid())
        self.proj = nn.Sequential(nn.Conv2d(h, cout, 1, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        y = self.dw(self.expand(x))
        y = y * self.se(y)
        y = self.proj(y)
        return x + y if self.use_res else y
class Model(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True))
        cfg = [(32, 16, 3, 1, 1), (16, 24, 3, 2, 6), (24, 24, 3, 1, 6), (24, 40, 5, 2, 6), (40, 80, 3, 2, 6), (80, 112, 5, 1, 6), (112, 192, 5, 2, 6), (192, 320, 3, 1, 6)]
        self.blocks = nn.Sequential(*[MBConv(*c) for c in cfg])
        self.head = nn.Sequential(nn.Conv2d(320, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU(inplace=True))
        self.fc = nn.Linear(1280, classes)
    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        x = F.adaptive_avg_pool2d(x, (1, 1)).flatten(1)
        return self.fc(F.dropout(x, 0.2, self.training))
def get_inputs(): return [torch.randn(10, 3, 224, 224)]
def get_init_inputs(): return [1000]
