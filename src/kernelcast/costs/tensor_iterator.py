"""How many kernels a TensorIterator op launches over tensors too large for 32-bit index math.

CUDA's TensorIterator kernels index with 32-bit integers. Before launching, `gpu_kernel` (native/cuda/Loops.cuh)
and `gpu_reduce_kernel` (native/cuda/Reduce.cuh), and the random-number kernels (DistributionTemplates.h), check
`iter.can_use_32bit_indexing()` (TensorIterator.cpp): the iteration's element count and, for every operand, its
largest byte offset, sum((size - 1) x stride in bytes), must be at most INT32_MAX. Where not, they launch once per
sub-iterator of `iter.with_32bit_indexing()`: the iterator is split in two along the dim of the largest extent
(`get_dim_to_split`: (size - 1) x |stride in bytes| over the operands; `split`: the first size // 2 positions
and the rest), and each half again, until every part fits. A 4.2 GB fp32 tensor is therefore two kernels, an
8.5 GB one four. Measured on the H200 (torch 2.11, validation/kernelbench/h200_kernels.json.gz): KernelBench L2
#34's bias add, GELU and scaling over a 128 x 64 x 32 x 64 x 64 fp32 tensor (4.3 GB) ran two kernels each, L2
#3's adds two each; before, kernelcast counted one (L2 #34 8 kernels against 12, L2 #3 10 against 14).
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

from kernelcast.records import OpRecord, TensorMeta

from .registry import Cost

INT32_MAX = 2**31 - 1


def _operands(op: OpRecord) -> list[TensorMeta]:
    return [t for t in op.tensors_in() + op.tensors_out() if t.on_gpu and t.numel]


def _aligned(t: TensorMeta, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """t's byte strides over the iteration shape (broadcast dims 0), right-aligned; None where t does not
    broadcast to it (a reduction's output without its reduced dims, whose offsets are within the input's)."""
    if len(t.shape) > len(shape):
        return None
    lead = len(shape) - len(t.shape)
    strides = [0] * lead
    for n, s, m in zip(t.shape, t.stride, shape[lead:]):
        if n != m and n != 1:
            return None
        strides.append(0 if n == 1 else abs(s) * t.itemsize)
    return tuple(strides)


def _coalesced(shape: tuple[int, ...], strides: list[tuple[int, ...]]) -> tuple[tuple[int, ...], tuple]:
    """TensorIterator's coalesce_dimensions in row-major order: an outer dim merges into the next inner one where
    every operand steps over it as over the inner dim's whole extent (or either is of size 1)."""
    sizes, strides_t = [shape[-1]], [[s[-1]] for s in strides]
    for d in range(len(shape) - 2, -1, -1):
        n = shape[d]
        if n == 1:
            continue
        inner = sizes[0]
        if inner == 1 or all(s[d] == inner * t[0] for s, t in zip(strides, strides_t)):
            for s, t in zip(strides, strides_t):
                t[0] = s[d] if inner == 1 else t[0]
            sizes[0] = n * inner
        else:
            sizes.insert(0, n)
            for s, t in zip(strides, strides_t):
                t.insert(0, s[d])
    return tuple(sizes), tuple(tuple(t) for t in strides_t)


def _fits(sizes: tuple[int, ...], strides) -> bool:
    """can_use_32bit_indexing: the element count and every operand's largest byte offset within INT32_MAX."""
    if math.prod(sizes) > INT32_MAX:
        return False
    return all(1 + sum((n - 1) * s for n, s in zip(sizes, op)) <= INT32_MAX for op in strides)


@lru_cache(maxsize=1024)
def _parts(sizes: tuple[int, ...], strides: tuple) -> int:
    if _fits(sizes, strides):
        return 1
    # the dim of the largest extent, the outermost at a tie (get_dim_to_split walks from the outermost with >)
    extents = [max((n - 1) * op[d] for op in strides) for d, n in enumerate(sizes)]
    dim = max(range(len(sizes)), key=lambda d: (extents[d], -d))
    if sizes[dim] < 2:
        return 1
    first = sizes[dim] // 2
    return (_parts(sizes[:dim] + (first,) + sizes[dim + 1:], strides)
            + _parts(sizes[:dim] + (sizes[dim] - first,) + sizes[dim + 1:], strides))


def index32_parts(tensors: list[TensorMeta]) -> int:
    """Kernels one TensorIterator launch becomes over these operands (module docstring): 1 where 32-bit index math
    covers them, else the sub-iterators of with_32bit_indexing(). The iteration shape is the largest operand's."""
    tensors = [t for t in tensors if t.numel]
    if not tensors:
        return 1
    shape = max(tensors, key=lambda t: t.numel).shape
    if not shape:
        return 1
    strides = [s for s in (_aligned(t, shape) for t in tensors) if s is not None]
    if _fits(shape, strides):  # nearly every op: no coalescing needed to tell
        return 1
    return _parts(*_coalesced(shape, strides))


def split_for_32bit_indexing(op: OpRecord, cost: Cost) -> Cost:
    """A TensorIterator op's cost with each of its kernels launched once per 32-bit sub-iterator (its parts too:
    a reduction's input cast is a TensorIterator copy over the same elements). Bytes and FLOPs are unchanged."""
    parts = index32_parts(_operands(op))
    if parts == 1 or cost.kernels == 0:
        return cost
    return dataclasses.replace(cost, kernels=cost.kernels * parts,
                               parts=tuple(dataclasses.replace(p, kernels=p.kernels * parts) for p in cost.parts))
