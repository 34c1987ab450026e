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
from dataclasses import dataclass

MAX_BLOCK_THREADS = 1024  # SoftMax.cu max_threads
# The fit's features, by name (a profile fitted before the L2 terms keeps its four and is read by them). The L2
# terms: the slices the resident blocks walk in one pass (the wave's working set) against the GPU's L2, its fill
# min(1, working set / L2). As the working set nears and outgrows the L2, the second and third passes find less of
# it there and read DRAM again, and each visit waits longer: the visits and the bytes again, times the fill. On the
# H200's channel_grid (validation/h200_channel_grid_raw.json.gz) the forward's leave-one-out median went 25.5% ->
# 19.3% (backward 11.7% -> 11.9%), and KernelBench's eight spatial softmax kernels (held out) 30% -> 22% median
# |error| (2026-12-05).
FEATURES = ("floor", "serial visits", "serial visits x L2 fill", "reduction steps", "bytes", "bytes x L2 fill")
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


@dataclass(frozen=True)
class LaunchGrid:
    """One spatial softmax launch on a GPU (SpatialSoftMax_getBlockSize / getGridSize)."""
    dim_threads: int
    inner_threads: int
    inner_blocks: int
    outer_blocks: int
    max_active: int  # blocks resident at once on the GPU


def launch_grid(outer: int, dim: int, inner: int, sm_count: int, capability: str) -> LaunchGrid:
    """The block shape and grid on a GPU of sm_count SMs: as many blocks as fit at once, first over the inner
    positions, then over the outer ones. Occupancy by threads and blocks per SM (registers and shared memory are
    not the limit for these small kernels)."""
    dim_threads, inner_threads = block_shape(dim, inner)
    per_sm = min(_per_sm(THREADS_PER_SM, capability) // (dim_threads * inner_threads),
                 _per_sm(BLOCKS_PER_SM, capability))
    max_active = max(1, per_sm) * sm_count
    inner_blocks = min(math.ceil(inner / inner_threads), max_active)
    outer_blocks = min(math.ceil(max_active / inner_blocks), outer)
    return LaunchGrid(dim_threads, inner_threads, inner_blocks, outer_blocks, max_active)


def serial_steps(outer: int, dim: int, inner: int, sm_count: int, capability: str) -> tuple[int, int]:
    """(element visits, block-reduction steps) one thread makes, per pass. Visits: (outer slices it strides
    over) x (inner positions it strides over) x (its share of the dim). Where dim_threads share a slice, each
    slice also ends in a shared-memory tree reduction of log2(dim_threads) synchronized steps
    (spatialBlockReduceX)."""
    g = launch_grid(outer, dim, inner, sm_count, capability)
    slices = math.ceil(outer / g.outer_blocks) * math.ceil(inner / (g.inner_blocks * g.inner_threads))
    return slices * math.ceil(dim / g.dim_threads), slices * int(math.log2(g.dim_threads))


def wave_bytes(outer: int, dim: int, inner: int, itemsize: int, sm_count: int, capability: str) -> float:
    """Bytes of input the blocks resident at once walk in one pass: active blocks x threads x each thread's share
    of its dim slice."""
    g = launch_grid(outer, dim, inner, sm_count, capability)
    active = min(g.inner_blocks * g.outer_blocks, g.max_active)
    return active * g.dim_threads * g.inner_threads * math.ceil(dim / g.dim_threads) * itemsize


def spatial_features(outer: int, dim: int, inner: int, nbytes: float, itemsize: int, sm_count: int,
                     capability: str, l2_bytes: float) -> dict[str, float]:
    """The fit's inputs for one kernel, by FEATURES name: 1, one thread's serial visits, its block-reduction
    steps, bytes moved, and the visits and bytes again times the L2 fill of the wave's working set."""
    visits, reduce_steps = serial_steps(outer, dim, inner, sm_count, capability)
    fill = min(1.0, wave_bytes(outer, dim, inner, itemsize, sm_count, capability) / l2_bytes) if l2_bytes else 0.0
    return {"floor": 1.0, "serial visits": float(visits), "serial visits x L2 fill": visits * fill,
            "reduction steps": float(reduce_steps), "bytes": float(nbytes), "bytes x L2 fill": nbytes * fill}


def spatial_softmax_us(fit: dict, features: dict[str, float], bytes_ratio: float = 1.0) -> float:
    """µs of one spatial softmax kernel by its fit (`coefficients` over its `features` names) from
    spatial_features; bytes_ratio scales the per-byte terms (another GPU's bandwidth against the profiled one's)."""
    return sum(c * features[name] * (bytes_ratio if name.startswith("bytes") else 1.0)
               for c, name in zip(fit["coefficients"], fit["features"]))
