"""Convolutional networks written in plain PyTorch: ResNet-style (batch norm), MobileNet-style (depthwise,
hardswish, squeeze-excite), ConvNeXt-style (depthwise 7x7, layer norm), in NCHW and channels_last, fp32 and bf16.

    kernelcast predict examples/zoo/vision.py:resnet_train_channels_last --gpu h200
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


def resnet(layers=(2, 2, 2, 2), classes=1000):
    """ResNet-50's bottleneck widths at a shallower depth."""
    stem = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    blocks, cin = [], 64
    for i, n in enumerate(layers):
        mid = 64 * 2 ** i
        for j in range(n):
            blocks.append(Bottleneck(cin, mid, mid * 4, 2 if (j == 0 and i > 0) else 1))
            cin = mid * 4
    return nn.Sequential(*stem, *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, expand, stride, se):
        super().__init__()
        mid = cin * expand
        self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid),
                                nn.Hardswish())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(mid, mid // 4, 1), nn.ReLU(),
                                nn.Conv2d(mid // 4, mid, 1), nn.Hardsigmoid()) if se else None
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        out = self.dw(self.expand(x))
        if self.se is not None:
            out = out * self.se(out)
        out = self.project(out)
        return x + out if self.residual else out


def mobilenet(classes=1000):
    cfg = [(16, 16, 1, 1, False), (16, 24, 4, 2, False), (24, 24, 3, 1, False), (24, 40, 3, 2, True),
           (40, 40, 3, 1, True), (40, 80, 6, 2, False), (80, 80, 2, 1, False), (80, 112, 6, 1, True),
           (112, 160, 6, 2, True)]
    layers = [nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish()]
    layers += [InvertedResidual(*c) for c in cfg]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(160, classes)]
    return nn.Sequential(*layers)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1 = nn.Linear(dim, 4 * dim)
        self.pw2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


def convnext(dims=(96, 192, 384, 768), depths=(2, 2, 4, 2), classes=1000):
    layers = [nn.Conv2d(3, dims[0], 4, 4)]
    for i, (dim, depth) in enumerate(zip(dims, depths)):
        if i:
            layers.append(nn.Conv2d(dims[i - 1], dim, 2, 2))
        layers += [ConvNeXtBlock(dim) for _ in range(depth)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], classes)]
    return nn.Sequential(*layers)


def _train(model, images, memory_format, autocast):
    model = model.cuda().to(memory_format=memory_format).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    labels = torch.randint(0, 1000, (images.shape[0],), device="cuda")
    images = images.to(memory_format=memory_format)

    def step(images, labels):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (images, labels)


def _forward(model, images, memory_format):
    model = model.cuda().to(images.dtype).to(memory_format=memory_format).eval()

    def step(images):
        with torch.no_grad():
            return model(images)

    return step, (images.to(memory_format=memory_format),)


def resnet_forward_bf16():
    return _forward(resnet(), torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.bfloat16),
                    torch.contiguous_format)


def resnet_train_fp32():
    return _train(resnet((1, 1, 1, 1)), torch.randn(16, 3, 224, 224, device="cuda"), torch.contiguous_format, False)


def resnet_train_channels_last():
    return _train(resnet(), torch.randn(32, 3, 224, 224, device="cuda"), torch.channels_last, True)


def mobilenet_train():
    return _train(mobilenet(), torch.randn(32, 3, 224, 224, device="cuda"), torch.contiguous_format, True)


def mobilenet_forward_channels_last():
    return _forward(mobilenet(), torch.randn(64, 3, 224, 224, device="cuda", dtype=torch.float16),
                    torch.channels_last)


def convnext_forward_bf16():
    return _forward(convnext(), torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.bfloat16),
                    torch.contiguous_format)


def convnext_train():
    return _train(convnext(depths=(1, 1, 2, 1)), torch.randn(16, 3, 224, 224, device="cuda"),
                  torch.contiguous_format, True)


def resnet_forward_mixed_layout():
    """A channels_last model fed NCHW images (the input left unconverted): cuDNN runs channels_last because the
    weights are, so each convolution copies its NCHW input first."""
    model = resnet((1, 1, 1, 1)).cuda().to(torch.bfloat16).to(memory_format=torch.channels_last).eval()
    images = torch.randn(16, 3, 224, 224, device="cuda", dtype=torch.bfloat16)

    def step(images):
        with torch.no_grad():
            return model(images)

    return step, (images,)


class TabularNet(nn.Module):
    """An MLP with BatchNorm1d over (batch, features), as tabular and recommender towers use it."""

    def __init__(self, features=256, hidden=1024, layers=3, classes=10):
        super().__init__()
        blocks, width = [], features
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.BatchNorm1d(hidden), nn.ReLU()]
            width = hidden
        self.body = nn.Sequential(*blocks, nn.Linear(width, classes))

    def forward(self, x):
        return self.body(x)


def tabular_batchnorm1d_train():
    torch.manual_seed(0)
    model = TabularNet().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(4096, 256, device="cuda")
    y = torch.randint(0, 10, (4096,), device="cuda")

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (x, y)
