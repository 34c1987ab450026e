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
