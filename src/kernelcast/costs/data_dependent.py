"""Ops whose output size depends on data (nonzero, masked_select, unique, bincount, repeat_interleave), and the
sort and top-k that MoE routing feeds them.

Each reads a count back to the host before it can size its output (the capture records that sync). Their
work items follow ATen's CUDA implementations, which are built from CUB device-wide primitives:
- nonzero (native/cuda/Nonzero.cu): a .contiguous() copy of a strided input, cub::DeviceReduce::Sum of the
  flags per chunk of up to 2**30 elements (one single-tile kernel, or two), the count copied to the host,
  cub::DeviceSelect::Flagged (an init and a sweep kernel), and write_indices for inputs of 2+ dims.
  data_dependent (1-D, 2**20 elements): 2 + 1 + 2 = 5; moe_train (2-D, 4096 elements): 1 + 1 + 2 + 1 = 5.
- masked_select (native/cuda/IndexKernel.cu masked_select_out_cuda_impl): index() with the broadcast mask, a
  nonzero of it and the index kernel. data_dependent: 6.
- unique (native/cuda/UniqueCub.cu): a CUB radix sort (pairs with an arange when inverse indices are asked),
  the inverse indices (adjacent difference, an inclusive scan, a scatter), cub::DeviceSelect::Unique or
  RunLengthEncode, and the count copied back; booleans count their trues with a reduction instead.
  data_dependent (65536 int64): 20 + 2 + 1 = 23.
- bincount (native/cuda/SummaryOps.cu _bincount_cuda): min() and max() each reduced and copied back, the
  zeroed output, the histogram kernel: 6 (data_dependent, moe_forward_bincount).
- repeat_interleave with tensor repeats (native/cuda/Repeat.cu): the cumsum (a CUB scan: init + scan), then
  without output_size the total and a `(repeats >= 0).all()` check read back (a compare, a reduction, two
  copies), and the compute kernel: 7 measured (data_dependent); 3 with output_size.
"""

from __future__ import annotations

import dataclasses

import math

from kernelcast.records import OpRecord, TensorMeta

from .common import arg, blocks_key, bytes_read, bytes_written, dense, row_major
from .cub import radix_sort_keys_kernels, radix_sort_pairs_kernels, segmented_radix_sort_kernels
from .registry import Cost, CostContext, register

# cub::DeviceReduce runs one single-tile kernel up to one tile of items (its SM 6.0+ policy: 256 threads x 20
# items), else a per-block kernel and a single-tile kernel. Measured: 4096 flags -> 1, 2**20 -> 2 (H200).
CUB_REDUCE_SINGLE_TILE_ITEMS = 256 * 20
NONZERO_CHUNK_ITEMS = 2**30  # Nonzero.cu: inputs of INT_MAX elements and more go in chunks of 2**30
CUB_SELECT_KERNELS = 2  # DeviceSelect / DeviceRunLengthEncode: a tile-state init kernel and the sweep
CUB_SCAN_KERNELS = 2  # DeviceScan: a tile-state init kernel and the scan
DEVICE_TO_HOST_COPY = 1
UNIQUE_INVERSE_KERNELS = 1 + CUB_SCAN_KERNELS + 1  # adjacent difference, inclusive scan, scatter (sorted only)
BINCOUNT_KERNELS = 6  # min, its copy, max, its copy, the zeroed output, the histogram
REPEAT_INTERLEAVE_SYNC_KERNELS = 4  # the total's copy, (repeats >= 0), .all(), its copy
REPEAT_INTERLEAVE_COMPUTE_KERNELS = 1


def cub_reduce_kernels(items: int) -> int:
    return 1 if items <= CUB_REDUCE_SINGLE_TILE_ITEMS else 2


def nonzero_kernels(t: TensorMeta, found: int) -> int:
    """Work items of nonzero on CUDA for an input `t` with `found` nonzero elements."""
    if t.numel == 0:
        return 0
    chunks = 1 if t.numel < 2**31 - 1 else math.ceil(t.numel / NONZERO_CHUNK_ITEMS)
    per_chunk = min(t.numel, NONZERO_CHUNK_ITEMS if chunks > 1 else t.numel)
    kernels = chunks * (cub_reduce_kernels(per_chunk) + CUB_SELECT_KERNELS) + DEVICE_TO_HOST_COPY
    kernels += 0 if row_major(t) else 1  # self.contiguous()
    kernels += 1 if len(t.shape) > 1 and found > 0 else 0  # write_indices
    return kernels


