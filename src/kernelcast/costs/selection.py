"""Order statistics, scans with indices, searching, and the small reductions torch does not tag.

Sources in aten/src/ATen/native/cuda/ unless noted:
- median / nanmedian over the whole tensor (Sorting.cpp, median_impl): sort the flattened input, then median
  takes `where(sorted[-1].isnan(), sorted[-1], sorted[k])` (isnan, where) and nanmedian counts the NaNs
  (`sorted.isnan().sum().item()`: isnan, sum, a device-to-host copy the host waits for: capture/recorder.py)
  and clones the element. The sort is counted as one item, as the registry's sort formula does.
- median / nanmedian along a dim, kthvalue (Sorting.cpp): a contiguous copy of a strided input, then one
  selection kernel (launch_median_kernel, launch_kthvalue_kernel).
- mode (TensorModeKernel.cpp): the input transposed to put the dim last and made contiguous (a copy when it was
  not), then one fused kernel for slices up to 2 * MAX_BLOCK_SIZE = 2048 elements; longer slices are cloned
  and sorted slice by slice on the host's loop (apply_mode: ASSUMED MODE_APPLY_ITEMS_PER_SLICE items each).
- cummax / cummin (ScanKernels.cpp via _cummax_helper), logcumsumexp: one scan kernel.
- bucketize / searchsorted (Bucketization.cu): one kernel.
- isin (TensorCompare.cpp, isin_Tensor_Tensor_out): few elements compared with many test elements take the
  brute-force path, `(elements.unsqueeze(-1) == test_elements).any(-1)`: an eq and a reduce; otherwise
  isin_sorting: unique of both (skipped with assume_unique), cat, a stable sort, a neighbour compare, its copy,
  an index_put, an index_copy, the final copy (ISIN_SORTING_ITEMS, the unique calls not counted: they are
  data-dependent ops of their own).
- trace (TriangularOps.cu, trace_cuda): a sum over the diagonal view, one reduce kernel.
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import OpRecord, TensorMeta

from .common import arg, main_tensor, memory_op, row_major
from .reduce_config import REDUCE_SEMAPHORE_MEMSETS, is_global_reduce
from .registry import Cost, CostContext, register
from .scans import scan_cost

SELECT_FLOPS_PER_ELEMENT = 1.0  # a compare per element read (nominal)
SORT_ITEMS = 1  # the registry's sort formula (elementwise.py)
MEDIAN_TAIL_KERNELS = 2  # isnan, where
NANMEDIAN_TAIL_ITEMS = 4  # isnan, sum, .item() memcpy, clone
CONTIGUOUS_COPY_KERNELS = 1
MODE_FUSED_MAX_SLICE = 2 * 1024  # 2 * MAX_BLOCK_SIZE (SortingCommon.cuh)
MODE_APPLY_ITEMS_PER_SLICE = 4  # ASSUMED: sort by key, segment flags, scan, pick (thrust, per slice)
ISIN_BRUTE_FORCE_EXPONENT = 0.145  # elements.numel() < 10 * pow(test_elements.numel(), 0.145)
ISIN_BRUTE_FORCE_FACTOR = 10
ISIN_BRUTE_FORCE_ITEMS = 2  # eq, any
ISIN_SORTING_ITEMS = 7  # cat, sort, eq/ne, copy_, index_put_, index_copy_, copy_


def _global_reduce_memsets(numel: int, ctx: CostContext) -> int:
    return REDUCE_SEMAPHORE_MEMSETS * is_global_reduce(1, numel, True, ctx.sm_count, ctx.max_threads_per_sm)


@register("aten.median.default", "aten.nanmedian.default")
def median_all(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    if op.op.startswith("aten.nanmedian"):
        kernels = SORT_ITEMS + NANMEDIAN_TAIL_ITEMS + _global_reduce_memsets(x.numel, ctx)
    else:
        kernels = SORT_ITEMS + MEDIAN_TAIL_KERNELS
    return memory_op(op, SELECT_FLOPS_PER_ELEMENT, kernels, kind="sort")


def _copy_if_strided(op: OpRecord) -> int:
    x = main_tensor(op)
    return CONTIGUOUS_COPY_KERNELS * (x is not None and not row_major(x))


@register("aten.median.dim", "aten.nanmedian.dim", "aten.kthvalue", "aten.median.dim_values",
          "aten.nanmedian.dim_values")
def select_along_dim(op: OpRecord, ctx: CostContext) -> Cost:
    return memory_op(op, SELECT_FLOPS_PER_ELEMENT, 1 + _copy_if_strided(op), kind="reduction")


@register("aten.mode")
def mode(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    dim = int(op.args.get("dim", -1) or 0) % max(len(x.shape), 1)
    slice_size = x.shape[dim] if x.shape else 1
    slices = x.numel // max(slice_size, 1)
    last = dim == len(x.shape) - 1 or all(n == 1 for n in x.shape[dim + 1:])
    copy = CONTIGUOUS_COPY_KERNELS * (not (last and row_major(x)))
    if slice_size <= MODE_FUSED_MAX_SLICE:
        return memory_op(op, SELECT_FLOPS_PER_ELEMENT, copy + 1, kind="sort")
    clone = CONTIGUOUS_COPY_KERNELS * (copy == 0)
    return memory_op(op, SELECT_FLOPS_PER_ELEMENT, copy + clone + slices * MODE_APPLY_ITEMS_PER_SLICE, kind="sort")


register("aten.bucketize", "aten.searchsorted")(lambda op, ctx: memory_op(op, SELECT_FLOPS_PER_ELEMENT, kind="scan"))


@register("aten.cummax", "aten.cummin", "aten._cummax_helper", "aten._cummin_helper", "aten.logcumsumexp",
          "aten._logcumsumexp")
def scan_op(op: OpRecord, ctx: CostContext) -> Cost:
    """The scans beside cumsum and cumprod run the same kernels (costs/scans.py scan_cost): logcumsumexp by
    scan_dim, cummax and cummin by scan_dim_with_indices, whose grids are scan_dim's but with no device-wide CUB
    path (ScanUtils.cuh)."""
    base = memory_op(op, SELECT_FLOPS_PER_ELEMENT, kind="scan")
    x, dim = op.args.get("self"), op.args.get("dim")
    if not isinstance(x, TensorMeta) or not isinstance(dim, int):
        return base
    return scan_cost(base, x, dim, device_wide="logcumsumexp" in op.op)


@register("aten.isin")
def isin(op: OpRecord, ctx: CostContext) -> Cost:
    elements = op.args.get("elements")
    tests = op.args.get("test_elements")
    n = getattr(elements, "numel", 1)
    m = getattr(tests, "numel", 1)
    brute = n < ISIN_BRUTE_FORCE_FACTOR * m ** ISIN_BRUTE_FORCE_EXPONENT
    if brute:
        kernels = ISIN_BRUTE_FORCE_ITEMS + REDUCE_SEMAPHORE_MEMSETS * is_global_reduce(
            max(n, 1), m, True, ctx.sm_count, ctx.max_threads_per_sm)
        base = memory_op(op, SELECT_FLOPS_PER_ELEMENT, kernels, kind="reduction")
        return dataclasses.replace(base, flops=float(n * m))  # one compare per (element, test element) pair
    return memory_op(op, SELECT_FLOPS_PER_ELEMENT, ISIN_SORTING_ITEMS, kind="sort")


@register("aten.trace")
def trace(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    diagonal = min(x.shape) if x.shape else 1
    kernels = 1 + _global_reduce_memsets(diagonal, ctx)
    return Cost(flops=float(diagonal), bytes_read=float(diagonal * x.itemsize), bytes_written=float(x.itemsize),
                kernels=kernels, dtype=x.dtype, kind="reduction")
