import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, d, nhead, layers, classes):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, 197, d))
        layer = nn.TransformerEncoderLayer(d, nhead, 4 * d, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, classes)
    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.enc(x)
        return self.head(x[:, 0])
def get_inputs(): return [torch.randn(10, 3, 224, 224)]
def get_init_inputs(): return [512, 8, 6, 1000]
