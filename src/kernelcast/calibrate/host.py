"""Host (CPU) cost of eager PyTorch ops on this machine: dispatch + launch per op, per view, per sync.

Each case runs a loop of tiny ops, so the GPU finishes each kernel before the next launch arrives and the loop
time is the CPU's. Synchronised before and after; REPEATS loops; the median with the fastest and slowest.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

N_OPS = 2000
N_SYNCS = 500
REPEATS = 7


def per_op_us(fn: Callable, n: int) -> list[float]:
    runs = []
    for _ in range(REPEATS + 1):  # the first loop warms up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return runs[1:]


def host_costs() -> dict:
    x = torch.ones(16, device="cuda")
    w = torch.ones(16, 16, device="cuda")
    ln = torch.nn.LayerNorm(16).cuda()
    cases = {
        "add (1 kernel)": (lambda: x + 1, N_OPS),
        "mm 16x16 (1 kernel)": (lambda: w @ w, N_OPS),
        "layer_norm module (1 kernel)": (lambda: ln(w), N_OPS),
        "view (no kernel)": (lambda: x.view(4, 4), N_OPS),
        "transpose (no kernel)": (lambda: w.t(), N_OPS),
        "item (sync + memcpy)": (lambda: x[0].item(), N_SYNCS),
        "cpu add (host tensors)": (lambda: torch.ones(4) + 1, N_OPS),
    }
    out = {}
    for name, (fn, n) in cases.items():
        runs = per_op_us(fn, n)
        out[name] = {"median_us": statistics.median(runs), "min_us": min(runs), "max_us": max(runs),
                     "runs_us": [round(r, 3) for r in runs]}
    return out
