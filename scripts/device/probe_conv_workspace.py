"""Device probe: the workspace cuDNN's convolutions take from PyTorch's caching allocator (issue 31).

    PYTHONPATH=src python3 scripts/device/probe_conv_workspace.py --out $OUT/h200_conv_workspace.json.gz   # on a GPU

A cuDNN convolution (aten/src/ATen/native/cudnn/Conv_v8.cpp) asks the engine its heuristics pick for a workspace
and takes it from the caching allocator for the call (`c10::cuda::CUDACachingAllocator::get()->allocate`),
freed as the call returns: it is in max_memory_allocated() but is no output, so a capture cannot see it. Its size
is the engine's choice, so it is measured here: every convolution of the calibration sweep's conv sections
(calibrate/sweep.py: the designed 1-D/2-D grid, the log-uniform draw, the volumetric and transposed draws; each
in its three passes, every dtype and layout), called WARMUP times (the plan is cached after the first), then once
between reset_peak_memory_stats() and max_memory_allocated(): workspace = peak - memory_allocated() before - the
call's outputs. A sample is measured again with torch.backends.cudnn.benchmark = True (cudnnFind's fastest
engine, which may take a larger workspace).

The kernels each case ran are in the sweep's raw files (validation/h200_conv_*_raw.json.gz, same cases, same
order); this probe records memory only. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from pathlib import Path

import torch

from kernelcast.calibrate.sweep import sweep_cases

SECTIONS = ("conv_volumetric", "conv", "conv_log_uniform", "conv_volumetric_wide")  # the least covered first
WARMUP = 2
BENCHMARK_SAMPLE = 150  # cases measured again with cudnn.benchmark = True
SEED = 20261204
TIME_BUDGET_S = 400.0  # the plain sweep; the benchmark sample has BENCHMARK_BUDGET_S more
BENCHMARK_BUDGET_S = 90.0


def _outputs_bytes(out) -> int:
    items = out if isinstance(out, (tuple, list)) else (out,)
    return sum(t.untyped_storage().nbytes() for t in items if isinstance(t, torch.Tensor))


def measure(call) -> dict:
    for _ in range(WARMUP):
        call()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = call()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    outputs = _outputs_bytes(out)
    kept = torch.cuda.memory_allocated() - before - outputs
    del out
    return {"peak_over_before": peak, "outputs": outputs, "workspace": max(peak - outputs, 0), "kept": kept}


def run(section: str, benchmark: bool, rows: list, deadline: float, sample: set | None = None) -> None:
    torch.backends.cudnn.benchmark = benchmark
    for i, case in enumerate(sweep_cases([section])):
        if sample is not None and i not in sample:
            continue
        if time.perf_counter() > deadline:
            rows.append({"section": section, "stopped_at": i, "benchmark": benchmark})
            return
        row = {"section": section, "index": i, "benchmark": benchmark, **case.params}
        try:
            row.update(measure(case.build()))
        except Exception as exc:  # a shape a backend refuses, or out of memory: data too
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        rows.append(row)
        if i % 200 == 0:
            torch.cuda.empty_cache()
    torch.backends.cudnn.benchmark = False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    start = time.perf_counter()
    deadline = start + TIME_BUDGET_S
    rows: list = []
    for section in SECTIONS:
        run(section, False, rows, deadline)
        print(f"{section}: {time.perf_counter() - start:.0f} s, {len(rows)} rows", flush=True)
    volumetric = len(list(sweep_cases(["conv_volumetric"])))
    sample = set(random.Random(SEED).sample(range(volumetric), min(BENCHMARK_SAMPLE, volumetric)))
    run("conv_volumetric", True, rows, time.perf_counter() + BENCHMARK_BUDGET_S, sample)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "allow_tf32": torch.backends.cudnn.allow_tf32, "date": time.strftime("%Y-%m-%d"),
           "command": "PYTHONPATH=src python3 scripts/device/probe_conv_workspace.py --out h200_conv_workspace.json.gz",
           "seconds": round(time.perf_counter() - start, 1), "rows": rows}
    with gzip.open(args.out, "wt") as f:
        json.dump(doc, f)
    print(f"{len(rows)} rows, {sum('error' in r for r in rows)} errors, {doc['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
