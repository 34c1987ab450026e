"""Keep whole the ops that a CUDA build runs as one kernel but a CPU-only build would decompose.

A few ops have both a CUDA kernel and a CompositeImplicitAutograd formula, which serves backends without a
kernel. On a CPU-only build the CUDA key has no kernel, so on fake CUDA tensors the dispatcher runs the
formula: SiLU's backward became seven ops (sigmoid, fill, sub, four multiplies and adds) where the GPU runs
one kernel. A stand-in CUDA kernel, registered for the length of the capture, gives the dispatcher the CUDA
build's choice. FakeTensorMode, a Python mode ahead of the CUDA key, computes the op, so the stand-in never
runs.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

# Ops with a CUDA kernel and a CompositeImplicitAutograd formula (aten/src/ATen/native/native_functions.yaml).
# Ops whose formula is also what CUDA runs (native_channel_shuffle: a CPU kernel only) are not listed.
# _fused_rms_norm: rms_norm calls it for CUDA inputs; the H200 ran it as one vectorized_layer_norm_kernel<T, T,
# true> (zoo layernorm_odd_widths), where the formula is pow, mean, add, rsqrt and two muls.
WHOLE_ON_CUDA = ("silu_backward", "mish_backward", "_fused_rms_norm")


def _stand_in(*args, **kwargs):
    raise RuntimeError("kernelcast: a stand-in CUDA kernel ran; fake tensors should never reach it")


def _needs_stand_in(name: str) -> bool:
    return (torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "CompositeImplicitAutograd")
            and not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "CUDA"))


@contextlib.contextmanager
def cuda_kernels_kept_whole() -> Iterator[None]:
    """On a CPU-only build, stand-in CUDA kernels for WHOLE_ON_CUDA; on a CUDA build, nothing to do."""
    missing = [name for name in WHOLE_ON_CUDA if _needs_stand_in(name)]
    if not missing:
        yield
        return
    lib = torch.library.Library("aten", "IMPL")
    try:
        for name in missing:
            lib.impl(name, _stand_in, "CUDA")
        yield
    finally:
        lib._destroy()
