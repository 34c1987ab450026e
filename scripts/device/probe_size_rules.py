"""Launches and memory that PyTorch's CUDA host code decides by a tensor's size, measured on the device.

    (device) PYTHONPATH=src python3 scripts/device/probe_size_rules.py --out $OUT/size_rules.json

Three rules kernelcast reads from PyTorch's source (costs/tensor_iterator.py, costs/pooling.py grid_z_launches,
predict/memory.py FULL_STORAGE_LOSSES), each tried at shapes no KernelBench program has: TensorIterator ops
past 32-bit index math (pointwise, casts, strided copies, fills, random draws, reductions along a dim and to one
value), NCDHW and channels_last 3-D pools past 65535 grid-z blocks, forward and backward, and the memory a reduced
loss holds. Per case: the work items the call ran (torch.profiler's CUDA events: kernels, memsets, copies) and
the rise of max_memory_allocated() over the call, from memory_allocated() before it. scripts/eval/size_rules_check.py
compares kernelcast's prediction of each. About a minute on an H100 (the largest case holds 17 GB).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

GIB = 1 << 30


def cases() -> dict:
    """name -> (make: () -> inputs, call: inputs -> output); every tensor made on "cuda"."""
    def randn(*shape, dtype=torch.float32, **kw):
        return lambda: torch.randn(*shape, device="cuda", dtype=dtype, **kw)

    big = (1 << 29) + (1 << 20)  # fp32 elements just past 2 GiB
    return {
        "gelu_4gb_fp32": (randn(128, 64, 32, 64, 64), F.gelu),
        "add_bf16_2gb": (lambda: (torch.randn(2 * big, device="cuda", dtype=torch.bfloat16),
                                  torch.randn(2 * big, device="cuda", dtype=torch.bfloat16)), lambda ab: ab[0] + ab[1]),
        "mul_scalar_8gb": (randn(4 * big), lambda x: x * 2.0),
        "bias_broadcast_add": (lambda: (torch.randn(64, 256, 64, 64, 16, device="cuda"),
                                        torch.randn(256, 1, 1, 1, device="cuda")), lambda ab: ab[0] + ab[1]),
        "cast_bf16_to_fp32": (randn(2 * big, dtype=torch.bfloat16), lambda x: x.float()),
        "transposed_copy": (randn(big // 4096, 4096), lambda x: x.t().contiguous()),
        "zeros_4gb": (lambda: None, lambda _: torch.zeros(2 * big, device="cuda")),
        "randn_4gb": (lambda: None, lambda _: torch.randn(2 * big, device="cuda")),
        "sum_rows_4gb": (randn(2 * big // 1024, 1024), lambda x: x.sum(dim=1)),
        "sum_all_4gb": (randn(2 * big), lambda x: x.sum()),
        "amax_cols_4gb": (randn(2 * big // 1024, 1024), lambda x: x.amax(dim=0)),
        "avg_pool3d_70k_frames": (randn(64, 64, 34, 16, 16), lambda x: F.avg_pool3d(x, 2)),
        "max_pool3d_131k_frames": (randn(128, 64, 32, 8, 8), lambda x: F.max_pool3d(x, 2)),
        "max_pool3d_131k_channels_last": (lambda: torch.randn(128, 64, 32, 8, 8, device="cuda").to(
            memory_format=torch.channels_last_3d), lambda x: F.max_pool3d(x, 2)),
        "avg_pool3d_backward": (randn(64, 64, 34, 16, 16, requires_grad=True),
                                lambda x: _backward(F.avg_pool3d(x, 2), x)),
        "max_pool3d_backward": (randn(128, 64, 32, 8, 8, requires_grad=True),
                                lambda x: _backward(F.max_pool3d(x, 2), x)),
        "mse_loss": (lambda: (torch.randn(256, 8192, device="cuda"), torch.randn(256, 8192, device="cuda")),
                     lambda ab: F.mse_loss(*ab)),
        "smooth_l1_loss": (lambda: (torch.randn(256, 8192, device="cuda"), torch.randn(256, 8192, device="cuda")),
                           lambda ab: F.smooth_l1_loss(*ab)),
        "huber_loss": (lambda: (torch.randn(256, 8192, device="cuda"), torch.randn(256, 8192, device="cuda")),
                       lambda ab: F.huber_loss(*ab)),
        "soft_margin_loss": (lambda: (torch.randn(256, 8192, device="cuda"), torch.randn(256, 8192, device="cuda")),
                             lambda ab: F.soft_margin_loss(*ab)),
        "bce_loss": (lambda: (torch.rand(256, 8192, device="cuda"), torch.rand(256, 8192, device="cuda")),
                     lambda ab: F.binary_cross_entropy(*ab)),
        "mse_loss_sum_bf16": (lambda: (torch.randn(256, 8192, device="cuda", dtype=torch.bfloat16),
                                       torch.randn(256, 8192, device="cuda", dtype=torch.bfloat16)),
                              lambda ab: F.mse_loss(*ab, reduction="sum")),
    }


def _backward(y: torch.Tensor, x: torch.Tensor) -> None:
    """y's backward into a fresh x.grad (set to None first: every call makes the gradient, none accumulates)."""
    x.grad = None
    y.sum().backward()


def measure(make, call) -> dict:
    """One warm call, then one profiled call: its CUDA work items; then one more for the memory it takes."""
    inputs = make()
    out = call(inputs)  # warm-up: cuDNN / cuBLAS handles, the allocator's segments
    del out
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = call(inputs)
        torch.cuda.synchronize()
    del out
    items = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = call(inputs)
    torch.cuda.synchronize()
    growth = torch.cuda.max_memory_allocated() - before
    kept = (torch.cuda.memory_allocated() - before) if out is not None else 0
    del out, inputs
    torch.cuda.empty_cache()
    return {"work_items": len(items), "names": [n[:120] for n in items], "peak_growth_bytes": growth,
            "kept_bytes": kept}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    start = time.time()
    rows = {}
    for name, (make, call) in cases().items():
        if args.only and name not in args.only:
            continue
        try:
            rows[name] = measure(make, call)
        except Exception as e:  # one case out of memory or unsupported: the others still count
            rows[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
            torch.cuda.empty_cache()
        print(name, {k: v for k, v in rows[name].items() if k != "names"}, flush=True)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "command": "python3 scripts/device/probe_size_rules.py --out size_rules.json",
           "seconds": round(time.time() - start, 1), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
