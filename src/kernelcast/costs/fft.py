"""cuFFT transforms: _fft_r2c, _fft_c2r, _fft_c2c (torch.fft.*, torch.stft, torch.istft).

FLOPs: the conventional count for a radix-2 style transform, 5 * N * log2(N) per complex transform of N
points (the figure FFTW and cuFFT benchmarks report); a real-input or real-output transform is half of that.
A multi-dimensional transform counts N as the product of its transformed sizes. flop_counter has no FFT formula.

Work items, from torch's aten/src/ATen/native/cuda/SpectralOps.cpp (_fft_r2c_cufft, _fft_c2r_cufft,
_fft_c2c_cufft):
- each cuFFT execution handles up to CUFFT_MAX_NDIM dims (r2c: the last dim first, then the others as c2c);
- c2r always clones its input first (cuFFT overwrites it) when it transforms one dim;
- a normalization other than "none" is one more kernel (a mul_); r2c with onesided=False fills the other half
  with the conjugate-symmetric values (one more kernel).
How many kernels one cuFFT execution runs is cuFFT's choice and closed source. Measured (H200, torch 2.11, zoo
audio_spectrogram_forward): a batched 400-point r2c is one kernel (regular_fft_r2c). ASSUMED: one kernel per
transformed dim up to CUFFT_SINGLE_KERNEL_MAX_N points, one more per further factor of that size.
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord, TensorMeta

from .common import arg, bytes_read, bytes_written
from .registry import Cost, CostContext, register

FFT_FLOPS_PER_POINT_LOG2 = 5.0  # complex transform: 5 N log2 N
REAL_TRANSFORM_SHARE = 0.5
CUFFT_MAX_NDIM = 3  # cufft_max_ndim in torch's CuFFTUtils.h
CUFFT_SINGLE_KERNEL_MAX_N = 4096  # ASSUMED: sizes up to this run in one kernel per dim (400 measured)
NORMALIZATION_NONE = 0
CLONE_KERNELS = 1
NORMALIZE_KERNELS = 1
CONJUGATE_FILL_KERNELS = 1


def fft_flops(batch: int, sizes: tuple[int, ...], real: bool) -> float:
    """5 * N * log2(N) per transform of N = prod(sizes) points, halved for real input or output."""
    n = math.prod(sizes)
    if n <= 1:
        return 0.0
    flops = FFT_FLOPS_PER_POINT_LOG2 * n * math.log2(n) * batch
    return flops * REAL_TRANSFORM_SHARE if real else flops


def kernels_per_dim(n: int) -> int:
    """cuFFT kernels for one transformed dim of n points (ASSUMED beyond the measured single-kernel size)."""
    if n <= CUFFT_SINGLE_KERNEL_MAX_N:
        return 1
    return math.ceil(math.log(n) / math.log(CUFFT_SINGLE_KERNEL_MAX_N))


def _dims(op: OpRecord, t: TensorMeta) -> tuple[int, ...]:
    dims = op.args.get("dim") or ()
    dims = dims if isinstance(dims, (tuple, list)) else (dims,)
    return tuple(int(d) % len(t.shape) for d in dims) if t.shape else ()


def _cost(op: OpRecord, t: TensorMeta, sizes: tuple[int, ...], kernels: int, real: bool) -> Cost:
    batch = t.numel // max(math.prod(t.shape[d] for d in _dims(op, t)), 1)
    return Cost(flops=fft_flops(batch, sizes, real), bytes_read=bytes_read(op), bytes_written=bytes_written(op),
                kernels=kernels, dtype=t.dtype, kind="fft")


def _extras(op: OpRecord) -> int:
    return NORMALIZE_KERNELS * (int(op.args.get("normalization") or 0) != NORMALIZATION_NONE)


@register("aten._fft_r2c")
def fft_r2c(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    dims = _dims(op, x)
    sizes = tuple(x.shape[d] for d in dims)
    kernels = sum(kernels_per_dim(n) for n in sizes) + _extras(op)
    kernels += CONJUGATE_FILL_KERNELS * (not op.args.get("onesided", True))
    return _cost(op, x, sizes, kernels, real=True)


@register("aten._fft_c2r")
def fft_c2r(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    dims = _dims(op, x)
    last = int(op.args.get("last_dim_size") or 0)
    sizes = tuple(x.shape[d] for d in dims[:-1]) + ((last,) if dims else ())
    kernels = sum(kernels_per_dim(n) for n in sizes) + _extras(op) + CLONE_KERNELS * (len(dims) == 1)
    return _cost(op, x, sizes, kernels, real=True)


@register("aten._fft_c2c")
def fft_c2c(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    dims = _dims(op, x)
    sizes = tuple(x.shape[d] for d in dims)
    if not sizes:  # dim empty: a clone
        return Cost(bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=CLONE_KERNELS,
                    dtype=x.dtype, kind="copy")
    kernels = sum(kernels_per_dim(n) for n in sizes) + _extras(op)
    return _cost(op, x, sizes, kernels, real=False)