def _memory(op: OpRecord, kernels: int, kind: str = "copy") -> Cost:
    return Cost(bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=kernels, kind=kind,
                dtype=(op.tensors_out() or op.tensors_in())[0].dtype)


@register("aten.nonzero")
def nonzero(op: OpRecord, ctx: CostContext) -> Cost:
    t = arg(op, "self")
    out = op.tensors_out()
    return _memory(op, nonzero_kernels(t, out[0].shape[0] if out else t.numel), kind="select")


def _broadcast(a: TensorMeta, b: TensorMeta) -> tuple[int, ...]:
    n = max(len(a.shape), len(b.shape))
    pa, pb = (1,) * (n - len(a.shape)) + a.shape, (1,) * (n - len(b.shape)) + b.shape
    return tuple(max(x, y) for x, y in zip(pa, pb))


@register("aten.masked_select")
def masked_select(op: OpRecord, ctx: CostContext) -> Cost:
    t, mask = arg(op, "self"), arg(op, "mask")
    shape = _broadcast(t, mask)
    if mask.shape != shape:  # the expanded mask is strided: nonzero copies it first
        mask = TensorMeta(shape, mask.dtype, (0,) * len(shape), mask.device)
    found = op.tensors_out()[0].numel if op.tensors_out() else math.prod(shape)
    return _memory(op, nonzero_kernels(mask, found) + 1, kind="select")


def _flag(op: OpRecord, name: str) -> bool:
    return bool(op.args.get(name))


@register("aten._unique2", "aten._unique", "aten.unique_consecutive", "aten.unique_dim")
def unique(op: OpRecord, ctx: CostContext) -> Cost:
    t = arg(op, "self")
    consecutive = op.name == "unique_consecutive"
    inverse, counts = _flag(op, "return_inverse"), _flag(op, "return_counts")
    if t.dtype == "bool" and not consecutive:
        kernels = cub_reduce_kernels(t.numel) + 1 + inverse + DEVICE_TO_HOST_COPY
        return _memory(op, kernels, kind="sort")
    kernels = 0 if row_major(t) else 1  # expect_contiguous
    if not consecutive:
        if inverse:  # sorted with an arange of int64 indices as values (cub SortPairs)
            kernels += 1 + radix_sort_pairs_kernels(t.numel, 8 * t.itemsize, key_bytes=t.itemsize)
        else:
            kernels += radix_sort_keys_kernels(t.numel, 8 * t.itemsize, t.itemsize)
    if inverse:
        kernels += UNIQUE_INVERSE_KERNELS - (1 if consecutive else 0)
    kernels += CUB_SELECT_KERNELS + DEVICE_TO_HOST_COPY
    del counts  # Unique or RunLengthEncode: the same two kernels
    return _memory(op, kernels, kind="sort")


