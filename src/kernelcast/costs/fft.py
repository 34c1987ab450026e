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
2-D 128 x 128 r2c and c2r two (regular_fft, then vector_fft_symm_r2c / _c2r), a 2-D 128 x 128 c2c of 512
transforms one (vector_2d_fft<128, 128>). The cuFFT grid (calibrate/grids.py fft_grid, run on an H100 with
torch 2.11: validation/h100/h100_fft_grid_raw.json.gz; 1-D sizes 64-65536, 2-D sides 32-512): one kernel per
transformed dim up to CUFFT_SINGLE_KERNEL_MAX_N points (16384 measured one kernel, 65536 two), one more per
further factor of that size, and for a real transform beyond it a pre- or post-processing kernel
(postprocess_kernel / preprocess_kernel); a 2-D c2c of a power-of-two side of at most
CUFFT_2D_SINGLE_KERNEL_MAX_SIDE one kernel from CUFFT_2D_SINGLE_KERNEL_MIN_BATCH transforms (two below: 256 of
64 x 64 and 64 of 128 x 128 ran regular_fft then vector_fft).

Bytes: each cuFFT kernel is a pass over the transform's data. The first reads the op's input and writes its
output; each further one reads and writes the complex buffer (the output of an r2c or c2c, the input of a c2r).
A c2r's clone of its input and the normalization's mul_ are kernels of their own kinds (parts: a copy and a
pointwise pass). On the grid the passes ran at 2.2-2.9 TB/s of these bytes on the H100 at 16 MB and more, where
one pass over the op's bytes had priced them at 0.41-0.57 of their time (scripts/eval/value_index_check.py --raw ...
--gpu h100).
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord, TensorMeta

from .common import arg, bytes_read, bytes_written
from .registry import Cost, CostContext, register

FFT_FLOPS_PER_POINT_LOG2 = 5.0  # complex transform: 5 N log2 N
REAL_TRANSFORM_SHARE = 0.5
CUFFT_MAX_NDIM = 3  # cufft_max_ndim in torch's CuFFTUtils.h
CUFFT_SINGLE_KERNEL_MAX_N = 16384  # measured: 16384 points one kernel (vector_fft_symm_r2c), 65536 two
REAL_FACTORED_EXTRA_KERNELS = 1  # a real transform beyond one kernel: cuFFT's pre- or post-processing kernel
NORMALIZATION_NONE = 0
CUFFT_2D_SINGLE_KERNEL_MAX_SIDE = 128  # measured: vector_2d_fft<128, 128> (zoo fft_layers_train, H200)
CUFFT_2D_SINGLE_KERNEL_MIN_BATCH = 512  # measured: 512 and more one kernel, 256 and fewer two (the grid, the zoo)
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


def c2c_kernels(sizes: tuple[int, ...], batch: int) -> int:
    """cuFFT kernels of one complex-to-complex execution of `batch` transforms over these sizes."""
    if len(sizes) == 2 and max(sizes) <= CUFFT_2D_SINGLE_KERNEL_MAX_SIDE and sizes[0] == sizes[1] and \
            sizes[0] & (sizes[0] - 1) == 0 and batch >= CUFFT_2D_SINGLE_KERNEL_MIN_BATCH:
        return 1
    return per_dim_kernels(sizes)


def per_dim_kernels(sizes: tuple[int, ...]) -> int:
    """cuFFT kernels of complex-to-complex passes over these dims one at a time (kernels_per_dim each): a c2c's,
    and the dims a real transform runs as c2c beside its real one (all but its last)."""
    return sum(kernels_per_dim(n) for n in sizes)


def real_kernels(sizes: tuple[int, ...]) -> int:
    """cuFFT kernels of one real-to-complex or complex-to-real execution over these sizes: a kernel per dim (more
    beyond CUFFT_SINGLE_KERNEL_MAX_N), and the pre- or post-processing kernel of a factored real dim."""
    return sum(kernels_per_dim(n) + REAL_FACTORED_EXTRA_KERNELS * (kernels_per_dim(n) > 1) for n in sizes)


