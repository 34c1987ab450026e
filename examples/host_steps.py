"""Steps whose wall time the host decides, or nearly: small training steps, a loop that reads .item(), a chain
of tiny ops, host-to-device copies (pinned or pageable) and work on a side stream.

    kernelcast predict examples/host_steps.py:item_loop --gpu h200

Used by scripts/device/validate_host.py next to GPU-bound steps of the validation suite.
"""

import torch
import torch.nn as nn


def _mlp(width: int, depth: int) -> nn.Module:
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def mlp_train():
    """A 6-layer MLP, batch 64, AdamW: a few hundred tiny kernels per step."""
    model = _mlp(512, 6).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 512, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")

    def step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (x, y)


def item_loop():
    """Ten small forward passes, each reading its loss back with .item(): ten syncs per step."""
    model = _mlp(256, 3).cuda()
    xs = [torch.randn(32, 256, device="cuda") for _ in range(10)]

    def step(xs):
        total = 0.0
        with torch.no_grad():
            for x in xs:
                total += model(x).square().mean().item()
        return total

    return step, (xs,)


def tiny_ops_chain():
    """300 pointwise ops on 4 KB: every kernel is shorter than its launch."""
    x = torch.randn(1024, device="cuda")

    def step(x):
        for _ in range(150):
            x = x * 1.0001 + 0.0001
        return x

    return step, (x,)


def _copy_step(pinned: bool):
    batch = torch.randn(64, 3, 224, 224)  # a 38.5 MB fp32 image batch on the host
    if pinned:
        batch = batch.pin_memory()
    weight = torch.randn(1024, 3 * 224 * 224 // 64, device="cuda")

    def step(batch):
        x = batch.to("cuda", non_blocking=pinned)
        return (x.view(-1, weight.shape[1]) @ weight.t()).relu_().sum(0)

    return step, (batch,)


def copy_pageable():
    """A host batch copied from pageable memory: the copy waits for the GPU queue and blocks the CPU."""
    return _copy_step(pinned=False)


def copy_pinned():
    """The same batch from pinned memory with non_blocking=True: the copy is queued like a kernel."""
    return _copy_step(pinned=True)


def side_stream():
    """Prefetch: the next host batch is copied on a side stream (pinned, non_blocking) while matmuls run on the
    default stream; the default stream waits for the copy before it uses the batch."""
    batches = [torch.randn(16, 1024, 1024).pin_memory() for _ in range(2)]  # 64 MB each
    w = torch.randn(1024, 1024, device="cuda")
    side = torch.cuda.Stream()

    def step(batches, w):
        with torch.cuda.stream(side):
            nxt = batches[1].to("cuda", non_blocking=True)
        x = w
        for _ in range(12):
            x = x @ w
        torch.cuda.current_stream().wait_stream(side)
        nxt.record_stream(torch.cuda.current_stream())  # made on the side stream, used on this one
        return (nxt @ x).sum()

    return step, (batches, w)


def compiled_decode_loop():
    """Greedy decoding around a torch.compile'd forward, the shape of transformers' generate(): the loop's own
    Python (argmax, the growing sequence, a stopping check kept on the GPU) runs eagerly between compiled calls,
    16 tokens a step."""
    model = nn.Sequential(nn.Embedding(1000, 256), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 1000)).cuda()
    forward = torch.compile(lambda ids: model(ids[:, -1:]))
    prompt = torch.randint(0, 1000, (4, 8), device="cuda")

    def step(prompt):
        ids, done = prompt, torch.zeros(4, dtype=torch.bool, device="cuda")
        with torch.no_grad():
            for _ in range(16):
                logits = forward(ids)[:, -1, :]
                token = torch.where(done, torch.zeros_like(logits[:, 0], dtype=torch.long), logits.argmax(-1))
                ids = torch.cat([ids, token[:, None]], dim=1)
                done = done | (token == 0)
        return ids

    return step, (prompt,)
