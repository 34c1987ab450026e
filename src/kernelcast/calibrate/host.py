"""Host (CPU) cost of eager PyTorch on this machine: per op by kind, per sync, per foreach tensor, per backward
node, the CPU and its speed (capture/cpu_speed.py's three benchmarks), and host<->device copy bandwidth.

Each op case runs a loop of tiny ops, so the GPU finishes each kernel before the next launch arrives and the
loop time is the CPU's. Synchronised before and after; REPEATS loops; the median with the fastest and slowest.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from kernelcast.capture.cpu_speed import measure_cpu_bench, python_bench_us

N_OPS = 2000
N_SYNCS = 500
REPEATS = 7
BACKWARD_CHAIN = 400  # ops in the chain whose backward is timed
FOREACH_FEW, FOREACH_MANY = 8, 256  # tensors per foreach call, to split the fixed and per-tensor cost
COPY_BYTES = 64 << 20


def synced_us(fn: Callable[[], object]) -> float:
    """µs of wall time for fn(), with the GPU synchronized before and after (so the GPU's work is in it)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6


def per_op_us(fn: Callable, n: int) -> list[float]:
    def loop() -> None:
        for _ in range(n):
            fn()

    return [synced_us(loop) / n for _ in range(REPEATS + 1)][1:]  # the first loop warms up


def backward_node_us() -> list[float]:
    """CPU time per autograd node in backward: a chain of tiny multiplies, timed in backward only."""
    x = torch.ones(16, device="cuda", requires_grad=True)
    runs = []
    for _ in range(REPEATS + 1):
        y = x
        for _ in range(BACKWARD_CHAIN):
            y = y * 1.0001
        runs.append(synced_us(y.sum().backward) / (BACKWARD_CHAIN + 1))
    return runs[1:]


MIXED_LAYERS = 8  # blocks in the mixed chain
MIXED_WIDTH = 64


def _mixed_params() -> list:
    def leaf(*shape):
        return (torch.randn(*shape, device="cuda") * 0.1).requires_grad_()

    return [(leaf(2 * MIXED_WIDTH, MIXED_WIDTH), leaf(2 * MIXED_WIDTH), leaf(MIXED_WIDTH, 2 * MIXED_WIDTH),
             leaf(MIXED_WIDTH), leaf(MIXED_WIDTH)) for _ in range(MIXED_LAYERS)]


def _mixed_forward(params: list, x: torch.Tensor) -> torch.Tensor:
    """Tiny transformer-like blocks: norms, linears, activations, views, attention-shaped matmuls, softmax."""
    F = torch.nn.functional
    h = x
    for w1, b1, w2, ln_w, ln_b in params:
        y = F.gelu(F.linear(F.layer_norm(h, (MIXED_WIDTH,), ln_w, ln_b), w1, b1))
        q = y.view(8, 4, 4, 2 * MIXED_WIDTH // 4).transpose(1, 2)
        a = torch.softmax(q @ q.transpose(-1, -2) * 0.125, dim=-1) @ q
        y = F.linear(a.transpose(1, 2).reshape(8, 4, 2 * MIXED_WIDTH), w2)
        h = h + torch.tanh(y) * 0.5
    return h.float().mean()


def mixed_chain() -> dict:
    """Host time of a chain of varied ops, forward (autograd recording) and backward, next to the ops it ran.

    The per-op cases above are tight loops of one op, whose code and data stay in the CPU's caches; a model
    cycles through many ops and so pays more per op. The host model compares this chain's time with what its
    per-op costs predict for the same ops, and scales them by the ratio (predict/host.py)."""
    params = _mixed_params()
    x = torch.randn(8, 4, MIXED_WIDTH, device="cuda")

    def step() -> None:
        _mixed_forward(params, x).backward()
        for p in (t for layer in params for t in layer):
            p.grad = None

    def inference() -> None:  # without autograd recording, as an inference step runs
        with torch.no_grad():
            _mixed_forward(params, x)

    ops, ops_no_grad = _ops_of(step), _ops_of(inference)
    forward, backward = [], []
    for _ in range(REPEATS + 1):  # the first round warms up
        out: dict = {}
        forward.append(synced_us(lambda: out.update(loss=_mixed_forward(params, x))))
        backward.append(synced_us(out["loss"].backward))
        for p in (t for layer in params for t in layer):
            p.grad = None
    no_grad = [synced_us(inference) for _ in range(REPEATS + 1)]
    return {"forward": _summary(forward[1:]), "backward": _summary(backward[1:]),
            "forward_no_grad": _summary(no_grad[1:]), "ops": ops, "ops_no_grad": ops_no_grad}


def _ops_of(fn: Callable[[], None]) -> list[dict]:
    """The op records of one call, as a capture records them (phase from the autograd engine)."""
    from kernelcast.capture.recorder import Recorder

    phase = lambda: "backward" if torch._C._current_graph_task_id() != -1 else "forward"  # noqa: E731
    recorder = Recorder(phase, lambda: "", lambda: None)
    recorder.recording = True
    with recorder:
        fn()
    return [op.to_json() for op in recorder.ops]


COPY_METHOD = "fp32 tensor .to(device), sizes 4-256 MB, dense 16-64 MB"  # as a training loop moves a batch


COPY_SIZES = [64 << 10, 1 << 20, 4 << 20, 16 << 20, 24 << 20, 32 << 20, 48 << 20, 64 << 20, 256 << 20]


def copy_bandwidth() -> dict:
    """Host-to-device and back, pinned and pageable, as bytes/s at each of COPY_SIZES (median of REPEATS).
    Measured the way a step moves a batch, `.to("cuda")` of a float tensor: on the H200 host a pageable
    38.5 MB fp32 .to() ran at 14 GB/s where a uint8 copy_ of the same bytes ran at 18 GB/s, and pageable
    rates fall with size (the host's caches), so a curve over sizes.

    A copy into host memory the step already holds (`buf.copy_(x)`) is measured apart from `.to("cpu")`, which
    allocates: a fresh pageable allocation is paged in by the copy itself (the kernel maps each new page on first
    touch), while a reused buffer's pages are mapped already (shared case d2h_nonblocking_pageable: a 64 MiB
    copy_ into a reused pageable buffer took 4.3 ms on the H200 host, where .to("cpu") ran at 1.3 GB/s)."""
    out: dict = {"method": COPY_METHOD}
    for nbytes in COPY_SIZES:
        n = nbytes // 4
        pinned, pageable, dev = torch.randn(n).pin_memory(), torch.randn(n), torch.randn(n, device="cuda")
        cases = {
            "h2d_pinned": lambda: pinned.to("cuda", non_blocking=True),
            "h2d_pageable": lambda: pageable.to("cuda"),
            "d2h_pinned": lambda: dev.to("cpu", non_blocking=True),  # torch allocates pinned memory for it
            "d2h_pageable": lambda: dev.to("cpu"),
            "d2h_pageable_into": lambda: pageable.copy_(dev, non_blocking=True),  # blocks: pageable destination
            "h2d_pageable_into": lambda: dev.copy_(pageable),
        }
        for name, fn in cases.items():
            fn()
            rate = nbytes / (statistics.median(synced_us(fn) for _ in range(REPEATS)) / 1e6)
            out.setdefault(f"{name}_curve", []).append([nbytes, rate])
            if nbytes == COPY_BYTES:
                out[name + "_bytes_per_s"] = rate
    return out


def _summary(runs: list[float]) -> dict:
    return {"median_us": statistics.median(runs), "min_us": min(runs), "max_us": max(runs),
            "runs_us": [round(r, 3) for r in runs]}


# Calls into cuDNN and cuSOLVER cost the host more than a kernel launch: descriptors, the plan cache lookup,
# the library's own dispatch (cuDNN frontend's execute for convolutions and batch norm, cudnnRNNForward, the
# solver's info read back). Tight loops of the smallest such call, each with the aten op the capture records
# (predict/host.py LIBRARY_CASES prices the op at the case's time instead of a launch). Added after the zoo
# (validation/wall_validate.json) showed conv, RNN and solver steps' host time two to six times the per-launch
# price; not yet measured on a device (the shipped profile has none of these cases).
LIBRARY_CALLS = N_OPS // 4


def library_cases() -> dict:
    F = torch.nn.functional
    x = torch.ones(1, 16, 8, 8, device="cuda")
    w = torch.ones(16, 16, 3, 3, device="cuda")
    grad = torch.ones(1, 16, 8, 8, device="cuda")
    mean, var = torch.zeros(16, device="cuda"), torch.ones(16, device="cuda")
    rnn = torch.nn.RNN(16, 16).cuda()
    seq = torch.ones(4, 1, 16, device="cuda")
    a = torch.eye(8, device="cuda") * 2
    b = torch.ones(8, 1, device="cuda")

    def conv_backward():
        torch.ops.aten.convolution_backward(grad, x, w, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                            [True, True, False])

    def rnn_no_grad():
        with torch.no_grad():
            rnn(seq)

    return {
        "conv2d 3x3 (cuDNN)": (lambda: F.conv2d(x, w, padding=1), LIBRARY_CALLS),
        "conv2d backward (cuDNN)": (conv_backward, LIBRARY_CALLS),
        "batch_norm training (cuDNN)": (lambda: F.batch_norm(x, mean, var, training=True), LIBRARY_CALLS),
        "rnn tanh 4 steps (cuDNN)": (rnn_no_grad, LIBRARY_CALLS),
        "linalg.solve 8x8 (cuSOLVER)": (lambda: torch.linalg.solve(a, b), N_SYNCS // 4),
    }


def host_costs() -> dict:
    x = torch.ones(16, device="cuda")
    xg = torch.ones(16, device="cuda", requires_grad=True)
    w = torch.ones(16, 16, device="cuda")
    ln = torch.nn.LayerNorm(16).cuda()
    linear = torch.nn.Linear(16, 16).cuda()
    few = [torch.ones(16, device="cuda") for _ in range(FOREACH_FEW)]
    many = [torch.ones(16, device="cuda") for _ in range(FOREACH_MANY)]
    cases = {
        "add (1 kernel)": (lambda: x + 1, N_OPS),
        "add, input requires grad (1 kernel)": (lambda: xg + 1, N_OPS),
        "mm 16x16 (1 kernel)": (lambda: w @ w, N_OPS),
        "linear functional (1 kernel)": (lambda: torch.nn.functional.linear(w, linear.weight, linear.bias), N_OPS),
        "linear module (1 kernel)": (lambda: linear(w), N_OPS),
        "layer_norm module (1 kernel)": (lambda: ln(w), N_OPS),
        "view (no kernel)": (lambda: x.view(4, 4), N_OPS),
        "transpose (no kernel)": (lambda: w.t(), N_OPS),
        "item (sync + memcpy)": (lambda: x[0].item(), N_SYNCS),
        "cpu add (host tensors)": (lambda: torch.ones(4) + 1, N_OPS),
        f"foreach add_ x{FOREACH_FEW}": (lambda: torch._foreach_add_(few, 1.0), N_OPS // 4),
        f"foreach add_ x{FOREACH_MANY}": (lambda: torch._foreach_add_(many, 1.0), N_OPS // 8),
    }
    cases.update(library_cases())
    out = {name: _summary(per_op_us(fn, n)) for name, (fn, n) in cases.items()}
    out["backward node"] = _summary(backward_node_us())
    out["python bench"] = _summary([python_bench_us(repeats=1) for _ in range(REPEATS)])
    # The three CPU benchmarks a capture also records (capture/cpu_speed.py), and this host's CPU: predict/host.py
    # carries the model's Python from the capture machine by their ratios, and a target host measured apart
    # (at another speed) scales these costs by them.
    out["cpu bench"] = measure_cpu_bench().to_json()
    out["copies"] = copy_bandwidth()
    out["mixed chain"] = mixed_chain()
    out["foreach_tensors"] = [FOREACH_FEW, FOREACH_MANY]
    return out
