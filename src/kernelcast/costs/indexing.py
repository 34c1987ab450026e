"""Indexed writes and moves: index_put (accumulating or not), index_add/index_copy, scatter and scatter_reduce,
masked_fill_, roll, tril/triu_indices: the kernels their CUDA host code launches.

Ops costed here (their launch rules win over any simpler formula elsewhere):
    aten._index_put_impl_, aten.index_put_, aten.index_put, aten.index_add_, aten.index_add, aten.index_copy_,
    aten.index_copy, aten.scatter_, aten.scatter, aten.scatter_add_, aten.scatter_add, aten.scatter_reduce_,
    aten.scatter_reduce, aten.masked_fill_, aten.roll, aten.tril_indices, aten.triu_indices

Sources (torch 2.11): aten/src/ATen/native/TensorAdvancedIndexing.cpp (_index_put_impl_,
canDispatchToMaskedFill, index_put, scatter_impl, scatter_reduce_two, scatter_add), cuda/Indexing.cu
(index_put_with_sort_kernel, makeLinearIndex, computeLinearIndex, wrapIndexOnce, index_add_cuda_impl),
cuda/TensorTransformations.cu (roll_cuda) with TensorTransformations.h (roll_common), cuda/TensorFactories.cu
(tril_indices_cuda).
"""

from __future__ import annotations

import dataclasses
import math

from kernelcast.records import OpRecord, TensorMeta

from .common import contiguous_copy, memory_op, row_major
from .gather import SMALL_INDEX_ADD_KEY, small_index_units
from .cub import num_bits, radix_sort_pairs_kernels
from .reduce_config import is_global_reduce
from .registry import Cost, CostContext, register

MASK_DTYPES = ("bool", "uint8")
# wrapIndexOnce with range checks (index_put_ from user code; the backward of indexing passes unsafe=True): as
# torch 2.11 runs it, index.max() and index.min() reduced apart, each followed by `_assert_async(bound compare)`,
# a compare kernel and an assert kernel. H200 (validation/probes/launch_rules.json, index_put_accumulate_checked):
# max, lt, _assert_async, min, ge, _assert_async. (Later sources take one aminmax: one reduction less.)
RANGE_CHECK_REDUCTIONS = 2
RANGE_CHECK_ASSERTS = 2
KERNELS_PER_ASSERT = 2
# computeLinearIndex per index tensor: index.remainder(size) and `* stride` (a kernel each, stride 1 too).
LINEAR_INDEX_KERNELS_PER_INDEX = 2
# index_put_with_sort_kernel after the linear index: divide_, arange, the radix sort, the accumulate kernel.
SORT_PATH_FIXED_KERNELS = 3  # divide_, arange, indexing_backward_kernel*
# A boolean mask index becomes long indices through nonzero (data-dependent; counted as one work item, as the
# capture's own nonzero op is).
NONZERO_KERNELS = 1
# scatter_reduce with reduce="mean": ones_like(src), ones/zeros_like(out), count.scatter_add_, count == 0,
# masked_fill_, out.div_.
SCATTER_MEAN_KERNELS = 6


def _tensor(op: OpRecord, name: str) -> TensorMeta | None:
    value = op.args.get(name)
    return value if isinstance(value, TensorMeta) and value.on_gpu else None


def _index_list(op: OpRecord) -> tuple:
    value = op.args.get("indices", ())
    return value if isinstance(value, tuple) else (value,)


def _with_kernels(op: OpRecord, kernels: int, kind: str = "copy") -> Cost:
    return dataclasses.replace(memory_op(op, kind=kind), kernels=kernels)


SCATTER_KIND = "scatter"
UPDATE_ARGS = ("values", "source", "src")


