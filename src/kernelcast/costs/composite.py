"""Ops with no CUDA kernel of their own (CompositeExplicitAutograd) that the capture records whole.

On CUDA they run as the ops they call; the formulas here count those ops' work. Kept simple and in one place:
a decomposition of these ops in the capture (recording their parts instead) would supersede them.

- stack (aten/src/ATen/native/TensorShape.cpp): `at::cat` of the inputs along the stacked dim (the inputs as
  they are when the dim is inside them, unsqueezed when it is the new last dim), then a view. Its work items
  are cat's (elementwise.cat_kernels). Measured (H200, torch 2.11): stacking four 0-d losses (zoo
  losses_train) and the DLRM features, one CatArrayBatchedCopy kernel each.
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import OpRecord, TensorMeta

from .common import memory_op
from .elementwise import cat_kernels
from .registry import Cost, CostContext, register


def _unsqueezed(t: TensorMeta, dim: int) -> TensorMeta:
    stride = t.stride[dim] * t.shape[dim] if dim < len(t.shape) else 1
    return TensorMeta(t.shape[:dim] + (1,) + t.shape[dim:], t.dtype, t.stride[:dim] + (stride,) + t.stride[dim:],
                      t.device, t.storage)


def stack_cat_operands(inputs: list[TensorMeta], out: TensorMeta, dim: int) -> tuple[list[TensorMeta], TensorMeta]:
    """What stack hands to cat: the inputs themselves when dim < their rank (cat along it, then a view of the
    output), else the inputs unsqueezed at dim."""
    rank = len(inputs[0].shape)
    if dim < rank:
        cat_shape = inputs[0].shape[:dim] + (out.shape[dim] * inputs[0].shape[dim],) + inputs[0].shape[dim + 1:]
        cat_out = TensorMeta(cat_shape, out.dtype, _row_major_strides(cat_shape), out.device, out.storage)
        return inputs, cat_out
    return [_unsqueezed(t, dim) for t in inputs], out


def _row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


@register("aten.stack")
def stack(op: OpRecord, ctx: CostContext) -> Cost:
    outs = op.tensors_out()
    inputs = [t for t in op.tensors_in() if t.on_gpu]
    if not outs or not inputs:
        return memory_op(op)
    dim = int(op.args.get("dim") or 0) % len(outs[0].shape)
    cat_inputs, cat_out = stack_cat_operands(inputs, outs[0], dim)
    return dataclasses.replace(memory_op(op), kernels=max(cat_kernels(cat_inputs, cat_out), 1))
