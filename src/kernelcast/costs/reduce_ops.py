"""Reductions built from a few kernels that torch does not tag as reductions.

- renorm (ReduceOps.cpp, TORCH_IMPL_FUNC(renorm_out)): linalg_vector_norm over every dim but `dim` (one
  reduce, plus its semaphore memset when global), the scale factor (one kernel), then a mul: three kernels.
- dist (CompositeExplicitAutograd: at::norm(self - other, p)): a sub, then the norm's reduce.
- hash_tensor (ReduceOps.cpp): one reduce kernel over the hashed dims.
- segment_reduce (cuda/SegmentReduce.cu): with `lengths` the offsets are built first (new_zeros, cumsum, a copy
  into the slice: three kernels), then one segment kernel; with `offsets`, the kernel alone. Backward: the same
  offsets, a zero-filled input gradient, one kernel.
- multinomial (Distributions.cpp, multinomial_out): without replacement or for one sample, the input is
  checked on the host (`((max < inf) & (min >= 0)).item()`, then `(sum == 0).item()`: two device-to-host reads
  the host waits for, capture/recorder.py), then q = exponential_ noise, self / q, argmax (one sample) or topk.
  With replacement: multinomial_with_replacement_kernel_impl (ASSUMED: a normalised copy, a cumsum, the
  sampling kernel).
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import OpRecord

from .common import arg, memory_op
from .reduce_config import REDUCE_SEMAPHORE_MEMSETS, is_global_reduce
from .registry import Cost, CostContext, register

REDUCE_FLOPS_PER_ELEMENT = 1.0
RENORM_TAIL_KERNELS = 2  # scale factor, mul
DIST_SUB_KERNELS = 1
SEGMENT_OFFSETS_KERNELS = 3  # new_zeros, cumsum, copy_ into offsets[1:]
ZERO_FILL_KERNELS = 1
MULTINOMIAL_VALIDITY_ITEMS = 6  # max, lt, min, ge, and, .item() memcpy
MULTINOMIAL_ZERO_ROW_ITEMS = {1: 3, 2: 4}  # by rank: sum, eq, (sum,) .item() memcpy
MULTINOMIAL_GUMBEL_KERNELS = 3  # exponential_, div, argmax / topk
MULTINOMIAL_WITH_REPLACEMENT_ITEMS = 3  # ASSUMED: normalised copy, cumsum, sampling kernel


def _memsets(outputs: int, per_output: int, ctx: CostContext) -> int:
    return REDUCE_SEMAPHORE_MEMSETS * is_global_reduce(max(outputs, 1), per_output, True, ctx.sm_count,
                                                       ctx.max_threads_per_sm)


@register("aten.renorm", "aten.renorm_")
def renorm(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    dim = int(op.args.get("dim") or 0) % max(len(x.shape), 1)
    rows = x.shape[dim] if x.shape else 1
    kernels = 1 + _memsets(rows, x.numel // max(rows, 1), ctx) + RENORM_TAIL_KERNELS
    return memory_op(op, 3 * REDUCE_FLOPS_PER_ELEMENT, kernels, kind="reduction")


@register("aten.dist")
def dist(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    kernels = DIST_SUB_KERNELS + 1 + _memsets(1, x.numel, ctx)
    return memory_op(op, 2 * REDUCE_FLOPS_PER_ELEMENT, kernels, kind="reduction")


@register("aten.hash_tensor")
def hash_tensor(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    outs = op.tensors_out()
    outputs = outs[0].numel if outs else 1
    kernels = 1 + _memsets(outputs, x.numel // max(outputs, 1), ctx)
    return memory_op(op, REDUCE_FLOPS_PER_ELEMENT, kernels, kind="reduction")


def _offsets_kernels(op: OpRecord) -> int:
    return SEGMENT_OFFSETS_KERNELS * (op.args.get("lengths") is not None)


@register("aten.segment_reduce")
def segment_reduce(op: OpRecord, ctx: CostContext) -> Cost:
    return memory_op(op, REDUCE_FLOPS_PER_ELEMENT, _offsets_kernels(op) + 1, kind="reduction")


@register("aten._segment_reduce_backward")
def segment_reduce_backward(op: OpRecord, ctx: CostContext) -> Cost:
    base = memory_op(op, REDUCE_FLOPS_PER_ELEMENT, _offsets_kernels(op) + ZERO_FILL_KERNELS + 1, kind="reduction")
    return dataclasses.replace(base, bytes_written=2 * base.bytes_written)


def multinomial_reads_back(num_samples: int, replacement: bool) -> bool:
    """Whether torch.multinomial validates its input on the host (the Gumbel path: Distributions.cpp)."""
    return not replacement or num_samples == 1


@register("aten.multinomial")
def multinomial(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    samples = int(op.args.get("num_samples") or 1)
    if multinomial_reads_back(samples, bool(op.args.get("replacement"))):
        kernels = (MULTINOMIAL_VALIDITY_ITEMS + MULTINOMIAL_ZERO_ROW_ITEMS[min(max(len(x.shape), 1), 2)]
                   + MULTINOMIAL_GUMBEL_KERNELS)
    else:
        kernels = MULTINOMIAL_WITH_REPLACEMENT_ITEMS
    return memory_op(op, REDUCE_FLOPS_PER_ELEMENT, kernels, kind="reduction")
