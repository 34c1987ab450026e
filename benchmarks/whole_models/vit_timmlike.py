import torch, torch.nn as nn
class Attn(nn.Module):
    def __init__(self, d, h):
        super().__init__(); self.h = h; self.qkv = nn.Linear(d, 3 * d); self.proj = nn.Linear(d, d); self.scale = (d // h) ** -0.5
    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))
class Model(nn.Module):
    def __init__(self, d=384, h=6, depth=4):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16); self.cls = nn.Parameter(torch.zeros(1, 1, d)); self.pos = nn.Parameter(torch.zeros(1, 197, d))
        self.blocks = nn.ModuleList(nn.ModuleDict({"n1": nn.LayerNorm(d), "a": Attn(d, h), "n2": nn.LayerNorm(d), "m": nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))}) for _ in range(depth))
        self.head = nn.Linear(d, 1000)
    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1) + self.pos
        for b in self.blocks:
            x = x + b["a"](b["n1"](x)); x = x + b["m"](b["n2"](x))
        return self.head(x[:, 0])
def get_inputs(): return [torch.randn(10, 3, 224, 224)]
def get_init_inputs(): return []
