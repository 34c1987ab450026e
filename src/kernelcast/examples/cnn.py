"""A ResNet-style CNN training step (channels_last, bf16 autocast, SGD with momentum).

    kernelcast predict example:cnn --gpu a100
"""

import torch
import torch.nn.functional as F
from torch import nn

BATCH, IMAGE, CLASSES = 64, 224, 1000


def conv_bn(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class Residual(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(conv_bn(c_in, c_out, stride), nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(c_out))
        self.skip = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                     if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.skip(x))


class ResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        widths = [64, 128, 256, 512]
        layers, c_in = [], 64
        for i, width in enumerate(widths):
            layers += [Residual(c_in, width, 1 if i == 0 else 2), Residual(width, width, 1)]
            c_in = width
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(512, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build(batch: int = BATCH):
    """batch: images per step (`kernelcast predict example:cnn --arg batch=128`, `kernelcast fit`)."""
    model = ResNet().to("cuda", memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(batch, 3, IMAGE, IMAGE, device="cuda").to(memory_format=torch.channels_last)
    labels = torch.randint(0, CLASSES, (batch,), device="cuda")

    def step(images, labels):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (images, labels)
