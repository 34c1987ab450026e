"""Losses that run a pointwise kernel, then reduce it; and their backward, which zero-fills, then writes.

From aten/src/ATen/native/Loss.cpp (the same code serves CPU and CUDA through dispatch stubs):
- mse_loss, smooth_l1_loss, huber_loss: one TensorIterator kernel writes the per-element loss; reduction "mean"
  or "sum" then runs a full reduction (at::mean_out / at::sum_out / apply_loss_reduction) into a 0-d result, a
  second kernel, plus the semaphore memset of a global reduce when the reduction splits across blocks
  (reduce_config.py). reduction "none" is the one kernel.
- mse_loss_backward, smooth_l1_loss_backward, huber_loss_backward: `at::zeros_like(input)` (a fill kernel),
  then one TensorIterator kernel writes the gradient: two work items.
- soft_margin_loss: neg_out, mul_, exp_, log1p_ (four kernels; torch before the log1p change ran add_ and log_),
  then the reduction and a copy into the resized output; its backward: neg, mul, exp (z = exp(-target * input)),
  mul_out, mul_, add_, div_, mul_ (eight kernels).
Measured on the H200 (torch 2.11, zoo losses_train, 1024x128 fp32): huber_loss 3 items (loss, memset, mean),
huber_loss_backward 2 (fill, gradient); smooth_l1_loss 3, smooth_l1_loss_backward 2.
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import OpRecord

from .common import bytes_written, memory_key, memory_op
from .reduce_config import is_global_reduce
from .registry import Cost, CostContext, register

LOSS_FLOPS_PER_ELEMENT = 1.0  # nominal: a subtract and a square / compare per element (bytes set the roof)
REDUCTION_NONE = 0  # at::Reduction::None; Mean = 1, Sum = 2
REDUCE_SEMAPHORE_MEMSETS = 1
ZERO_FILL_KERNELS = 1
SOFT_MARGIN_FORWARD_KERNELS = 4  # neg_out, mul_, exp_, log1p_
SOFT_MARGIN_REDUCED_COPY_KERNELS = 1  # output.copy_(reduced)
SOFT_MARGIN_BACKWARD_KERNELS = 8  # neg, mul, exp, mul_out, mul_, add_, div_, mul_


def _input(op: OpRecord):
    return op.args.get("self") if "self" in op.args else op.args.get("input")


def reduction_kernels(numel: int, ctx: CostContext) -> int:
    """A full reduction of `numel` elements to one value: one kernel, a memset more when it is global."""
    return 1 + REDUCE_SEMAPHORE_MEMSETS * is_global_reduce(1, numel, True, ctx.sm_count, ctx.max_threads_per_sm)


def _reduced(op: OpRecord) -> bool:
    return int(op.args.get("reduction", 1) or 0) != REDUCTION_NONE


@register("aten.mse_loss", "aten.smooth_l1_loss", "aten.huber_loss")
def pointwise_then_reduce(op: OpRecord, ctx: CostContext) -> Cost:
    """The loss kernel writes one value per element; a reduction reads them back into the 0-d result."""
    x = _input(op)
    base = memory_op(op, LOSS_FLOPS_PER_ELEMENT, kind="loss")
    if not _reduced(op) or x is None:
        return base
    per_element = x.numel * x.itemsize  # the intermediate loss tensor: written, then read by the reduction
    return dataclasses.replace(base, bytes_read=base.bytes_read + per_element,
                               bytes_written=base.bytes_written + per_element,
                               kernels=1 + reduction_kernels(x.numel, ctx))


@register("aten.mse_loss_backward", "aten.smooth_l1_loss_backward", "aten.huber_loss_backward")
def zero_then_gradient(op: OpRecord, ctx: CostContext) -> Cost:
    """zeros_like(input) then the gradient kernel over it: the gradient is written twice."""
    base = memory_op(op, LOSS_FLOPS_PER_ELEMENT, kind="loss")
    return dataclasses.replace(base, bytes_written=2 * base.bytes_written, kernels=ZERO_FILL_KERNELS + 1)


@register("aten.soft_margin_loss")
def soft_margin_loss(op: OpRecord, ctx: CostContext) -> Cost:
    x = _input(op)
    kernels = SOFT_MARGIN_FORWARD_KERNELS
    if _reduced(op) and x is not None:
        kernels += reduction_kernels(x.numel, ctx) + SOFT_MARGIN_REDUCED_COPY_KERNELS
    return _chain(op, kernels)


@register("aten.soft_margin_loss_backward")
def soft_margin_loss_backward(op: OpRecord, ctx: CostContext) -> Cost:
    return _chain(op, SOFT_MARGIN_BACKWARD_KERNELS)


def _chain(op: OpRecord, kernels: int) -> Cost:
    """A run of pointwise kernels over the input's size: each reads and writes it once."""
    x = _input(op)
    n_bytes = (x.numel * x.itemsize) if x is not None else bytes_written(op)
    kind, key = memory_key(op, "loss")
    return Cost(flops=LOSS_FLOPS_PER_ELEMENT * kernels * (x.numel if x is not None else 0),
                bytes_read=kernels * n_bytes, bytes_written=kernels * n_bytes, kernels=kernels,
                dtype=x.dtype if x is not None else "float32", kind=kind, key=key)
