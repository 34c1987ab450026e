"""One small training step (an MLP with layer norm: 14 parameter tensors of mixed sizes), with each torch.optim
optimizer in its CUDA default implementation. `build_NAME` for each optimizer in OPTIMIZERS.

    kernelcast predict examples/zoo/optimizers.py:build_rmsprop --gpu h200
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "adam_amsgrad": lambda p: torch.optim.Adam(p, lr=1e-3, amsgrad=True, weight_decay=1e-2),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=1e-2),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-3, momentum=0.9),
    "adadelta": lambda p: torch.optim.Adadelta(p),
    "adamax": lambda p: torch.optim.Adamax(p, lr=1e-3),
    "nadam": lambda p: torch.optim.NAdam(p, lr=1e-3),
    "radam": lambda p: torch.optim.RAdam(p, lr=1e-3),
    "asgd": lambda p: torch.optim.ASGD(p, lr=1e-2),
    "rprop": lambda p: torch.optim.Rprop(p, lr=1e-3),
}


def mlp():
    return nn.Sequential(nn.Linear(784, 1024), nn.LayerNorm(1024), nn.GELU(), nn.Linear(1024, 1024),
                         nn.LayerNorm(1024), nn.GELU(), nn.Linear(1024, 512), nn.LayerNorm(512), nn.GELU(),
                         nn.Linear(512, 256), nn.GELU(), nn.Linear(256, 10))


def _build(name):
    def build():
        torch.manual_seed(0)
        model = mlp().cuda()
        opt = OPTIMIZERS[name](model.parameters())
        x = torch.randn(512, 784, device="cuda")
        y = torch.randint(0, 10, (512,), device="cuda")

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step, (x, y)

    build.__name__ = f"build_{name}"
    return build


for _name in OPTIMIZERS:
    globals()[f"build_{_name}"] = _build(_name)