@register("aten.bincount")
def bincount(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    return _memory(op, BINCOUNT_KERNELS if x.numel else 1, kind="scatter")


@register("aten.repeat_interleave.Tensor")
def repeat_interleave(op: OpRecord, ctx: CostContext) -> Cost:
    repeats = arg(op, "repeats")
    if repeats.numel == 0:
        return _memory(op, 0)
    kernels = CUB_SCAN_KERNELS + REPEAT_INTERLEAVE_COMPUTE_KERNELS
    if op.args.get("output_size") is None:
        kernels += REPEAT_INTERLEAVE_SYNC_KERNELS
    return _memory(op, kernels)


# -- sort: MoE routing's argsort (native/cuda/Sort.cpp, SortStable.cu); top-k is costs/scans.py's ---------------
SMALL_SORT_MAX_SLICE = 4096  # Sort.h should_use_small_sort: an in-place key/value sort per slice
SORT_VALUES_COPY = 1  # Sorting.cpp sort_stable_out: values.copy_(self) before sort_stub
SCALAR_SORT_KERNELS = 2  # a 0-dim input: values.copy_(self), indices.zero_()
# sort_cuda_kernel's small path: fillSliceWithIndex (an arange and its copy), values.copy_(self), and
# sortKeyValueInplace (measured with the copy above: moe_forward_bincount's argsort of 4096 elements, 5)
SMALL_SORT_KERNELS = 4
# Not dense with the sorted dim innermost: self_ copied dim-last, then values and indices copied back.
STRIDED_SORT_COPIES = 3
# SortStable.cu launch_stable_sort_kernel: one segment (or segments of 10**6 keys and more) sorted one at a time
# after fill_reverse_indices_kernel; fewer than 128 segments: fill_index_and_segment_kernel, all keys sorted with
# (segment, index) int2 values, then stably by segment id (int64 keys over ceil(log2(segments)) bits), and
# sort_postprocess_kernel; else fill_reverse_indices_kernel and one segmented radix sort.
LARGE_SEGMENT_KEYS = 1_000_000
FULL_SORT_MAX_SEGMENTS = 128
INDEX_FILL_KERNELS = 1
POSTPROCESS_KERNELS = 1
INT2_BYTES = 8
INT64_BYTES = 8
INT_MAX = 2**31 - 1


def stable_sort_kernels(nsort: int, nsegments: int, key_bytes: int) -> int:
    """Work items of launch_stable_sort_kernel over `nsegments` slices of `nsort` keys of `key_bytes` bytes,
    in batches of at most INT_MAX elements. H200 (torch 2.11): 1-D float32 of 4097..2**20 keys: 1 + 12; int64:
    1 + 20 (validation/probes/cuda_path_probe.json); 4 x 5000 float32 (topk_large_k): 1 + 12 + 6 + 1."""
    numel = nsort * nsegments
    if numel == 0:
        return 0
    key_bits = 8 * key_bytes
    per_batch = min(numel, INT_MAX) // nsort * nsort
    kernels = 0
    for start in range(0, numel, per_batch):
        segments = min(per_batch, numel - start) // nsort
        if segments == 1 or nsort >= LARGE_SEGMENT_KEYS:
            kernels += INDEX_FILL_KERNELS + segments * radix_sort_pairs_kernels(nsort, key_bits, INT64_BYTES,
                                                                                key_bytes)
        elif segments < FULL_SORT_MAX_SEGMENTS:
            n = segments * nsort
            segment_bits = max(1, math.ceil(math.log2(segments)))
            kernels += (INDEX_FILL_KERNELS + radix_sort_pairs_kernels(n, key_bits, INT2_BYTES, key_bytes)
                        + radix_sort_keys_kernels(n, segment_bits, INT64_BYTES) + POSTPROCESS_KERNELS)
        else:
            kernels += INDEX_FILL_KERNELS + segmented_radix_sort_kernels(key_bits, key_bytes)
    return kernels


def _dim_size(t: TensorMeta, dim: int) -> int:
    return t.shape[dim % len(t.shape)] if t.shape else 1


def sort_kernels(t: TensorMeta, dim: int) -> int:
    """sort_stable_out then sort_cuda_kernel (Sort.cpp) on `t` along `dim`: the values copy, then the in-place
    slice sort up to 4096 keys, else the stable CUB sort (with the copies a strided input needs)."""
    if not t.shape:
        return SCALAR_SORT_KERNELS
    nsort = _dim_size(t, dim)
    if nsort <= SMALL_SORT_MAX_SLICE:
        return SORT_VALUES_COPY + SMALL_SORT_KERNELS
    dense_dim_last = dense(t) and t.stride[dim % len(t.shape)] == 1
    return (SORT_VALUES_COPY + (0 if dense_dim_last else STRIDED_SORT_COPIES)
            + stable_sort_kernels(nsort, t.numel // nsort, t.itemsize))


@register("aten.sort")
def sort(op: OpRecord, ctx: CostContext) -> Cost:
    """torch.sort / argsort on CUDA, every overload (sort_kernels). H200: zoo mixtral_forward, 2048 elements, 5
    per sort; validation/probes/cuda_path_probe.json, 1-D float32 of 4096 keys 5, 4097 to 2**20 keys 14, int64 5
    and 22."""
    x, dim = arg(op, "self"), int(op.args.get("dim", -1))
    cost = _memory(op, sort_kernels(x, dim), kind="sort")
    nsort = _dim_size(x, dim)
    if x.shape and nsort <= SMALL_SORT_MAX_SLICE:
        # the in-place sort runs a block per slice, whose time follows the slice, not the bytes: a block model
        # (calibrate/norm_blocks.py). H200, zoo mixtral_forward: one slice of 2048 int64 keys,
        # radixSortKVInPlace 29 us for 33 KB.
        return dataclasses.replace(cost, kind="sort_slices", key=blocks_key(x.numel // max(nsort, 1), 1, nsort,
                                                                             x.itemsize))
    return cost
