"""How a memory-bound kernel's time depends on what the L2 cache holds when it starts (run on a GPU).

    PYTHONPATH=src python3 scripts/device/probe_l2_flush.py --out $OUT/l2_flush_probe.json

One out-of-place relu (`clamp_min(x, 0, out=y)`, bf16 and fp32) per total size (bytes read + written,
2-400 MB), timed by torch.profiler (kernel durations, median of REPEATS) under three conditions:
- dirty: after `bitwise_not_()` of a 256 MiB buffer, the calibration's flush (calibrate/timing.py), which
  leaves the L2 full of dirty lines that the kernel must write back;
- clean: after a read-only pass (`sum`) over the same buffer: L2 holds clean lines of another tensor;
- chained: its input was written by the kernel just before (a neg of another buffer into it), as in a model.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

FLUSH_BYTES = 256 << 20
REPEATS = 15
TOTAL_MB = (2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 400)


def measure(dtype: torch.dtype, total_mb: int, condition: str) -> float:
    n = total_mb * (1 << 20) // 2 // torch.finfo(dtype).bits * 8
    x, y = torch.randn(n, device="cuda", dtype=dtype), torch.empty(n, device="cuda", dtype=dtype)
    src = torch.randn(n, device="cuda", dtype=dtype)
    buf = torch.zeros(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        torch.clamp_min(x, 0.0, out=y)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPEATS):
            if condition == "dirty":
                buf.bitwise_not_()
            elif condition == "clean":
                buf.sum()
            else:  # chained: x is written just before the timed kernel reads it
                torch.neg(src, out=x)
            torch.clamp_min(x, 0.0, out=y)  # the relu timed
        torch.cuda.synchronize()
    times = [e.time_range.end - e.time_range.start for e in prof.events()
             if e.device_type == DeviceType.CUDA and "clamp" in e.name.lower()]
    return statistics.median(times) if times else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for mb in TOTAL_MB:
            row = {"dtype": str(dtype).split(".")[-1], "total_mb": mb}
            for condition in ("dirty", "clean", "chained"):
                row[condition] = round(measure(dtype, mb, condition), 3)
            rows.append(row)
            print(row, flush=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "repeats": REPEATS,
            "command": "PYTHONPATH=src python3 scripts/device/probe_l2_flush.py --out $OUT/l2_flush_probe.json"}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
