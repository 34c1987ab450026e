"""Pairwise distances: torch.cdist and torch.nn.functional.pdist (aten/src/ATen/native/Distance.cpp and
native/cuda/DistanceKernel.cu).

- _cdist_forward (cdist_impl): with p == 2 and compute_mode 1, or mode 0 with more than
  CDIST_MM_MIN_ROWS rows on either side, the matmul form `_euclidean_dist`: x.pow(2).sum(-1) and a ones pad for
  each input, x1.mul(-2), two cats, one (batched) GEMM of the padded operands, clamp_min_, sqrt_ (12 kernels,
  EUCLIDEAN_DIST_KERNELS); FLOPs 2 * r1 * r2 * (c + 2) per batch for the GEMM. Otherwise one distance kernel:
  per pair of rows, c differences, powers and adds (DIRECT_FLOPS_PER_TERM per term, nominal).
- _cdist_backward, _pdist_backward: one kernel writes per-pair contributions into a buffer, then a sum over the
  pairs (at::sum_out): two kernels.
- _pdist_forward: one kernel over the n(n-1)/2 pairs.
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord

from .common import arg, bytes_read, bytes_written
from .registry import Cost, CostContext, register

CDIST_MM_MIN_ROWS = 25  # r1 > 25 or r2 > 25 selects the matmul form (compute_mode 0)
EUCLIDEAN_DIST_KERNELS = 12  # pow, sum, ones_like (x2), mul, cat (x2), GEMM, clamp_min_, sqrt_
DIRECT_FLOPS_PER_TERM = 3.0  # difference, power, accumulate
BUFFER_THEN_SUM_KERNELS = 2
EUCLIDEAN_COMPUTE_MODE = 1  # "use_mm_for_euclid_dist"


def _batch(shape: tuple[int, ...]) -> int:
    return math.prod(shape[:-2]) if len(shape) > 2 else 1


def _cost(op: OpRecord, flops: float, kernels: int, math_kind: str = "vector") -> Cost:
    t = arg(op, "x1") if "x1" in op.args else arg(op, "self")
    return Cost(flops=flops, bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=kernels,
                math=math_kind, dtype=t.dtype, kind="gemm" if math_kind == "matmul" else "reduction")


def uses_matmul(p: float, mode: int | None, r1: int, r2: int) -> bool:
    return p == 2 and (mode == EUCLIDEAN_COMPUTE_MODE or (not mode and (r1 > CDIST_MM_MIN_ROWS
                                                                           or r2 > CDIST_MM_MIN_ROWS)))


@register("aten._cdist_forward")
def cdist_forward(op: OpRecord, ctx: CostContext) -> Cost:
    x1, x2 = arg(op, "x1"), arg(op, "x2")
    r1, c = x1.shape[-2:]
    r2 = x2.shape[-2]
    batch = max(_batch(x1.shape), _batch(x2.shape))
    if uses_matmul(float(op.args.get("p", 2.0)), op.args.get("compute_mode"), r1, r2):
        return _cost(op, 2.0 * batch * r1 * r2 * (c + 2), EUCLIDEAN_DIST_KERNELS, "matmul")
    return _cost(op, DIRECT_FLOPS_PER_TERM * batch * r1 * r2 * c, 1)


@register("aten._cdist_backward")
def cdist_backward(op: OpRecord, ctx: CostContext) -> Cost:
    x1, x2 = arg(op, "x1"), arg(op, "x2")
    r1, c = x1.shape[-2:]
    r2 = x2.shape[-2]
    batch = max(_batch(x1.shape), _batch(x2.shape))
    return _cost(op, DIRECT_FLOPS_PER_TERM * batch * r1 * r2 * c, BUFFER_THEN_SUM_KERNELS)


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


@register("aten._pdist_forward")
def pdist_forward(op: OpRecord, ctx: CostContext) -> Cost:
    n, c = arg(op, "self").shape[-2:]
    return _cost(op, DIRECT_FLOPS_PER_TERM * _pairs(n) * c, 1)


@register("aten._pdist_backward")
def pdist_backward(op: OpRecord, ctx: CostContext) -> Cost:
    n, c = arg(op, "self").shape[-2:]
    return _cost(op, DIRECT_FLOPS_PER_TERM * _pairs(n) * c, BUFFER_THEN_SUM_KERNELS)
