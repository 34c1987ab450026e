"""cuFFT transforms: _fft_r2c, _fft_c2r, _fft_c2c (torch.fft.*, torch.stft, torch.istft).

FLOPs: the conventional count for a radix-2 style transform, 5 * N * log2(N) per complex transform of N
points (the figure FFTW and cuFFT benchmarks report); a real-input or real-output transform is half of that.
A multi-dimensional transform counts N as the product of its transformed sizes. flop_counter has no FFT formula.

Work items, from torch's aten/src/ATen/native/cuda/SpectralOps.cpp (_fft_r2c_cufft, _fft_c2r_cufft,
_fft_c2c_cufft):
- each cuFFT execution handles up to CUFFT_MAX_NDIM dims (r2c: the last dim first, then the others as c2c);
- c2r clones its input first (cuFFT may overwrite it, gh-34551) whenever it runs as one cuFFT execution
  (use_optimized_cufft_path: at most CUFFT_MAX_NDIM dims, not starting with dims 0 and 1) or over one dim;
  otherwise the leading dims run as a c2c first, into a new tensor, and no clone is needed;
- a normalization other than "none" is one more kernel (a mul_); r2c with onesided=False fills the other half
  with the conjugate-symmetric values (one more kernel).
How many kernels one cuFFT execution runs is cuFFT's choice and closed source. Measured (H200, torch 2.11, zoo
audio_spectrogram_forward): a batched 400-point r2c is one kernel (regular_fft_r2c); (zoo fft_layers_train) a
2-D 128 x 128 r2c and c2r two (regular_fft, then vector_fft_symm_r2c / _c2r), a 2-D 128 x 128 c2c one
(vector_2d_fft<128, 128>). ASSUMED: one kernel per transformed dim up to CUFFT_SINGLE_KERNEL_MAX_N points, one
more per further factor of that size; a 2-D c2c of at most CUFFT_2D_SINGLE_KERNEL_MAX_SIDE points a side one
kernel (the largest measured).
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
CUFFT_2D_SINGLE_KERNEL_MAX_SIDE = 128  # measured: vector_2d_fft<128, 128> (zoo fft_layers_train, H200)
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


def one_execution(dims: tuple[int, ...]) -> bool:
    """use_optimized_cufft_path (aten/src/ATen/native/cuda/SpectralOps.cpp): the transform is one cuFFT
    execution over every dim, unless it has more than CUFFT_MAX_NDIM dims or starts with dims 0 and 1."""
    return len(dims) <= CUFFT_MAX_NDIM and not (len(dims) >= 2 and dims[0] == 0 and dims[1] == 1)


def c2c_kernels(sizes: tuple[int, ...]) -> int:
    """cuFFT kernels of one complex-to-complex execution over these sizes."""
    if len(sizes) == 2 and max(sizes) <= CUFFT_2D_SINGLE_KERNEL_MAX_SIDE:
        return 1
    return sum(kernels_per_dim(n) for n in sizes)


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
    clone = len(dims) == 1 or one_execution(dims)
    kernels = sum(kernels_per_dim(n) for n in sizes) + _extras(op) + CLONE_KERNELS * clone
    return _cost(op, x, sizes, kernels, real=True)


@register("aten._fft_c2c")
def fft_c2c(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    dims = _dims(op, x)
    sizes = tuple(x.shape[d] for d in dims)
    if not sizes:  # dim empty: a clone
        return Cost(bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=CLONE_KERNELS,
                    dtype=x.dtype, kind="copy")
    kernels = c2c_kernels(sizes) + _extras(op)
    return _cost(op, x, sizes, kernels, real=False)
