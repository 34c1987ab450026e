"""Indexing ops the zoo and the OpInfo sweep found uncosted (index_add_/index_copy_/scatter_*/index_put are
costed elsewhere).

- take (cuda/IndexKernel.cu, take_kernel): one gather kernel.
- put (CompositeExplicitAutograd, TensorAdvancedIndexing.cpp): self.clone(), then put_ (one kernel; with
  accumulate=True the kernel adds atomically): two items.
- index_fill (CompositeExplicitAutograd): self.clone(), then index_fill_ (one kernel): two items.
- put_ and index_fill_ (cuda/IndexKernel.cu put_kernel, index_fill_kernel): the one kernel alone, writing only
  the elements the index selects (trace's backward fills a zero matrix's diagonal in place, take's puts the
  gradient into zeros: capture/cuda_inplace.py).
- index_reduce (index_reduce_cuda_out, cuda/Indexing.cu): the result is a copy of self; with
  include_self=False the indexed slices are first filled with the reduction's identity (an index_fill_); one
  reduce kernel; "mean" then counts the contributions (ones_like / zeros_like of the result, ones_like of the
  source, an index_add_, counts == 0, masked_fill_) and divides: six more kernels.
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import OpRecord, TensorMeta

from .common import memory_op
from .indexing import scatter_cost
from .registry import Cost, CostContext, register

CLONE_KERNELS = 1
INDEX_FILL_KERNELS = 1
MEAN_COUNT_KERNELS = 6  # ones_like/zeros_like, ones_like(source), index_add_, eq, masked_fill_, div_


@register("aten.put", "aten.index_fill")
def clone_then_in_place(op: OpRecord, ctx: CostContext) -> Cost:
    """The clone writes the whole result; the in-place kernel then writes the selected elements (counted in
    the clone's bytes: a bound, not double)."""
    return memory_op(op, kernels=CLONE_KERNELS + 1, kind="copy")


@register("aten.put_")
def put_in_place(op: OpRecord, ctx: CostContext) -> Cost:
    return scatter_cost(op, 1)


@register("aten.index_fill_")
def index_fill_in_place(op: OpRecord, ctx: CostContext) -> Cost:
    """One kernel writing the selected slices (len(index) x the elements of a slice along `dim`)."""
    self_t, index = op.args.get("self"), op.args.get("index")
    base = memory_op(op, kind="scatter")
    if not isinstance(self_t, TensorMeta) or not isinstance(index, TensorMeta):
        return dataclasses.replace(base, kernels=1)
    dim = int(op.args.get("dim") or 0) % max(len(self_t.shape), 1)
    slice_elements = self_t.numel // max(self_t.shape[dim], 1) if self_t.shape else 1
    written = min(index.numel * slice_elements, self_t.numel) * self_t.itemsize
    return dataclasses.replace(base, bytes_read=float(index.nbytes), bytes_written=float(written), kernels=1)


@register("aten.index_reduce")
def index_reduce(op: OpRecord, ctx: CostContext) -> Cost:
    include_self = op.args.get("include_self", True) is not False
    mean = op.args.get("reduce") == "mean"
    kernels = CLONE_KERNELS + INDEX_FILL_KERNELS * (not include_self) + 1 + MEAN_COUNT_KERNELS * mean
    return dataclasses.replace(memory_op(op, 1.0, kind="scatter"), kernels=kernels)