def scatter_cost(op: OpRecord, kernels: int, copy_of_self: bool | None = None) -> Cost:
    """Bytes of an indexed write: the updates and the indices read once, the destination elements they touch read
    and written once (not the whole destination: a gradient scattered into 512 rows of a 500k-row table touches
    512 rows); an out-of-place variant first copies self whole (copy_of_self=False: without that copy)."""
    self_t = _tensor(op, "self")
    updates = next((op.args[n] for n in UPDATE_ARGS if isinstance(op.args.get(n), TensorMeta)), None)
    indices = [i for i in (*_index_list(op), op.args.get("index")) if isinstance(i, TensorMeta)]
    index_bytes = sum(i.nbytes for i in indices)
    touched_elems = updates.numel if updates is not None else max((i.numel for i in indices), default=0)
    if self_t is not None:
        touched_elems = min(touched_elems, self_t.numel)
    itemsize = self_t.itemsize if self_t is not None else 4
    touched = touched_elems * itemsize
    read = (updates.nbytes if updates is not None else 0) + index_bytes + touched
    written = touched
    if self_t is not None and (not _inplace(op) if copy_of_self is None else copy_of_self):
        read, written = read + self_t.nbytes, written + self_t.nbytes
    base = memory_op(op, kind=SCATTER_KIND)
    return dataclasses.replace(base, bytes_read=float(read), bytes_written=float(written), kernels=kernels)


def _is_mask(t) -> bool:
    return isinstance(t, TensorMeta) and t.dtype in MASK_DTYPES


def can_dispatch_to_masked_fill(self_t: TensorMeta, indices: tuple, values: TensorMeta | None) -> bool:
    """canDispatchToMaskedFill: a non-accumulating index_put_ whose one index is a boolean mask on self's device
    and whose value is a single element on the CPU runs masked_fill_ instead."""
    defined = [i for i in indices if isinstance(i, TensorMeta)]
    return (values is not None and values.numel == 1 and not values.on_gpu and len(defined) == 1
            and _is_mask(defined[0]) and defined[0].on_gpu == self_t.on_gpu)


def _expanded_indices(indices: tuple) -> list:
    """The index list after expandTensors: a mask of d dims becomes d long index tensors (every element
    selected, the capture's placeholder), None stays None."""
    out: list = []
    for index in indices:
        if _is_mask(index):
            out.extend([TensorMeta((index.numel,), "int64", (1,))] * len(index.shape))
        else:
            out.append(index if isinstance(index, TensorMeta) else None)
    return out


def _contiguous_subspace(indices: list) -> bool:
    """hasContiguousSubspace: the defined indices sit next to each other."""
    positions = [i for i, index in enumerate(indices) if index is not None]
    return not positions or positions[-1] - positions[0] + 1 == len(positions)


def range_check_kernels(index: TensorMeta, ctx: CostContext) -> int:
    """wrapIndexOnce(check_range=True): max and min (full reductions, each with a semaphore memset when global),
    then two compare + _assert_async pairs."""
    reduction = 1 + is_global_reduce(1, index.numel, True, ctx.sm_count, ctx.max_threads_per_sm)
    return RANGE_CHECK_REDUCTIONS * reduction + RANGE_CHECK_ASSERTS * KERNELS_PER_ASSERT


def linear_index_kernels(indices: list, check_range: bool, ctx: CostContext) -> int:
    """computeLinearIndex: per index tensor an int32 -> int64 conversion (makeLinearIndex), the range check,
    remainder and multiply; the second and later ones are added into the first (linearIndex += index)."""
    defined = [i for i in indices if i is not None]
    kernels = 0
    for n, index in enumerate(defined):
        kernels += (index.dtype == "int32") + LINEAR_INDEX_KERNELS_PER_INDEX + (n > 0)
        if check_range:
            kernels += range_check_kernels(index, ctx)
    return kernels


