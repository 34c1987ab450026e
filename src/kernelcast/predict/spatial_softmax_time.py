"""Softmax over a dim that is not the last ("spatial" softmax: dim 1 of an NC(D)HW map, log_softmax before a
segmentation loss) by its launch geometry (the profile's `timings.spatial_softmax`, fitted by
calibrate/spatial_rates.py).

aten/src/ATen/native/cuda/SoftMax.cu (torch 2.11) runs cunn_SpatialSoftMaxForward / Backward for inner size > 1:
- block (SpatialSoftMax_getBlockSize): inner_threads = min(inner, 1024) along the inner positions; where
  inner_threads <= 64 and the dim is >= 64, dim_threads (a power of two) share the walk along the dim;
- grid (SpatialSoftMax_getGridSize): as many blocks as fit on the GPU at once (occupancy x SMs): first over the
  inner positions, then over the outer ones; each thread grid-strides over the rest;
- each thread walks its dim slice: three passes forward (max, sum of exponentials, write), two backward.

So a few long slices (softmax over 1024 classes of 4 x 256 positions) leave most of the GPU idle, each thread
walking 1024 elements one load after another: 784 us for 4 MB on the H200, where the same bytes stream in 4 us
(validation/h200_channel_grid_raw.json.gz). The time is

    floor_us + us_per_visit x (one thread's serial element visits) + us_per_reduction_step x (its block
    reductions' steps) + us_per_byte x bytes,

the serial visits from the geometry above on the GPU at hand (its SMs and resident threads per SM), so the fit
carries to another GPU through that GPU's own parameters.
"""

from __future__ import annotations

import math

MAX_BLOCK_THREADS = 1024  # SoftMax.cu max_threads
FEATURES = ("floor", "serial visits", "reduction steps", "bytes")
# Resident threads and blocks per SM by compute capability (CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability"); a capability not listed takes the nearest lower one's.
THREADS_PER_SM = {"7.0": 2048, "7.5": 1024, "8.0": 2048, "8.6": 1536, "8.7": 2048, "8.9": 1536, "9.0": 2048,
                  "10.0": 2048, "12.0": 1536}
BLOCKS_PER_SM = {"7.0": 32, "7.5": 16, "8.0": 32, "8.6": 16, "8.7": 16, "8.9": 24, "9.0": 32, "10.0": 32,
                 "12.0": 24}


def _per_sm(table: dict[str, int], capability: str) -> int:
    def number(c: str) -> float:
        major, _, minor = c.partition(".")
        return int(major) + int(minor or 0) / 10

    if capability in table:
        return table[capability]
    try:
        lower = [c for c in table if number(c) <= number(capability)]
    except ValueError:  # another vendor's "gfx942": Hopper's limits
        return table["9.0"]
    return table[max(lower, key=number)] if lower else table[min(table, key=number)]


def block_shape(dim: int, inner: int) -> tuple[int, int]:
    """(dim_threads, inner_threads) of one block (SpatialSoftMax_getBlockSize)."""
    inner_threads = min(inner, MAX_BLOCK_THREADS)
    dim_threads = 1
    if inner_threads <= 64 and dim >= 64:
        while inner_threads * dim_threads <= MAX_BLOCK_THREADS and dim_threads <= dim:
            dim_threads *= 2
        dim_threads //= 2
    return dim_threads, inner_threads


def serial_steps(outer: int, dim: int, inner: int, sm_count: int, capability: str) -> tuple[int, int]:
    """(element visits, block-reduction steps) one thread makes, per pass. Visits: (outer slices it strides
    over) x (inner positions it strides over) x (its share of the dim). Where dim_threads share a slice, each
    slice also ends in a shared-memory tree reduction of log2(dim_threads) synchronized steps
    (spatialBlockReduceX). Occupancy by threads and blocks per SM (registers and shared memory are not the limit
    for these small kernels)."""
    dim_threads, inner_threads = block_shape(dim, inner)
    threads = dim_threads * inner_threads
    per_sm = min(_per_sm(THREADS_PER_SM, capability) // threads, _per_sm(BLOCKS_PER_SM, capability))
    max_active = max(1, per_sm) * sm_count
    inner_blocks = min(math.ceil(inner / inner_threads), max_active)
    outer_blocks = min(math.ceil(max_active / inner_blocks), outer)
    slices = math.ceil(outer / outer_blocks) * math.ceil(inner / (inner_blocks * inner_threads))
    return slices * math.ceil(dim / dim_threads), slices * int(math.log2(dim_threads))


def spatial_features(outer: int, dim: int, inner: int, nbytes: float, sm_count: int,
                     capability: str) -> list[float]:
    """The fit's inputs for one kernel: 1, one thread's serial visits, its block-reduction steps, bytes moved."""
    visits, reduce_steps = serial_steps(outer, dim, inner, sm_count, capability)
    return [1.0, float(visits), float(reduce_steps), float(nbytes)]


def spatial_softmax_us(fit: dict, outer: int, dim: int, inner: int, nbytes: float, sm_count: int,
                       capability: str) -> float:
    """µs of one spatial softmax kernel by its fit (`coefficients`, in FEATURES order) on a GPU of sm_count SMs
    and this compute capability."""
    features = spatial_features(outer, dim, inner, nbytes, sm_count, capability)
    return sum(c * x for c, x in zip(fit["coefficients"], features))
