import torch, torch.nn as nn, torch.nn.functional as F
class ChannelShuffle(nn.Module):
    def __init__(self, groups): super().__init__(); self.groups = groups
    def forward(self, x):
        b, c, h, w = x.size()
        x = x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous()
        return x.view(b, -1, h, w)
class Model(nn.Module):
    def __init__(self, cin, cout, groups=3):
        super().__init__()
        mid = cout // 4
        self.conv1 = nn.Conv2d(cin, mid, 1, groups=groups, bias=False); self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, padding=1, groups=mid, bias=False); self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, groups=groups, bias=False); self.bn3 = nn.BatchNorm2d(cout)
        self.shuffle = ChannelShuffle(groups)
        self.shortcut = nn.Sequential() if cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = self.shuffle(out)
        out = F.relu(self.bn3(self.conv3(out)))
        return out + self.shortcut(x)
def get_inputs(): return [torch.randn(10, 240, 224, 224)]
def get_init_inputs(): return [240, 480, 3]
