"""Device probe: the host cost of replaying a user's CUDA graph (torch.cuda.CUDAGraph.replay) by its kernel count.

    PYTHONPATH=src python3 scripts/device/probe_graph_launch.py --out $OUT/graph_launch_run1.json   # on a GPU; repeat in
    python3 scripts/device/probe_graph_launch.py --fit validation/probes/graph_launch_run*.json     # fresh processes

A graph of N in-place adds on a 4 KiB tensor, captured once; each replay() timed on the host (perf_counter around
the call, the GPU drained before each, REPS replays, the median), and its GPU time between CUDA events; beside it
one eager add's host time. --fit: replay host time = fixed + per-kernel x N, least squares over every run's
medians, which predict/host.py's user_graph_launch_us / user_graph_per_kernel_us take.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

KERNELS = (1, 4, 16, 64, 256, 1024)
REPS = 200
WARMUP = 20


def _host_us(call, reps: int) -> float:
    import torch

    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def measure() -> dict:
    import torch

    from kernelcast.measure import back_to_back_ms

    x = torch.zeros(1024, device="cuda")
    for _ in range(WARMUP):
        x.add_(1)
    rows = {"eager_add_host_us": _host_us(lambda: x.add_(1), REPS)}
    for n in KERNELS:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(n):
                x.add_(1)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            for _ in range(n):
                x.add_(1)
        for _ in range(WARMUP):
            graph.replay()
        host = _host_us(graph.replay, REPS)
        torch.cuda.synchronize()
        gpu = [ms * 1e3 for ms in back_to_back_ms(graph.replay, 1, 50)]  # each replay from an idle GPU
        rows[str(n)] = {"replay_host_us": host, "replay_gpu_us": statistics.median(gpu)}
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
            "reps": REPS, "rows": rows}


def kernels_of(spec: str) -> dict:
    """The GPU work of one step of FILE.py:build that replays a CUDA graph, from torch.profiler's device
    events (a graph's kernels have no CPU op of their own, so they are read here, not per aten op)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kernelcast.capture.workload import load_build

    build, _ = load_build(spec)
    step, args = build()
    for _ in range(WARMUP):
        step(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(*args)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return {"spec": spec, "work_items": len(names), "names": [n[:120] for n in names]}


def fit(paths: list[str]) -> int:
    points = []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        points += [(int(n), r["replay_host_us"]) for n, r in doc["rows"].items() if n.isdigit()]
    xs, ys = [n for n, _ in points], [t for _, t in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    print(f"{len(points)} points from {len(paths)} runs: replay host us = {my - slope * mx:.2f} + {slope:.4f} x kernels")
    for n in sorted(set(xs)):
        print(f"  {n:5d} kernels: {', '.join(f'{t:.1f}' for x, t in points if x == n)} us")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--fit", nargs="+")
    parser.add_argument("--kernels", nargs="+", metavar="FILE.py:build", help="list one step's GPU work instead")
    args = parser.parse_args()
    if args.fit:
        return fit(args.fit)
    if args.kernels:
        doc = [kernels_of(spec) for spec in args.kernels]
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
        print([(d["spec"], d["work_items"]) for d in doc])
        return 0
    doc = measure()
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
