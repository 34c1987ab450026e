"""Host time of a cuDNN RNN call against the kernels it launches (device probe).

A cuDNN RNN call launches its kernels from the host inside one aten op (`_cudnn_rnn`): a GEMM and pointwise
kernels per time step, layer and direction unless a persistent kernel runs the steps. The zoo measured its RNN
steps host-bound (gru_bidirectional_forward: 1607 work items, 16.7 ms per step for 3.8 ms of kernels), so the
host cost of such a call grows with its launches. This probe times, per configuration, the host side of one
call (CPU time of the calling thread from the call to its return; the GPU queue never fills: each call's kernels
take less time than its launches) and counts its work items with torch.profiler, for a fit of host time
against launches (scripts/fit/fit_library_launches.py). The host's three CPU benchmarks are recorded beside them.

    PYTHONPATH=src python3 scripts/device/probe_library_launches.py --out $OUT/library_launches.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from kernelcast.capture.cpu_speed import measure_cpu_bench, thread_cpu_ns

CONFIGS = [  # (cell, hidden, layers, bidirectional, steps, batch)
    ("GRU", 64, 1, False, 16, 8), ("GRU", 64, 1, False, 128, 8), ("GRU", 256, 2, True, 50, 16),
    ("GRU", 256, 2, True, 200, 16), ("LSTM", 128, 1, False, 64, 32), ("LSTM", 128, 2, False, 256, 32),
    ("LSTM", 512, 1, False, 100, 4), ("LSTM", 512, 2, True, 100, 4), ("RNN", 128, 1, False, 300, 16),
    ("RNN", 64, 3, True, 40, 8), ("LSTM", 1024, 1, False, 32, 64), ("GRU", 128, 4, False, 120, 2),
]
REPEATS = 10


def probe(cell: str, hidden: int, layers: int, bidirectional: bool, steps: int, batch: int) -> dict:
    module = getattr(torch.nn, cell)(hidden, hidden, num_layers=layers, bidirectional=bidirectional).cuda().eval()
    x = torch.randn(steps, batch, hidden, device="cuda")
    with torch.no_grad():
        for _ in range(3):
            module(x)
        torch.cuda.synchronize()
        host, wall = [], []
        for _ in range(REPEATS):
            torch.cuda.synchronize()
            start, start_wall = thread_cpu_ns(), time.perf_counter_ns()
            module(x)
            host.append((thread_cpu_ns() - start) / 1e3)
            wall.append((time.perf_counter_ns() - start_wall) / 1e3)
            torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            module(x)
            torch.cuda.synchronize()
    items = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return {"config": {"cell": cell, "hidden": hidden, "layers": layers, "bidirectional": bidirectional,
                       "steps": steps, "batch": batch},
            "host_us": host, "host_us_median": statistics.median(host),
            "wall_us_median": statistics.median(wall), "work_items": len(items),
            "gpu_us": sum(e.device_time for e in items)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    bench_before = measure_cpu_bench().to_json()
    for config in CONFIGS:
        row = probe(*config)
        rows.append(row)
        print(row["config"], f"host {row['host_us_median']:.0f} us, {row['work_items']} items, "
              f"GPU {row['gpu_us']:.0f} us", flush=True)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "date": time.strftime("%Y-%m-%d %H:%M"), "command": "PYTHONPATH=src python3 scripts/device/probe_library_launches.py"
           " --out OUT", "cpu_bench_before": bench_before, "cpu_bench_after": measure_cpu_bench().to_json(),
           "rows": rows}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
