import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self, d, h):
        super().__init__(); self.qkv = nn.Linear(d, 3 * d); self.o = nn.Linear(d, d); self.h = h; self.ln = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln(x)).view(B, T, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.o(y)
        return x + self.mlp(self.ln(x))
def get_inputs(): return [torch.randn(16, 1024, 768)]
def get_init_inputs(): return [768, 12]
