"""A small CNN training step that logs `loss.item()` into a list every step (build), the same without the log
(log_every_step=False): issue 32's graph break at an `.item()`. Run compiled: `kernelcast predict
benchmarks/cases/compiled_cnn_logs_item.py --compile default`, and measured on the device by
scripts/device/measure_workloads.py with --compile default (validation/cases_measured.json)."""

import torch
import torch.nn as nn


def build(batch=32, log_every_step=True):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(batch, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    losses = []

    def step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if log_every_step:
            losses.append(loss.item())
        return loss

    return step, (x, y)
