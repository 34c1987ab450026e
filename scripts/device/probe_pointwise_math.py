"""Which pointwise ops are bound by their arithmetic rather than by memory on this GPU (run on a GPU).

    PYTHONPATH=src python3 scripts/device/probe_pointwise_math.py --out $OUT/pointwise_math_probe.json

Each unary op on a contiguous tensor of N elements (bf16, fp16 and fp32; N = 4M and 64M: 8-512 MB moved), timed
by torch.profiler (kernel duration, median of REPEATS, L2 flushed before each call as the calibration does).
A memory-bound op moves its 2 x N x item-size bytes at the copy rate; an arithmetic-bound one takes about the
same time in bf16 as in fp32 (half the bytes, the same math per element).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F

from kernelcast.measure import kernel_durations

REPEATS = 10
ELEMENTS = (1 << 22, 1 << 26)
OPS = {
    "neg": torch.neg, "relu": torch.relu, "abs": torch.abs, "mul_scalar": lambda x: x * 0.5,
    "hardswish": F.hardswish, "sigmoid": torch.sigmoid, "silu": F.silu, "tanh": torch.tanh, "exp": torch.exp,
    "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "erf": torch.erf,
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "mish": F.mish, "softplus": F.softplus,
    "elu": F.elu, "leaky_relu": F.leaky_relu, "pow2": lambda x: x.pow(2), "reciprocal": torch.reciprocal,
}


def time_us(fn, x) -> float:
    """The median kernel duration of REPEATS calls, the L2 flushed before each (kernelcast.measure kernel_durations)."""
    return statistics.median(us for call in kernel_durations(lambda: fn(x), REPEATS) for _, us in call)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    for n in ELEMENTS:
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            x = torch.rand(n, device="cuda", dtype=dtype) + 0.1
            for name, fn in OPS.items():
                us = time_us(fn, x)
                moved = 2 * n * x.element_size()
                rows.append({"op": name, "dtype": str(dtype).split(".")[-1], "elements": n, "us": round(us, 3),
                             "tb_per_s": round(moved / us / 1e6, 3), "g_elements_per_s": round(n / us / 1e3, 1)})
                print(rows[-1], flush=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "repeats": REPEATS,
            "command": "PYTHONPATH=src python3 scripts/device/probe_pointwise_math.py --out $OUT/pointwise_math_probe.json"}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
