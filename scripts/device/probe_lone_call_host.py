"""What one call of a small op costs on the device host, by kind of op (issue 33: KernelBench's level-1 losses).

    (device) PYTHONPATH=src python3 scripts/device/probe_lone_call_host.py --out $OUT/lone_call_host_run1.json

On the H200 (torch 2.11, timing/H200_ours) KernelBench's one-kernel activations took 21-25 µs a call from an idle
GPU, about 11 µs more per further kernel, but its losses, each ending in a mean over every element, took about
twice that trend (MSE 102 µs for 4 kernels, Hinge 111, Huber 91). This probe separates what the host pays per
op kind: each case's call timed as KernelBench times it (CUDA events around one call from an idle GPU,
synchronize after; median of TRIALS) and its host time alone (a host timer around CALLS back-to-back calls, no
synchronize inside, per call; the GPU work of each is a few µs, so the queue never fills), for reductions to
one value beside reductions along a dim and pointwise ops, at KernelBench's shapes and at a tiny one. Run it in
more than one process: the device host's CPU times move up to 1.6x between runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from kernelcast.measure import back_to_back_ms

TRIALS = 50
CALLS = 200
WARMUP = 10
SHAPES = {"kb": (128, 4096), "tiny": (128, 1)}


def cases(a: torch.Tensor, b: torch.Tensor) -> dict:
    """name -> a call; each a kind of op a lone call can be made of."""
    labels = torch.randint(0, a.shape[1], (a.shape[0],), device=a.device)
    return {
        "relu": lambda: torch.relu(a),
        "mul": lambda: a * b,
        "sub_pow": lambda: (a - b) ** 2,
        "sum_dim": lambda: a.sum(dim=1),
        "amax_dim": lambda: a.amax(dim=1),
        "sum_all": lambda: a.sum(),
        "mean_all": lambda: a.mean(),
        "amax_all": lambda: a.amax(),
        "sub_pow_mean": lambda: torch.mean((a - b) ** 2),
        "hinge": lambda: torch.mean(torch.clamp(1 - a * b, min=0)),
        "mse_loss": lambda: F.mse_loss(a, b),
        "smooth_l1_loss": lambda: F.smooth_l1_loss(a, b),
        "cross_entropy": lambda: F.cross_entropy(a, labels),
        "kl_div": lambda: F.kl_div(torch.log(a.softmax(-1)), b.softmax(-1), reduction="batchmean"),
        "softmax": lambda: torch.softmax(a, dim=-1),
        "cumsum": lambda: torch.cumsum(a, dim=1),
    }


def lone_call_us(fn) -> float:
    """KernelBench's timing: an event before and after one call from an idle GPU, then synchronize (kernelcast.measure
    back_to_back_ms at one step); the median of TRIALS."""
    torch.cuda.synchronize()
    return statistics.median(back_to_back_ms(fn, 1, TRIALS)) * 1e3


def host_per_call_us(fn) -> float:
    """Host time per call over CALLS back-to-back calls (no synchronize inside); median of 5 windows."""
    windows = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        windows.append((time.perf_counter() - t0) / CALLS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(windows)


def kernels_per_call(fn) -> int:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    with torch.no_grad():
        for shape_name, shape in SHAPES.items():
            a, b = torch.randn(*shape, device="cuda"), torch.randn(*shape, device="cuda")
            for name, fn in cases(a, b).items():
                for _ in range(WARMUP):
                    fn()
                rows.append({"case": name, "shape": shape_name, "dims": list(shape),
                             "lone_call_us": round(lone_call_us(fn), 2),
                             "host_per_call_us": round(host_per_call_us(fn), 2)})
        # kernels last: a profiler run slows the host of the process after it (validation/host_spread)
        for row in rows:
            a, b = torch.randn(*row["dims"], device="cuda"), torch.randn(*row["dims"], device="cuda")
            row["kernels"] = kernels_per_call(cases(a, b)[row["case"]])
    out = {"command": "PYTHONPATH=src python3 scripts/device/probe_lone_call_host.py --out OUT", "torch": torch.__version__,
           "device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    for r in rows:
        print(f"{r['case']:16s} {r['shape']:5s} kernels {r['kernels']}  lone {r['lone_call_us']:7.1f} µs  "
              f"host {r['host_per_call_us']:6.1f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
