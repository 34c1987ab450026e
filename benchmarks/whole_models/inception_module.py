import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, cin, c1, c3r, c3, c5r, c5, pool_proj):
        super().__init__()
        self.b1 = nn.Conv2d(cin, c1, 1)
        self.b3 = nn.Sequential(nn.Conv2d(cin, c3r, 1), nn.Conv2d(c3r, c3, 3, padding=1))
        self.b5 = nn.Sequential(nn.Conv2d(cin, c5r, 1), nn.Conv2d(c5r, c5, 5, padding=2))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(cin, pool_proj, 1))
    def forward(self, x): return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)
def get_inputs(): return [torch.randn(10, 480, 224, 224)]
def get_init_inputs(): return [480, 192, 96, 208, 16, 48, 64]
