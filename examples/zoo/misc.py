"""Steps that exercise op kinds rather than model families: data-dependent sizes, losses, linear algebra, odd
layer-norm widths, stack / masked_fill / huber loss.

    kernelcast predict examples/zoo/misc.py:data_dependent --gpu h200
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def data_dependent():
    """nonzero, unique, masked_select, repeat_interleave with tensor repeats, bincount: each a host sync."""
    torch.manual_seed(0)
    x = torch.randn(1 << 20, device="cuda")
    labels = torch.randint(0, 100, (1 << 16,), device="cuda")

    def step(x, labels):
        idx = torch.nonzero(x > 1.0).squeeze(1)
        picked = torch.masked_select(x, x < -1.0)
        uniq = torch.unique(labels)
        counts = torch.bincount(labels, minlength=100)
        rep = torch.repeat_interleave(torch.arange(100, device="cuda"), counts)
        return idx.float().sum() + picked.sum() + uniq.sum() + rep.float().mean()

    return step, (x, labels)


def losses_train():
    """A regression and a classification head trained with huber, smooth-L1, label-smoothed cross entropy,
    KL divergence and a masked_fill'd attention-style score; the outputs stacked."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 128)).cuda()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(1024, 256, device="cuda")
    target = torch.randn(1024, 128, device="cuda")
    cls = torch.randint(0, 128, (1024,), device="cuda")
    mask = torch.rand(1024, 128, device="cuda") > 0.9

    def step(x, target, cls, mask):
        out = net(x)
        scores = out.masked_fill(mask, float("-inf"))
        losses = torch.stack([
            F.huber_loss(out, target, delta=0.5), F.smooth_l1_loss(out, target),
            F.cross_entropy(scores, cls, label_smoothing=0.1),
            F.kl_div(F.log_softmax(out, -1), F.softmax(target, -1), reduction="batchmean"),
        ])
        losses.sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (x, target, cls, mask)


def linalg_solve():
    """The shared case tiny_solve_timing.py: ten 30x30 solves (each checks its result on the host)."""
    torch.manual_seed(0)
    a = torch.rand(30, 30, device="cuda") + 30 * torch.eye(30, device="cuda")
    b = torch.rand(30, 1, device="cuda")

    def step(a, b):
        w = None
        for _ in range(10):
            w = torch.linalg.solve(a, b)
        return w

    return step, (a, b)


def layernorm_odd_widths():
    """F.layer_norm over widths that are and are not multiples of 4, forward and backward, and nn.RMSNorm."""
    torch.manual_seed(0)
    xs = [torch.randn(4096, n, device="cuda", requires_grad=True) for n in (2041, 2040, 770, 1023)]
    rms = nn.RMSNorm(2040).cuda()

    def step(xs):
        total = sum(F.layer_norm(x, (x.shape[-1],)).square().mean() for x in xs)
        total = total + rms(xs[1]).square().mean()
        total.backward()

    return step, (xs,)


def _grouped_conv(memory_format):
    torch.manual_seed(0)
    x = torch.rand(64, 1024, 14, 14, dtype=torch.float16, device="cuda").contiguous(memory_format=memory_format)
    w = torch.rand(1024, 32, 3, 3, dtype=torch.float16, device="cuda").contiguous(memory_format=memory_format)
    w.requires_grad_(True)

    def step(x, w):
        o = F.conv2d(x, w, None, 2, 1, 1, 32)
        o.sum().backward()
        return o

    return step, (x, w)


def grouped_conv_channels_last():
    """A grouped 3x3 convolution (groups=32, stride 2, fp16) forward and backward in channels_last."""
    return _grouped_conv(torch.channels_last)


def grouped_conv_nchw():
    """The same convolution in NCHW: cuDNN wraps it in layout transposes."""
    return _grouped_conv(torch.contiguous_format)


def d2h_pageable():
    """Four 2048^2 fp32 matmul+tanh, then a 16 MiB device-to-host copy into a reused pageable buffer."""
    torch.manual_seed(0)
    w = torch.randn(2048, 2048, device="cuda")
    x = torch.randn(2048, 2048, device="cuda")
    buf = torch.empty(2048, 2048)

    def step(x):
        y = x
        for _ in range(4):
            y = torch.tanh(y @ w)
        buf.copy_(y, non_blocking=True)
        return buf

    return step, (x,)


def compiled_mean():
    """torch.compile'd mean over the non-contiguous dimension (the step calls torch.compile itself)."""
    torch.manual_seed(0)
    x = torch.empty_strided((640, 256), (1, 640), dtype=torch.float32, device="cuda").normal_()
    compiled = torch.compile(lambda t: t.mean(dim=1), dynamic=False)

    def step(x):
        return compiled(x)

    return step, (x,)


def cnn_train_item():
    """A small CNN's SGD training step that returns `loss.item()`, as a training loop logging its loss does: under
    torch.compile a graph break at the .item() (issue 32), the optimizer's step after it."""
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(128, 10)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")

    def step(x, y):
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step, (x, y)
