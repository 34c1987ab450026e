"""Does a PyTorch CUDA reduction split each output across thread blocks ("global reduce")?

A global reduce zeroes a semaphore buffer first, so it costs one more GPU work item (a memset). This restates
the decision in setReduceConfig (aten/src/ATen/native/cuda/Reduce.cuh): block shape from the reduced and kept
sizes, then whether each thread would still have >= 256 values after splitting across warps while the grid
is small enough to leave SMs idle.
"""

from __future__ import annotations

import math

REDUCE_SEMAPHORE_MEMSETS = 1  # a global reduce zeroes its semaphores first
WARP_SIZE = 32
MAX_REDUCE_THREADS = 512
INPUT_VEC = 4  # vt0: values a thread loads at once along a contiguous reduced dim
OUTPUT_VEC = 4  # outputs a thread handles at once when the reduced dim is not the contiguous one
MIN_VALUES_PER_THREAD = 16
MAX_VALUES_PER_THREAD = 256
VECTORIZE_MIN_DIM = 128


def _floor_pow2(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n > 0 else 1


def is_global_reduce(num_outputs: int, inputs_per_output: int, reduce_fastest: bool, sm_count: int,
                     max_threads_per_sm: int) -> bool:
    return _split(num_outputs, inputs_per_output, reduce_fastest, sm_count, max_threads_per_sm)[0] > 1


SEMAPHORE_BYTES = 4  # one int per block column of the grid


def global_reduce_temporaries(num_outputs: int, inputs_per_output: int, reduce_fastest: bool, sm_count: int,
                              max_threads_per_sm: int, accumulator_bytes: int) -> tuple[int, ...]:
    """Bytes of the staging buffer and the semaphores a global reduce takes from the caching allocator, held while
    the kernel runs; () where the reduction is not split. The buffer holds the blocks' partial results
    (ReduceConfig::global_memory_size in Reduce.cuh: accumulator size x outputs x blocks per output, x block.x x
    the output vector where the block's x threads each hold their own outputs, i.e. the reduced dim is not the
    contiguous one); the semaphores an int per grid column (semaphore_size). Measured on an H100
    (validation/probes/size_rules/size_rules_run1.json): amax over dim 0 of a 4 GiB fp32 (R, 1024) tensor took
    132 MiB, 4 x 1024 x 264 blocks x 32 x 4."""
    ctas, width, out_vec, grid = _split(num_outputs, inputs_per_output, reduce_fastest, sm_count, max_threads_per_sm)
    if ctas <= 1:
        return ()
    return (accumulator_bytes * num_outputs * ctas * (1 if reduce_fastest else width * out_vec),
            SEMAPHORE_BYTES * grid)


def _split(num_outputs: int, inputs_per_output: int, reduce_fastest: bool, sm_count: int,
           max_threads_per_sm: int) -> tuple[int, int, int, int]:
    """(blocks per output, block width, output vector, grid columns) as setReduceConfig chooses them (1 block per
    output where the reduction is not split)."""
    if num_outputs < 1 or inputs_per_output <= 1:
        return 1, 1, 1, 1
    dim0, dim1 = (inputs_per_output, num_outputs) if reduce_fastest else (num_outputs, inputs_per_output)
    out_vec = 1
    if reduce_fastest and dim0 >= VECTORIZE_MIN_DIM:
        dim0 //= INPUT_VEC
    elif not reduce_fastest:
        out_vec = OUTPUT_VEC
        dim0 = max(1, dim0 // out_vec)
    max_threads = MAX_REDUCE_THREADS // out_vec
    d0 = _floor_pow2(dim0) if dim0 < max_threads else max_threads
    d1 = _floor_pow2(dim1) if dim1 < max_threads else max_threads
    width = min(d0, WARP_SIZE)
    height = min(d1, max_threads // width)
    width = min(d0, max_threads // height)
    step_in = step_out = 1
    if reduce_fastest:
        step_in *= width
    else:
        step_out *= width
    split_across_warps = math.ceil(inputs_per_output / step_in) >= min(height * 16, MAX_VALUES_PER_THREAD)
    if split_across_warps:
        step_in *= height
    else:
        step_out *= height
    target_grid = sm_count * (max_threads_per_sm // (width * height))
    grid = math.ceil(max(1, num_outputs // out_vec) / step_out)
    values_per_thread = math.ceil(inputs_per_output / step_in)
    if not (split_across_warps and values_per_thread >= MAX_VALUES_PER_THREAD and grid <= target_grid):
        return 1, width, out_vec, grid
    ctas = max(min(math.ceil(target_grid / grid), math.ceil(values_per_thread / MIN_VALUES_PER_THREAD)),
               math.ceil(values_per_thread / MAX_VALUES_PER_THREAD))
    return ctas, width, out_vec, grid


def reduced_dims(ndim: int, dim) -> set[int]:
    """Normalise an aten `dim` argument (None, int, or list; empty means all) to a set of dims."""
    if ndim == 0:
        return set()
    if dim is None or dim == () or dim == []:
        return set(range(ndim))
    dims = dim if isinstance(dim, (list, tuple)) else (dim,)
    return {d % ndim for d in dims}


def reduces_fastest_dim(shape: tuple[int, ...], stride: tuple[int, ...], dims: set[int]) -> bool:
    """Whether the input's most contiguous non-trivial dim is one being reduced."""
    candidates = [(s, i) for i, (n, s) in enumerate(zip(shape, stride)) if n > 1]
    if not candidates:
        return True
    return min(candidates)[1] in dims
