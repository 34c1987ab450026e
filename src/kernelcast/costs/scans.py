"""Scans (cumsum, cumprod) and top-k selection: the kernels their CUDA host code launches.

Ops costed here (their launch rules win over any simpler formula elsewhere):
    aten.cumsum, aten.cumsum_, aten.cumprod, aten.cumprod_, aten.topk

Sources (torch 2.11): aten/src/ATen/native/ReduceOps.cpp (impl_func_cum_ops), cuda/ScanKernels.cpp
(cumsum_cuda_kernel), cuda/ScanUtils.cuh (scan_dim), cuda/TensorTopK.cpp (topk_out_cuda), cuda/TensorTopK.cu
(launch_gather_topk_kernel, should_use_multiblock, mbtopk::launch), cuda/Sort.cpp (should_use_small_sort).
"""

from __future__ import annotations

import dataclasses
import math

from kernelcast.records import OpRecord, TensorMeta

from .common import blocks_key, memory_op, row_major
from .cub import SCAN_KERNELS
from .data_dependent import SMALL_SORT_MAX_SLICE, sort_kernels
from .registry import Cost, CostContext, register

SCAN_FLOPS_PER_ELEMENT = 1.0
# topk: sortKeyValueInplace sorts each slice of the k results in one kernel up to this many elements
# (should_use_small_sort); beyond it at::cuda::sort_outf on the k values (costs/data_dependent.py sort_kernels:
# the values copy and the stable CUB sort), a gather of the indices and two copies back. H200 (torch 2.11,
# validation/probes/launch_rules.json topk_large_k): topk(4 x 10000, k=5000) = gatherTopK 1 + copy 1 + segmented
# sort by full sort 20 + gather and copies 3 = 25.
SMALL_SORT_MAX = SMALL_SORT_MAX_SLICE
LARGE_SORT_EXTRA_KERNELS = 3  # indices.gather, indices.copy_, values.copy_
# mbtopk::launch (main-branch TensorTopK.cu; not yet checked on a device): a fill, two memsets, per 8-bit radix
# pass three kernels (block digit counts, digit cumsum, blockwise within-k counts), the kth counts, two
# inclusive_sum_by_key scans, the gather.
TOPK_RADIX_BITS = 8
MBTOPK_FIXED_KERNELS = 5  # fill, two memsets, computeBlockwiseKthCounts, gatherTopK
MBTOPK_KERNELS_PER_PASS = 3
MBTOPK_SCANS = 2


def cum_op_kernels(x: TensorMeta, out_dtype: str, dim: int) -> int:
    """impl_func_cum_ops + scan_dim: a 0-d input is a fill; else `self.to(result dtype)` when dtypes differ,
    expect_contiguous() of a strided input, then cub's inclusive scan (init + scan kernels) when the scanned dim
    holds every element, else one scan kernel (innermost or outer dim)."""
    if not x.shape:
        return 1
    kernels = (x.dtype != out_dtype) + (not row_major(x))
    d = dim % len(x.shape)
    return kernels + (SCAN_KERNELS if x.numel == x.shape[d] else 1)


def should_use_multiblock(num_slices: int, slice_size: int) -> bool:
    """TensorTopK.cu (CUB with scan-by-key), from the experiments in pytorch/pytorch#74267."""
    return ((num_slices <= 20 and slice_size >= 20000) or (20 < num_slices <= 40 and slice_size >= 10000)
            or (40 < num_slices <= 80 and slice_size >= 8000) or (80 < num_slices < 200 and slice_size >= 5000)
            or (200 <= num_slices < 800 and slice_size >= 3000) or (800 <= num_slices <= 4000 and slice_size >= 800)
            or (num_slices > 4000 and slice_size >= 400))