def index_put_sort_kernels(self_t: TensorMeta, indices: tuple, values: TensorMeta, check_range: bool,
                           ctx: CostContext) -> int:
    """index_put_with_sort_kernel (accumulate=True, or deterministic mode): contiguous copies of self (and back),
    nonzero per mask, the linear index, the value expanded and made contiguous, then for a non-empty index
    divide_, arange, a radix sort of the slice indices over the bits the largest one needs, and one
    indexing_backward kernel; a permuted (non-adjacent) index adds src.contiguous() and the copy back."""
    expanded = _expanded_indices(indices)
    expanded += [None] * (len(self_t.shape) - len(expanded))
    kernels = 0 if row_major(self_t) else 2
    kernels += NONZERO_KERNELS * sum(1 for i in indices if _is_mask(i))
    kernels += linear_index_kernels(expanded, check_range, ctx)
    defined_dims = [d for d, i in enumerate(expanded) if i is not None]
    if not _contiguous_subspace(expanded):
        kernels += 2
        order = defined_dims + [d for d in range(len(self_t.shape)) if d not in defined_dims]
    else:
        order = list(range(len(self_t.shape)))
    sizes = [self_t.shape[d] for d in order]
    first = next((k for k, d in enumerate(order) if d in defined_dims), 0)
    slice_size = math.prod(sizes[first + len(defined_dims):])
    before = math.prod(sizes[:first])
    num_indices = max((i.numel for i in expanded if i is not None), default=0)
    if values.numel != num_indices * before * slice_size or not row_major(values):
        kernels += 1  # expandedValue.expand(vals_shape).contiguous()
    if num_indices > 0 and slice_size > 0:
        bits = num_bits((self_t.numel - 1) // slice_size)  # largestIndex(self_) of the contiguous self
        kernels += SORT_PATH_FIXED_KERNELS + radix_sort_pairs_kernels(num_indices, bits)
    return kernels


def index_put_kernels(self_t: TensorMeta, indices: tuple, values: TensorMeta | None, accumulate: bool,
                      unsafe: bool, ctx: CostContext) -> int:
    """_index_put_impl_ on CUDA: masked_fill_ for a boolean mask and a CPU scalar; the sort-based kernel when
    accumulating; else nonzero per mask and one TensorIterator index_put kernel."""
    if not accumulate and can_dispatch_to_masked_fill(self_t, indices, values):
        return 1
    if accumulate and values is not None:
        return index_put_sort_kernels(self_t, indices, values, not unsafe, ctx)
    return NONZERO_KERNELS * sum(1 for i in indices if _is_mask(i)) + 1


def _index_put(op: OpRecord, ctx: CostContext, unsafe: bool, clone: bool) -> Cost:
    self_t, values = _tensor(op, "self"), op.args.get("values")
    values = values if isinstance(values, TensorMeta) else None
    if self_t is None:
        return memory_op(op)
    kernels = index_put_kernels(self_t, _index_list(op), values, bool(op.args.get("accumulate")), unsafe, ctx)
    if not op.args.get("accumulate") and can_dispatch_to_masked_fill(self_t, _index_list(op), values):
        return _with_kernels(op, kernels + clone, kind="pointwise")  # masked_fill_ streams over self
    return scatter_cost(op, kernels + clone)


@register("aten._index_put_impl_")
def index_put_impl(op: OpRecord, ctx: CostContext) -> Cost:
    return _index_put(op, ctx, unsafe=bool(op.args.get("unsafe")), clone=False)


@register("aten.index_put_")
def index_put_inplace(op: OpRecord, ctx: CostContext) -> Cost:
    """index_put_ calls _index_put_impl_(unsafe=False): indices are range-checked."""
    return _index_put(op, ctx, unsafe=False, clone=False)


@register("aten.index_put")
def index_put(op: OpRecord, ctx: CostContext) -> Cost:
    """The functional index_put: self.clone() then index_put_ (one copy more)."""
    return _index_put(op, ctx, unsafe=False, clone=True)


ATOMICS_KEY = "atomics"


def _inplace(op: OpRecord) -> bool:
    return op.name.endswith("_")


def _copy_of_self(op: OpRecord) -> int:
    """Out-of-place structured variants start with `out.copy_(self)`."""
    return 0 if _inplace(op) else 1


@register("aten.index_add_", "aten.index_add", "aten.index_copy_", "aten.index_copy")
def index_add_or_copy(op: OpRecord, ctx: CostContext) -> Cost:
    """index_add_cuda_impl / index_copy: one indexFunc (or index_copy TensorIterator) kernel; the out-of-place
    op copies self first. Nothing runs for an empty slice."""
    source = _tensor(op, "source")
    if source is not None and source.numel == 0:
        return scatter_cost(op, _copy_of_self(op))
    if not op.packet.startswith("aten.index_add") or source is None:
        return scatter_cost(op, _copy_of_self(op) + 1)
    small = small_index_units(op, ctx.sm_count)
    if small is not None:
        # at most 16 indices: indexFuncSmallIndex, whose threads walk the indices (costs/gather.py); the
        # out-of-place op's copy of self is a kernel of its own
        kernel = dataclasses.replace(scatter_cost(op, 1, copy_of_self=False),
                                     key=(SMALL_INDEX_ADD_KEY, *small, source.numel, source.itemsize))
        self_t = _tensor(op, "self")
        return kernel.with_parts(contiguous_copy(self_t)) if _copy_of_self(op) and self_t is not None else kernel
    # an atomicAdd per element (indexFuncLargeIndex): a time per element (calibrate/unit_rates.py)
    return dataclasses.replace(scatter_cost(op, _copy_of_self(op) + 1),
                               key=(ATOMICS_KEY, source.numel, source.itemsize))


@register("aten.scatter_", "aten.scatter", "aten.scatter_add_", "aten.scatter_add")
def scatter(op: OpRecord, ctx: CostContext) -> Cost:
    """scatter_impl / scatter_add: `out.copy_(self)` when out-of-place, then one scatter kernel (none for an
    empty index)."""
    index = _tensor(op, "index")
    body = 0 if index is not None and index.numel == 0 else 1
    return scatter_cost(op, _copy_of_self(op) + body)


@register("aten.scatter_reduce_", "aten.scatter_reduce")
def scatter_reduce(op: OpRecord, ctx: CostContext) -> Cost:
    """scatter_reduce_two: out.copy_(self) and again in scatter_impl (two copies when out-of-place), the
    identity fill of the scattered slots when include_self=False, the reduce kernel, and for "mean" the count
    and divide (SCATTER_MEAN_KERNELS)."""
    index = _tensor(op, "index")
    copies = 2 * _copy_of_self(op)
    if index is not None and index.numel == 0:
        return scatter_cost(op, copies)
    include_self = op.args.get("include_self", True) is not False
    mean = op.args.get("reduce") == "mean"
    kernels = copies + (not include_self) + 1 + (SCATTER_MEAN_KERNELS if mean else 0)
    return scatter_cost(op, kernels)


@register("aten.masked_fill_")
def masked_fill_inplace(op: OpRecord, ctx: CostContext) -> Cost:
    """masked_fill__cuda: one TensorIterator kernel."""
    return _with_kernels(op, 1, kind="pointwise")


@register("aten.roll")
def roll(op: OpRecord, ctx: CostContext) -> Cost:
    """roll_cuda rolls one dim per kernel: roll_common recurses over the dims (each call makes its input
    contiguous first; only the caller's input can be strided); no dims: flatten (contiguous) and roll once."""
    x = _tensor(op, "self")
    dims = op.args.get("dims", ())
    dims = dims if isinstance(dims, tuple) else (dims,)
    if x is None:
        return memory_op(op)
    return _with_kernels(op, max(len(dims), 1) + (not row_major(x)))


@register("aten.tril_indices", "aten.triu_indices")
def tril_indices(op: OpRecord, ctx: CostContext) -> Cost:
    """tril_indices_cuda / triu_indices_cuda: one kernel that writes the coordinates (none when empty)."""
    return _with_kernels(op, 1, kind="fill")
