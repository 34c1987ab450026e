"""Indexing ops the zoo and the OpInfo sweep found uncosted (index_add_/index_copy_/scatter_*/index_put are
costed elsewhere).

- take (cuda/IndexKernel.cu, take_kernel): one gather kernel.
- put (CompositeExplicitAutograd, TensorAdvancedIndexing.cpp): self.clone(), then put_ (one kernel; with
  accumulate=True the kernel adds atomically): two items.
- index_fill (CompositeExplicitAutograd): self.clone(), then index_fill_ (one kernel): two items.
- index_reduce (index_reduce_cuda_out, cuda/Indexing.cu): the result is a copy of self; with
  include_self=False the indexed slices are first filled with the reduction's identity (an index_fill_); one
  reduce kernel; "mean" then counts the contributions (ones_like / zeros_like of the result, ones_like of the
  source, an index_add_, counts == 0, masked_fill_) and divides: six more kernels.
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import OpRecord

from .common import memory_op
from .registry import Cost, CostContext, register

CLONE_KERNELS = 1
INDEX_FILL_KERNELS = 1
MEAN_COUNT_KERNELS = 6  # ones_like/zeros_like, ones_like(source), index_add_, eq, masked_fill_, div_


@register("aten.put", "aten.index_fill")
def clone_then_in_place(op: OpRecord, ctx: CostContext) -> Cost:
    """The clone writes the whole result; the in-place kernel then writes the selected elements (counted in
    the clone's bytes: a bound, not double)."""
    return memory_op(op, kernels=CLONE_KERNELS + 1, kind="copy")


@register("aten.index_reduce")
def index_reduce(op: OpRecord, ctx: CostContext) -> Cost:
    include_self = op.args.get("include_self", True) is not False
    mean = op.args.get("reduce") == "mean"
    kernels = CLONE_KERNELS + INDEX_FILL_KERNELS * (not include_self) + 1 + MEAN_COUNT_KERNELS * mean
    return dataclasses.replace(memory_op(op, 1.0, kind="scatter"), kernels=kernels)
