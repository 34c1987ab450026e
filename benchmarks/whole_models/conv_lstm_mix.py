import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self):
        super().__init__(); self.c = nn.Conv1d(40, 128, 5, padding=2); self.gn = nn.GroupNorm(8, 128); self.gru = nn.GRU(128, 128, batch_first=True); self.att = nn.MultiheadAttention(128, 4, batch_first=True)
    def forward(self, x):
        h = F.gelu(self.gn(self.c(x))).transpose(1, 2)
        h, _ = self.gru(h)
        a, w = self.att(h, h, h, need_weights=True)
        return F.log_softmax(a.mean(1), -1), w
def get_inputs(): return [torch.randn(8, 40, 200)]
def get_init_inputs(): return []
