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


# cuSPARSE's SpMM of a CSR matrix (m x k, nnz values) and a dense (k x n) matrix, and its CSR row offsets, as
# the capture records them (capture/sparse.py: s_addmm_out_sparse_dense_cuda). SpMM reads each stored value,
# its column index and the dense row it selects, and writes the output once; the dense rows are gathered at random.
# It runs three kernels at every size measured (validation/h100/user_kinds_dec08: four graphs of 2708 to 100000
# nodes, 16 to 256 features, forward and backward, two runs; torch 2.11, cuSPARSE of CUDA 13): a partition of the
# row offsets among thread blocks (csr_partition_kernel), C = beta x C over the output (matrix_scalar_multiply_kernel,
# which writes it where beta is 0) and the product (csrmm_alg1_kernel). Each is its own part, with a key of its own
# that predict/sparse_time.py prices.
INT32_BYTES = 4
SPMM_KEY = "cusparse_spmm"
SPMM_PARTITION_KEY = "cusparse_spmm_partition"


@register("kernelcast.cusparse_spmm_")
def cusparse_spmm(op: OpRecord, ctx: CostContext) -> Cost:
    """Three kernels (see above). The product: FLOPs 2 x nnz x n (a multiply-add per stored value per output
    column); bytes: values, column indices and row offsets once, one dense row of n per stored value, the output
    read and written; keyed (SPMM_KEY, dense bytes gathered). The partition reads the m + 1 row offsets, keyed
    (SPMM_PARTITION_KEY, m). The scaling writes the output (and reads it first where beta is not 0)."""
    crow, values, dense, out = arg(op, "crow"), arg(op, "values"), arg(op, "dense"), arg(op, "out")
    nnz, n = values.numel, out.shape[1] if len(out.shape) == 2 else 1
    gathered = nnz * n * dense.itemsize
    beta = bool(op.args.get("beta"))
    product = Cost(flops=2.0 * nnz * n, bytes_read=float(values.nbytes + nnz * INT32_BYTES + crow.nbytes + gathered
                                                          + out.nbytes),
                   bytes_written=float(out.nbytes), kernels=1, dtype=values.dtype, kind="gather",
                   key=(SPMM_KEY, gathered))
    partition = Cost(bytes_read=float(crow.nbytes), kernels=1, dtype=crow.dtype, kind="copy",
                     key=(SPMM_PARTITION_KEY, max(crow.numel - 1, 0)))
    scaling = Cost(bytes_read=float(out.nbytes if beta else 0), bytes_written=float(out.nbytes), kernels=1,
                   dtype=out.dtype, kind="pointwise" if beta else "fill")
    return product.with_parts(partition, scaling)


@register("aten._convert_indices_from_coo_to_csr")
def coo_to_csr(op: OpRecord, ctx: CostContext) -> Cost:
    """One kernel (cusparseXcoo2csr for SpMM; convert_indices_from_coo_to_csr_cuda_kernel when called by name):
    reads the sorted row indices, writes m + 1 row offsets."""
    rows = arg(op, "self")
    written = sum(t.nbytes for t in op.tensors_out() if t.on_gpu)
    return Cost(bytes_read=float(rows.nbytes), bytes_written=float(written), kernels=1, kind="copy",
                dtype=rows.dtype)
