"""Sparse COO ops the capture records as CUDA runs them (capture/sparse.py): coalesce.

`_coalesce_sparse_cuda` (aten/src/ATen/native/sparse/cuda/SparseCUDATensor.cu, torch 2.11) on nnz >= 2 rows:
a clone of the flattened indices (a device copy), two thrust sequence fills, thrust::sort_by_key with a custom
comparator, which CUB runs as a merge sort (a block-sort kernel, then per merge pass a partition and a merge
kernel), thrust::unique_by_key (an init and a sweep kernel, the count copied to the host: a sync), and
coalesceValuesKernel summing the duplicate rows; more than one sparse dim adds a copy, a divide and an add per
dim to unflatten the indices. On the H200 (validation/probes/sparse_probe.json) the merge passes were
ceil(log2(ceil(nnz / MERGE_SORT_TILE_KEYS))) at every size probed (100 to 2**20 keys: 0, 1, 4, 7, 9 passes)
and the zoo's sparse Adagrad and SparseAdam steps ran the same chains (14 and 16 work items).
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord

from .common import arg
from .registry import Cost, CostContext, register

# Keys per merge-sort tile: the block-sort kernel sorts tiles of this many keys, each merge pass halves the
# tiles. Any tile from 2048 to 4095 keys matches the passes measured at the six sizes probed; 2048 taken.
MERGE_SORT_TILE_KEYS = 2048
KERNELS_PER_MERGE_PASS = 2  # partition, merge
# indices clone, two sequence fills, block sort, unique_by_key init + sweep, the count's copy to the host
COALESCE_FIXED_ITEMS = 7
COALESCE_VALUES_KERNELS = 1
UNFLATTEN_KERNELS_PER_DIM = 3  # copy_, divide_, add_ (sparse_dim > 1)
INDEX_BYTES = 8  # int64 indices, sorted with int64 positions as values
COALESCE_KEY = "coalesce_rows"  # Cost.key[0] of a coalesce: (COALESCE_KEY, nnz, value bytes)
SORT_PAIR_BYTES = 2 * INDEX_BYTES


def merge_passes(nnz: int) -> int:
    """Merge passes of CUB's merge sort over `nnz` keys."""
    tiles = math.ceil(nnz / MERGE_SORT_TILE_KEYS)
    return math.ceil(math.log2(tiles)) if tiles > 1 else 0


def coalesce_kernels(nnz: int, sparse_dim: int, has_values: bool) -> int:
    """Work items of _coalesce_sparse_cuda on `nnz` rows (none below two: the tensor is coalesced already)."""
    if nnz < 2:
        return 0
    unflatten = UNFLATTEN_KERNELS_PER_DIM * sparse_dim if sparse_dim > 1 else 0
    return (COALESCE_FIXED_ITEMS + KERNELS_PER_MERGE_PASS * merge_passes(nnz) + COALESCE_VALUES_KERNELS * has_values
            + unflatten)


@register("aten._coalesce")
def coalesce(op: OpRecord, ctx: CostContext) -> Cost:
    """Its work items; its bytes: every (index, position) pair read and written once per sort pass (the block
    sort counts as one), the indices' clone and fills, the value rows read and the summed rows written. Keyed
    (COALESCE_KEY, nnz, value bytes) for the profile's fitted chain time (predict/sparse_time.py)."""
    indices, values = arg(op, "self_indices"), arg(op, "self_values")
    nnz = indices.shape[1] if len(indices.shape) == 2 else 0
    kernels = coalesce_kernels(nnz, indices.shape[0] if indices.shape else 1, values.numel > 0)
    if kernels == 0:
        return Cost(kernels=0, kind="copy", dtype=values.dtype)
    sort_bytes = SORT_PAIR_BYTES * nnz * (1 + merge_passes(nnz)) + 3 * INDEX_BYTES * nnz
    # the summed rows written: at most as many as read (the output's nnz is not recorded beside it)
    return Cost(bytes_read=sort_bytes + values.nbytes, bytes_written=sort_bytes + values.nbytes, kernels=kernels,
                kind="coalesce", dtype=values.dtype, key=(COALESCE_KEY, nnz, values.nbytes))
