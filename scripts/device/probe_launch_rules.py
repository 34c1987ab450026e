"""Device check of the launch rules that no zoo workload exercised (kernelcast/costs/norms.py, indexing.py,
embedding.py, scans.py, losses.py): GPU work items per case, with the kernel names, on the GPU machine.

    PYTHONPATH=src python3 scripts/device/probe_launch_rules.py --out $OUT/launch_rules.json

Each case runs twice to warm up, then once under torch.profiler; the work items counted are those launched under
the named aten op (kernelcast.measure.attribute), so set-up kernels do not count. Re-predict the same cases here
with tests/costs/test_launch_rules.py's rules and compare.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from kernelcast.measure import attribute

DEV = "cuda"


def _cases() -> dict:
    """name -> (aten op whose launches are counted, a function running it; inputs made outside)."""
    x_split = torch.randn(131072, 64, device=DEV, requires_grad=True)  # M > 64K, N / 32 < SMs / 2
    ln = torch.nn.LayerNorm(64).to(DEV)
    flat = torch.randn(4096 * 2040 + 1, device=DEV)
    shifted = flat[1:].view(4096, 2040)  # 4 bytes past an aligned allocation
    target = torch.zeros(1000, 64, device=DEV)
    idx = torch.randint(0, 1000, (5000,), device=DEV)
    vals = torch.randn(5000, 64, device=DEV)
    long_rows = torch.randn(8, 100_000, device=DEV)
    wide_k = torch.randn(4, 10_000, device=DEV)
    p = torch.rand(4096, device=DEV, requires_grad=True)
    y = torch.rand(4096, device=DEV)
    w = torch.rand(4096, device=DEV)
    emb = torch.nn.Embedding(50_000, 64, scale_grad_by_freq=True).to(DEV)
    tokens = torch.randint(0, 50_000, (8, 512), device=DEV)
    col = torch.randn(512, 64, device=DEV).t()
    src = torch.randn(2000, 4, device=DEV)
    dst = torch.randint(0, 100, (2000, 1), device=DEV).expand(-1, 4)
    return {
        "layer_norm_backward_split_M": ("native_layer_norm_backward",
                                        lambda: ln(x_split).square().mean().backward()),
        "layer_norm_offset_view": ("native_layer_norm", lambda: F.layer_norm(shifted, (2040,))),
        "index_put_accumulate_checked": ("index_put_", lambda: target.index_put_((idx,), vals, accumulate=True)),
        "topk_multiblock": ("topk", lambda: torch.topk(long_rows, 10)),
        "topk_large_k": ("topk", lambda: torch.topk(wide_k, 5000)),
        "bce_mean_weighted": ("binary_cross_entropy",
                              lambda: F.binary_cross_entropy(p, y, weight=w).backward()),
        "embedding_scale_grad_by_freq": ("embedding_dense_backward",
                                         lambda: emb(tokens).square().mean().backward()),
        "cumsum_strided": ("cumsum", lambda: col.cumsum(1)),
        "scatter_reduce_mean_exclude_self": ("scatter_reduce", lambda: torch.zeros(100, 4, device=DEV).scatter_reduce(
            0, dst, src, reduce="mean", include_self=False)),
    }


def _profile(fn) -> list:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels, _ = attribute(prof.events(), None)
    return kernels


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "cases": {}}
    for name, (op, fn) in _cases().items():
        for _ in range(2):
            fn()
        kernels = [k for k in _profile(fn) if op in k.chain]
        result["cases"][name] = {"op": op, "work_items": len(kernels),
                                 "kernels": [["/".join(k.chain), k.name[:160]] for k in kernels]}
        print(f"{name:36s} {op:28s} {len(kernels)}", flush=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
