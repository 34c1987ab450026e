import torch, torch.nn as nn, torch.nn.functional as F
class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__(); self.net = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.Softmax(dim=-1), nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.Softmax(dim=-1))
    def forward(self, x): return self.net(x)
class Model(nn.Module):
    def __init__(self, cin, cout, f):
        super().__init__()
        self.e1 = DoubleConv(cin, f); self.e2 = DoubleConv(f, 2 * f); self.pool = nn.MaxPool2d(2)
        self.bott = DoubleConv(2 * f, 4 * f)
        self.up2 = nn.ConvTranspose2d(4 * f, 2 * f, 2, 2); self.d2 = DoubleConv(4 * f, 2 * f)
        self.up1 = nn.ConvTranspose2d(2 * f, f, 2, 2); self.d1 = DoubleConv(2 * f, f)
        self.out = nn.Conv2d(f, cout, 1)
    def forward(self, x):
        e1 = self.e1(x); e2 = self.e2(self.pool(e1)); b = self.bott(self.pool(e2))
        d2 = self.d2(torch.cat([self.up2(b), e2], 1)); d1 = self.d1(torch.cat([self.up1(d2), e1], 1))
        return self.out(d1)
def get_inputs(): return [torch.randn(8, 8, 64, 128)]
def get_init_inputs(): return [8, 4, 32]
