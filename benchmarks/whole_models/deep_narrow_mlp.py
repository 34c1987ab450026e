import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, input_size, hidden, output_size):
        super().__init__()
        layers, c = [], input_size
        for h in hidden:
            layers += [nn.Linear(c, h), nn.ReLU()]; c = h
        layers.append(nn.Linear(c, output_size))
        self.network = nn.Sequential(*layers)
    def forward(self, x): return self.network(x)
def get_inputs(): return [torch.randn(1, 1000)]
def get_init_inputs(): return [1000, [50] * 16, 10]
