"""Kernel times of the sparse-gradient ops from the profile's `timings.sparse` (fitted by calibrate/sparse_fit.py
on calibrate's sparse_grid microbenchmarks). Pure functions of sizes; the calibrated model calls them."""

from __future__ import annotations

from kernelcast.costs.sparse import INDEX_BYTES, merge_passes


def coalesce_features(nnz: int, value_bytes: float) -> list[float]:
    """(1, merge passes, nnz, nnz x passes, value bytes) of a coalesce of `nnz` rows of `value_bytes` values."""
    passes = merge_passes(nnz)
    return [1.0, float(passes), float(nnz), float(nnz * passes), float(value_bytes)]


def coalesce_us(fit: dict, nnz: int, value_bytes: float) -> float:
    """µs of _coalesce_sparse_cuda's whole chain: the fitted linear model over coalesce_features."""
    return max(0.0, sum(a * b for a, b in zip(fit["coefficients"], coalesce_features(nnz, value_bytes))))


def embedding_bag_bytes(indices: int, bags: int, dim: int, itemsize: int) -> float:
    """Bytes an EmbeddingBag forward moves: one weight row per index, the indices, one output row per bag."""
    return float(indices * dim * itemsize + indices * INDEX_BYTES + bags * dim * itemsize)


def embedding_bag_us(fit: dict, indices: int, nbytes: float) -> float:
    """µs of one EmbeddingBag forward kernel: floor + the larger of a time per index and the bytes at a
    sustained bandwidth."""
    return fit["floor_us"] + max(fit["us_per_index"] * indices, nbytes / fit["bytes_per_us"])


# cuSPARSE SpMM's kernels (costs/sparse.py cusparse_spmm), fp32, measured on an H100 SXM (torch 2.11, CUDA 13;
# scripts/device/probe_user_kinds.py, validation/h100/user_kinds_dec08: four graphs, 169 thousand to 256 million
# stored-value x column products, two runs). Least squares in relative error over the 8 readings of each kernel,
# every reading within 5%: the product (csrmm_alg1_kernel) a floor plus the dense bytes it gathers at 0.80 TB/s,
# a quarter of the H100's DRAM bandwidth whether the dense matrix fits its L2 or not (0.7 MB to 51 MB); the
# partition (csr_partition_kernel) a floor plus a time per row. The H200 has the H100's 132 SMs at its clocks
# (devices/gpus.toml), so they stand for the profile's GPU; another GPU's carry by SMs x clock.
SPMM_FLOOR_US = 4.48
SPMM_GATHER_BYTES_PER_US = 8.0e5
SPMM_PARTITION_FLOOR_US = 3.27
SPMM_PARTITION_US_PER_ROW = 3.97e-5


def spmm_product_us(gathered_bytes: float) -> float:
    """µs of cuSPARSE's csrmm kernel that gathers `gathered_bytes` of dense rows (nnz x n x itemsize)."""
    return SPMM_FLOOR_US + gathered_bytes / SPMM_GATHER_BYTES_PER_US


def spmm_partition_us(rows: int) -> float:
    """µs of cuSPARSE's partition of a CSR matrix's `rows` row offsets among the product's thread blocks."""
    return SPMM_PARTITION_FLOOR_US + rows * SPMM_PARTITION_US_PER_ROW
