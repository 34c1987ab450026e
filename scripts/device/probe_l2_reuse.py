"""Device probe: does a kernel read a tensor faster when the kernel before it wrote it, or read it (issue 33)?

    PYTHONPATH=src python3 scripts/device/probe_l2_reuse.py --out $OUT/l2_reuse.json    # on a GPU

KernelBench's repeated calls and the reduce_warm_grid (calibrate/grids.py) read a reduction's input from L2 1.1-2.9x
faster than after the L2 flush, yet the zoo's training steps ran their bias-gradient sums, whose input the kernel
before had just written, at the flushed speed (docs/accuracy.md 2026-12-06, "Tried, not kept"). Each case here is a
short sequence timed by torch.profiler after the L2 flush (kernelcast.measure.kernel_durations), and its last
kernel, the consumer, is the one compared: a column sum (sum over dim 0) or a pointwise add of an (N, C) fp32
tensor of 0.5-32 MiB, after nothing (cold), after a kernel that read it, after a kernel that wrote it, and after a
kernel that wrote it and a GEMM that read it and another tensor of its size (a linear layer's backward order:
grad_out written, grad_weight = grad_out^T @ x, then grad_bias = grad_out.sum(0)).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from kernelcast.measure import kernel_durations

SIZES_MIB = (0.5, 2, 8, 32)
WIDTHS = (256, 1024)
REPEATS = 20


def _consumers(y: torch.Tensor) -> dict:
    return {"sum0": lambda: y.sum(0), "add": lambda: y + 1.0}


def _sequences(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> dict:
    """What runs before the consumer, by name."""
    return {
        "cold": lambda: None,
        "after_read": lambda: y.sum(),  # reads all of y, writes one value
        "after_write": lambda: torch.mul(x, 2.0, out=y),  # writes all of y (reads x)
        "after_write_gemm": lambda: (torch.mul(x, 2.0, out=y), torch.mm(y.t(), w)),  # then y and w read again
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    t0 = time.time()
    rows = []
    for mib in SIZES_MIB:
        for width in WIDTHS:
            n = max(int(mib * 2 ** 20 / 4 / width), 1)
            x, y, w = (torch.randn(n, width, device="cuda") for _ in range(3))
            for seq_name, prefix in _sequences(x, y, w).items():
                for cons_name, consumer in _consumers(y).items():
                    def call(prefix=prefix, consumer=consumer):
                        prefix()
                        return consumer()
                    calls = kernel_durations(call, REPEATS, flush=True)
                    last = [c[-1][1] for c in calls if c]
                    rows.append({"mib": mib, "rows": n, "width": width, "sequence": seq_name, "consumer": cons_name,
                                 "consumer_kernel": calls[-1][-1][0][:90] if calls[-1] else "",
                                 "kernels_per_call": len(calls[-1]), "consumer_us": statistics.median(last),
                                 "consumer_us_all": [round(v, 3) for v in last]})
                    print(f"{mib:5} MiB x{width:5d} {seq_name:17s} {cons_name:5s} {statistics.median(last):8.2f} us",
                          flush=True)
            del x, y, w
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "command": "PYTHONPATH=src python3 scripts/device/probe_l2_reuse.py --out l2_reuse.json",
           "seconds": round(time.time() - t0, 1), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