def _dims(op: OpRecord, t: TensorMeta) -> tuple[int, ...]:
    dims = op.args.get("dim") or ()
    dims = dims if isinstance(dims, (tuple, list)) else (dims,)
    return tuple(int(d) % len(t.shape) for d in dims) if t.shape else ()


def _batch(op: OpRecord, t: TensorMeta) -> int:
    return t.numel // max(math.prod(t.shape[d] for d in _dims(op, t)), 1)


def _transform(op: OpRecord, t: TensorMeta, sizes: tuple[int, ...], passes: int, real: bool,
               complex_bytes: float, extra_parts: tuple[Cost, ...], byte_passes: int | None = None) -> Cost:
    """The cuFFT kernels as `passes` passes (the first over the op's input and output, each further one over the
    complex buffer), with the op's other kernels as parts (their bytes on top: a clone moves the input twice
    more)."""
    further = max((passes if byte_passes is None else byte_passes) - 1, 0) * complex_bytes
    main = Cost(flops=fft_flops(_batch(op, t), sizes, real), bytes_read=bytes_read(op) + further,
                bytes_written=bytes_written(op) + further, kernels=passes, dtype=t.dtype, kind="fft")
    return main.with_parts(*extra_parts) if extra_parts else main


def _pass(nbytes: float, kind: str, dtype: str) -> Cost:
    """One kernel reading and writing nbytes (a clone, a normalization's mul_, a conjugate fill)."""
    return Cost(bytes_read=nbytes, bytes_written=nbytes, kernels=1, dtype=dtype, kind=kind)


def _normalization(op: OpRecord, out: TensorMeta) -> tuple[Cost, ...]:
    if int(op.args.get("normalization") or 0) == NORMALIZATION_NONE:
        return ()
    return (_pass(out.nbytes, "pointwise", out.dtype),) * NORMALIZE_KERNELS


@register("aten._fft_r2c")
def fft_r2c(op: OpRecord, ctx: CostContext) -> Cost:
    x, out = arg(op, "self"), op.tensors_out()[0]
    dims = _dims(op, x)
    sizes = tuple(x.shape[d] for d in dims)
    extras = _normalization(op, out)
    if not op.args.get("onesided", True):
        extras += (_pass(out.nbytes, "pointwise", out.dtype),) * CONJUGATE_FILL_KERNELS
    return _transform(op, x, sizes, real_kernels(sizes[-1:]) + per_dim_kernels(sizes[:-1]), True, out.nbytes, extras)


@register("aten._fft_c2r")
def fft_c2r(op: OpRecord, ctx: CostContext) -> Cost:
    x, out = arg(op, "self"), op.tensors_out()[0]
    dims = _dims(op, x)
    last = int(op.args.get("last_dim_size") or 0)
    sizes = tuple(x.shape[d] for d in dims[:-1]) + ((last,) if dims else ())
    clone = len(dims) == 1 or one_execution(dims)
    extras = (_pass(x.nbytes, "copy", x.dtype),) * (CLONE_KERNELS * clone) + _normalization(op, out)
    return _transform(op, x, sizes, real_kernels(sizes[-1:]) + per_dim_kernels(sizes[:-1]), True, x.nbytes, extras)


@register("aten._fft_c2c")
def fft_c2c(op: OpRecord, ctx: CostContext) -> Cost:
    x, out = arg(op, "self"), op.tensors_out()[0]
    dims = _dims(op, x)
    sizes = tuple(x.shape[d] for d in dims)
    if not sizes:  # dim empty: a clone
        return Cost(bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=CLONE_KERNELS,
                    dtype=x.dtype, kind="copy")
    kernels = c2c_kernels(sizes, _batch(op, x))
    # a 2-D transform in one kernel (vector_2d_fft) still moved its data about twice: 128 x 128 x 1024 ran 199 µs
    # where two kernels' passes over 256 x 256 x 256 (the same bytes) ran 191 (the H100 grid)
    return _transform(op, x, sizes, kernels, False, out.nbytes, _normalization(op, out),
                      byte_passes=max(kernels, len(sizes)))