def _slices(x: TensorMeta, dim: int) -> tuple[int, int]:
    """(slice length along dim, number of slices) of top-k's input."""
    slice_size = x.shape[dim % len(x.shape)] if x.shape else 1
    return slice_size, (x.numel // slice_size if slice_size else 0)


def topk_kernels(x: TensorMeta, k: int, dim: int, sorted_: bool) -> int:
    """topk_out_cuda: nothing for k == 0; input.contiguous(); the single-block gatherTopK kernel, or the
    multi-block radix select for long slices; then, sorted and more than one value, the in-slice sort."""
    if k == 0:
        return 0
    slice_size, num_slices = _slices(x, dim)
    kernels = int(not row_major(x))
    if should_use_multiblock(num_slices, slice_size):
        passes = 8 * x.itemsize // TOPK_RADIX_BITS
        kernels += MBTOPK_FIXED_KERNELS + MBTOPK_KERNELS_PER_PASS * passes + MBTOPK_SCANS * SCAN_KERNELS
    else:
        kernels += 1
    if sorted_ and num_slices * k > 1:
        kernels += 1 if k <= SMALL_SORT_MAX else sort_kernels(_topk_values(x, k, dim), dim) + LARGE_SORT_EXTRA_KERNELS
    return kernels


def _topk_values(x: TensorMeta, k: int, dim: int) -> TensorMeta:
    """topk's contiguous values output: the input's shape with k along dim."""
    shape = list(x.shape)
    shape[dim % len(shape)] = k
    stride, step = [], 1
    for size in reversed(shape):
        stride.append(step)
        step *= max(size, 1)
    return TensorMeta(tuple(shape), x.dtype, tuple(reversed(stride)), x.device)


def _input(op: OpRecord) -> TensorMeta | None:
    value = op.args.get("self")
    return value if isinstance(value, TensorMeta) and value.on_gpu else None


# scan_dim (cuda/ScanUtils.cuh) runs one of three kernels by the scanned dim: CUB's device-wide scan when the dim
# holds every element (kind "scan", a byte curve: its tiles fill the GPU), tensor_kernel_scan_innermost_dim for
# the last dim (SCAN_ROWS_KIND: blocks of 512 threads, each scanning a few rows side by side, walking them in
# chunks), and tensor_kernel_scan_outer_dim for any other (SCAN_OUTER_KIND: a thread per inner position walks the
# whole dim alone, 512 positions a block). The two are block kernels: their time follows how far each block walks
# and how many blocks share the SMs, not the bytes (calibrate/norm_blocks.py fits them as it fits the other
# block kinds, on calibrate's shape_kinds_grid cumsum / cumprod cases). On the H200
# (validation/h200_shape_kinds_grid_raw.json.gz): 128 x 4000 fp32 ran 25 us over the last dim and 50 us over the
# first; 16 rows of 1 M bf16 elements over the last dim 1617 us (16 blocks walking 1 M each) where 128 x 32768
# took 98 us; one byte curve over all of them had priced KernelBench's innermost cumsums (level 1 #89-#93) at
# 1.6x their kernels.
SCAN_ROWS_KIND = "scan_rows"
SCAN_OUTER_KIND = "scan_outer"
SCAN_BLOCK_THREADS = 512  # scan_innermost_dim: "assuming max_num_threads per block is 512"; scan_outer_dim likewise
SCAN_MIN_LOG_THREADS_X, SCAN_MAX_LOG_THREADS_X = 4, 9


def scan_threads_y(num_rows: int, row_size: int) -> int:
    """Rows one block of tensor_kernel_scan_innermost_dim scans side by side: 512 threads split so that log2 of
    the x (along the row) and y (across rows) counts keep about the ratio of log2 row_size to log2 num_rows,
    x clamped to 16-512 (ScanUtils.cuh get_log_num_threads_x_inner_scan)."""
    log_x, log_y = max(row_size - 1, 0).bit_length(), max(num_rows - 1, 0).bit_length()
    log_x = min(max((SCAN_MAX_LOG_THREADS_X + log_x - log_y) // 2, SCAN_MIN_LOG_THREADS_X), SCAN_MAX_LOG_THREADS_X)
    return SCAN_BLOCK_THREADS >> log_x


def scan_blocks(num_rows: int, row_size: int) -> int:
    """Thread blocks of an innermost-dim scan of num_rows rows (scan_innermost_dim's grid)."""
    return -(-max(num_rows, 1) // scan_threads_y(num_rows, row_size))


def scan_key(x: TensorMeta, dim: int, device_wide: bool = True) -> tuple[str, tuple] | None:
    """(kind, costs.common.blocks_key) of a scan of x over dim by the kernel scan_dim picks: for the last dim,
    (blocks, rows a block scans, the row's length, item size); for another, (blocks, inner positions a block
    walks, the dim's length, item size); None where CUB's device scan runs (the dim holds every element; only
    scan_dim has that path, so device_wide=False for scan_dim_with_indices: cummax, cummin)."""
    d = dim % len(x.shape)
    length = x.shape[d]
    if not length or (device_wide and x.numel == length):
        return None
    if d == len(x.shape) - 1:
        rows = x.numel // length
        return SCAN_ROWS_KIND, blocks_key(scan_blocks(rows, length), min(scan_threads_y(rows, length), rows),
                                          length, x.itemsize)
    outer, inner = math.prod(x.shape[:d]), math.prod(x.shape[d + 1:])
    per_block = min(inner, SCAN_BLOCK_THREADS)
    return SCAN_OUTER_KIND, blocks_key(outer * -(-inner // SCAN_BLOCK_THREADS), per_block, length, x.itemsize)


@register("aten.cumsum", "aten.cumsum_", "aten.cumprod", "aten.cumprod_")
def cum_op(op: OpRecord, ctx: CostContext) -> Cost:
    x, outs = _input(op), op.tensors_out()
    base = memory_op(op, SCAN_FLOPS_PER_ELEMENT, kind="scan")
    if x is None or not isinstance(op.args.get("dim"), int):
        return base
    out_dtype = outs[0].dtype if outs else x.dtype
    return scan_cost(dataclasses.replace(base, kernels=cum_op_kernels(x, out_dtype, op.args["dim"])), x,
                     op.args["dim"])


def scan_cost(base: Cost, x: TensorMeta, dim: int, device_wide: bool = True) -> Cost:
    """`base` (a memory-bound cost of kind "scan") as the kernel scan_dim (or, not device_wide,
    scan_dim_with_indices) runs for x over dim: its block kind and key (scan_key), or unchanged where CUB's
    device scan runs or x is 0-d."""
    keyed = scan_key(x, dim, device_wide) if x.shape else None
    return dataclasses.replace(base, kind=keyed[0], key=keyed[1]) if keyed else base


@register("aten.topk")
def topk(op: OpRecord, ctx: CostContext) -> Cost:
    x = _input(op)
    base = memory_op(op, kind="sort")
    if x is None:
        return base
    dim = int(op.args.get("dim", -1))
    kernels = topk_kernels(x, int(op.args.get("k", 1)), dim, op.args.get("sorted", True) is not False)
    slice_size, num_slices = _slices(x, dim)
    if x.shape and not should_use_multiblock(num_slices, slice_size):
        # gatherTopK runs a block per slice (then the in-slice sort): a block model, as for the small sort
        # (costs/data_dependent.py); H200, zoo mixtral_forward: (tokens, 8) experts, k = 2, 8.5 + 5.3 us
        return dataclasses.replace(base, kernels=kernels, kind="topk_slices",
                                   key=blocks_key(num_slices, 1, slice_size, x.itemsize))
    return dataclasses.replace(base, kernels=kernels)
