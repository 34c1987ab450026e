"""Layer norm, RMS norm and group norm: the kernels their CUDA host code launches, by shape, dtype and alignment.

Ops costed here (their launch rules win over any simpler formula elsewhere):
    aten.native_layer_norm, aten.native_layer_norm_backward, aten._fused_rms_norm,
    aten._fused_rms_norm_backward, aten.native_group_norm, aten.native_group_norm_backward

Each rule restates the host code of aten/src/ATen/native/cuda/layer_norm_kernel.cu or group_norm_kernel.cu
(torch 2.11); tests/test_launch_rules.py checks them against the H200's counts.

Pointer alignment: PyTorch's CUDA caching allocator hands out blocks whose sizes are rounded up to 512 bytes
(c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize), so every allocation starts 512-byte aligned; a tensor's
data pointer is then aligned as its storage offset (TensorMeta.offset, elements) times its item size is.
"""

from __future__ import annotations

import dataclasses
import math

from kernelcast.records import OpRecord, TensorMeta

from .common import blocks_key, contiguous_copies, memory_op, row_major, strided
from .reduce_config import is_global_reduce
from .registry import Cost, CostContext, register

NORM_FLOPS_PER_ELEMENT = 8.0  # mean, centre, square, sum, rstd, scale, weight, bias
NORM_BACKWARD_FLOPS_PER_ELEMENT = 12.0

ALLOCATOR_ALIGNMENT_BYTES = 512  # kMinBlockSize in CUDACachingAllocator.cpp: allocations start 512-byte aligned

# layer_norm_kernel.cu: the vectorized kernels load vec_size = 4 elements at once; LayerNormKernelImplInternal
# takes them for float/half/bfloat16 when N is a multiple of 4, N <= 2^24 (a float count stays exact) and
# X, Y, gamma, beta are all aligned to 4 * sizeof(T). Otherwise: RowwiseMomentsCUDAKernel +
# LayerNormForwardCUDAKernel.
LAYER_NORM_VEC_SIZE = 4
LAYER_NORM_VEC_DTYPES = ("float32", "float16", "bfloat16")
LAYER_NORM_MAX_VEC_N = 1 << 24
LAYER_NORM_UNVECTORIZED_KERNELS = 2
# LaunchGammaBetaBackwardCUDAKernel: when M > 64K rows and N / 32 < SMs / 2, partial sums over blocks of
# 32 rows (one kernel), then dgamma_blocks.sum(0) and dbeta_blocks.sum(0).
GAMMA_BETA_BLOCK_X = 32
GAMMA_BETA_ROWS_PER_BLOCK = 32
GAMMA_BETA_SPLIT_MIN_ROWS = 64 * 1024
GAMMA_BETA_MAX_GRID = 64 * 1024 // 2

# group_norm_kernel.cu, GroupNormKernelImplInternal: RowwiseMomentsCUDAKernel, then with gamma or beta
# ComputeFusedParamsCUDAKernel + one TensorIterator kernel, without them the TensorIterator kernel alone;
# HxW == 1 (GroupNorm1dForward): one TensorIterator kernel after the moments.
GROUP_NORM_MOMENTS_KERNELS = 1


def aligned(t: TensorMeta, alignment_bytes: int) -> bool:
    """Whether a tensor's data pointer is a multiple of `alignment_bytes` (allocations start 512-byte
    aligned; a view starts `offset` elements further in)."""
    return alignment_bytes <= ALLOCATOR_ALIGNMENT_BYTES and (t.offset * t.itemsize) % alignment_bytes == 0


def _tensor(op: OpRecord, name: str) -> TensorMeta | None:
    value = op.args.get(name)
    return value if isinstance(value, TensorMeta) and value.on_gpu else None


def _copy_unless_contiguous(*tensors: TensorMeta | None) -> int:
    """Kernels of `.contiguous()` / `expect_contiguous()` on each defined tensor: one copy per strided one."""
    return len(strided(*tensors))


def _with_copies(base: Cost, kernels: int, copies: tuple[Cost, ...]) -> Cost:
    """base with `kernels` work items in all, of which the copies are priced as copies (Cost.parts)."""
    return dataclasses.replace(base, kernels=kernels - len(copies)).with_parts(*copies)


def _rows_and_width(x: TensorMeta, normalized_shape) -> tuple[int, int]:
    """(M, N) of _check_layer_norm_inputs: N is the product of the normalized dims, M the rest."""
    dims = len(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else 1
    n = math.prod(x.shape[len(x.shape) - dims:]) if dims else 1
    return (x.numel // n if n else 0), n


def _row_key(x: TensorMeta, n: int) -> tuple[int, int]:
    """The byte curves' key of a layer or RMS norm: (row width, item size). The row is every normalized dim
    (a block walks N elements), not the input's last dim: a layer norm over (64, 256, 256) of 16 x 64 x 256 x 256
    had been read at 256 wide, 484 us predicted against 8.35 ms measured (KernelBench level 1 #40, H200)."""
    return n, x.itemsize


def layer_norm_vectorized(x: TensorMeta, n: int, params: tuple[TensorMeta | None, ...]) -> bool:
    """LayerNormKernelImplInternal's fast-path test. X is the contiguous input (a fresh, aligned copy when the
    caller's input was strided); Y is freshly allocated, so always aligned."""
    alignment = LAYER_NORM_VEC_SIZE * x.itemsize
    x_aligned = aligned(x, alignment) or not row_major(x)
    return (x.dtype in LAYER_NORM_VEC_DTYPES and n <= LAYER_NORM_MAX_VEC_N and n % LAYER_NORM_VEC_SIZE == 0
            and x_aligned and all(p is None or aligned(p, alignment) or not row_major(p) for p in params))


def _forward_kind(vectorized_kind: str, x: TensorMeta, n: int, params: tuple[TensorMeta | None, ...]) -> str:
    """The memory kind of a layer / RMS norm's forward kernel. The vectorized kernel's rate depends on the row
    width and on the norm (RMS norm skips the mean: 1.7x the layer norm's rate at 96 wide, the same at 8192;
    H200, validation/h200_norm_layout_linalg_raw.json.gz); the two unvectorized kernels (RowwiseMoments, then
    LayerNormForward) are another, slower path, the same for both norms (770 wide bf16 at 128 MB: 708 and 700 us,
    where 768 wide took 181 and 101)."""
    return vectorized_kind if layer_norm_vectorized(x, n, params) else "norm_unvectorized"


def layer_norm_forward_kernels(x: TensorMeta, n: int, weight: TensorMeta | None, bias: TensorMeta | None) -> int:
    """layer_norm_cuda: expect_contiguous() copies of strided inputs, then one vectorized kernel or two."""
    copies = _copy_unless_contiguous(x, weight, bias)
    return copies + (1 if layer_norm_vectorized(x, n, (weight, bias)) else LAYER_NORM_UNVECTORIZED_KERNELS)


def gamma_beta_split_rows(m: int, n: int, sm_count: int) -> int:
    """Rows of the partial-sum buffers when LaunchGammaBetaBackwardCUDAKernel splits M (0: it does not)."""
    if not (m > GAMMA_BETA_SPLIT_MIN_ROWS and n // GAMMA_BETA_BLOCK_X < sm_count // 2):
        return 0
    blocks_x = math.ceil(n / GAMMA_BETA_BLOCK_X)
    return min(GAMMA_BETA_MAX_GRID // blocks_x, math.ceil(m / GAMMA_BETA_ROWS_PER_BLOCK))


def column_sum_kernels(rows: int, cols: int, ctx: CostContext) -> int:
    """`.sum(0)` of a contiguous (rows, cols) tensor: one reduce kernel, plus a semaphore memset when the
    reduction splits each output across blocks (reduce_config)."""
    return 1 + is_global_reduce(cols, rows, False, ctx.sm_count, ctx.max_threads_per_sm)


def layer_norm_backward_kernels(grad_out: TensorMeta, x: TensorMeta, n: int, weight: TensorMeta | None,
                                grads: tuple[bool, bool, bool], ctx: CostContext) -> int:
    """layer_norm_backward_cuda: expect_contiguous() of X and gamma, dY.contiguous(); one input-gradient kernel
    (vectorized or not, one either way); one GammaBeta kernel for dgamma/dbeta, plus a column sum per
    gradient when M is split (LaunchGammaBetaBackwardCUDAKernel)."""
    m = x.numel // n if n else 0
    kernels = _copy_unless_contiguous(grad_out, x, weight) + int(grads[0])
    if grads[1] or grads[2]:
        split = gamma_beta_split_rows(m, n, ctx.sm_count)
        kernels += 1 + (sum(grads[1:]) * column_sum_kernels(split, n, ctx) if split else 0)
    return kernels


def _output_mask(op: OpRecord, count: int) -> tuple[bool, ...]:
    """Which gradients a backward computes: the outputs it returned (None where the mask was False)."""
    outs = op.outputs + (None,) * count
    return tuple(t is not None for t in outs[:count])


@register("aten.native_layer_norm")
def native_layer_norm(op: OpRecord, ctx: CostContext) -> Cost:
    x = _tensor(op, "input")
    base = memory_op(op, NORM_FLOPS_PER_ELEMENT, kind="norm")
    if x is None:
        return base
    _, n = _rows_and_width(x, op.args.get("normalized_shape"))
    weight, bias = _tensor(op, "weight"), _tensor(op, "bias")
    base = dataclasses.replace(base, kind=_forward_kind("norm", x, n, (weight, bias)), key=_row_key(x, n))
    return _with_copies(base, layer_norm_forward_kernels(x, n, weight, bias), contiguous_copies(x, weight, bias))


@register("aten._fused_rms_norm")
def fused_rms_norm(op: OpRecord, ctx: CostContext) -> Cost:
    """RMS norm runs layer_norm_kernel.cu's kernels with rms_norm=true (vectorized_layer_norm_kernel<T, T, true>
    on the H200), so the same rule picks them; there is no beta."""
    x = _tensor(op, "input")
    base = memory_op(op, NORM_FLOPS_PER_ELEMENT, kind="norm")
    if x is None:
        return base
    _, n = _rows_and_width(x, op.args.get("normalized_shape"))
    weight = _tensor(op, "weight")
    base = dataclasses.replace(base, kind=_forward_kind("rms_norm", x, n, (weight,)), key=_row_key(x, n))
    return _with_copies(base, layer_norm_forward_kernels(x, n, weight, None), contiguous_copies(x, weight))


def _with_gamma_beta_reads(base: Cost, dy: TensorMeta, x: TensorMeta, input_grad: bool, gamma_beta: bool) -> Cost:
    """A norm backward's bytes: the input-gradient kernel and the GammaBeta kernel each read dY and X
    (layer_norm_kernel.cu), so with both gradients they are read twice. Counted once, the calibration's backward
    rows (always with gamma and beta) had priced a backward without a weight at twice its time (zoo
    layernorm_odd_widths: 4096 x 770 fp32, 34 us predicted, 12.5 us measured)."""
    if not (input_grad and gamma_beta):
        return base
    return dataclasses.replace(base, bytes_read=base.bytes_read + dy.nbytes + x.nbytes)


@register("aten.native_layer_norm_backward")
def native_layer_norm_backward(op: OpRecord, ctx: CostContext) -> Cost:
    x, dy = _tensor(op, "input"), _tensor(op, "grad_out")
    base = memory_op(op, NORM_BACKWARD_FLOPS_PER_ELEMENT, kind="norm_backward")
    if x is None or dy is None:
        return base
    _, n = _rows_and_width(x, op.args.get("normalized_shape"))
    grads, weight = _output_mask(op, 3), _tensor(op, "weight")
    base = _with_gamma_beta_reads(dataclasses.replace(base, key=_row_key(x, n)), dy, x, grads[0], grads[1] or grads[2])
    return _with_copies(base, layer_norm_backward_kernels(dy, x, n, weight, grads, ctx),
                        contiguous_copies(dy, x, weight))


@register("aten._fused_rms_norm_backward")
def fused_rms_norm_backward(op: OpRecord, ctx: CostContext) -> Cost:
    x, dy = _tensor(op, "input"), _tensor(op, "grad_out")
    base = memory_op(op, NORM_BACKWARD_FLOPS_PER_ELEMENT, kind="rms_norm_backward")
    if x is None or dy is None:
        return base
    _, n = _rows_and_width(x, op.args.get("normalized_shape"))
    dx, dgamma = _output_mask(op, 2)
    weight = _tensor(op, "weight")
    base = _with_gamma_beta_reads(dataclasses.replace(base, key=_row_key(x, n)), dy, x, dx, dgamma)
    kernels = layer_norm_backward_kernels(dy, x, n, weight, (dx, dgamma, False), ctx)
    return _with_copies(base, kernels, contiguous_copies(dy, x, weight))


def group_norm_forward_kernels(hxw: int, affine: bool) -> int:
    """GroupNormKernelImplInternal: the moments kernel, then ComputeFusedParams + the normalising
    TensorIterator kernel with gamma or beta (HxW > 1), or the TensorIterator kernel alone."""
    fused_params = 1 if (affine and hxw > 1) else 0
    return GROUP_NORM_MOMENTS_KERNELS + fused_params + 1


def group_norm_backward_kernels(hxw: int, has_gamma: bool, grads: tuple[bool, bool, bool]) -> int:
    """GroupNormBackwardKernelImplInternal (dY defined): HxW > 1: ComputeInternalGradients; for dX the
    rstd * gamma TensorIterator kernel (with gamma), ComputeBackwardFusedParams and the dX TensorIterator kernel;
    one GammaBetaBackward kernel for dgamma/dbeta. HxW == 1 (GroupNorm1dBackward): Compute1dBackwardFusedParams
    and the dX kernel, then one GammaBeta1dBackward kernel."""
    dx, gamma_beta = grads[0], grads[1] or grads[2]
    if hxw == 1:
        return 2 * dx + gamma_beta
    return 1 + dx * (2 + has_gamma) + gamma_beta


def group_key(op: OpRecord, base: Cost) -> tuple:
    """(elements per group, item size): the row a group norm's moments kernel reduces, one block per group
    (RowwiseMomentsCUDAKernel over N x G rows of C / G x HxW), in place of the innermost dim: a few long groups
    leave most SMs idle (16 x 8 groups of 524288 fp32 ran 0.64 ms on the H200, where a GroupNorm of the same
    bytes over 32 x 32 groups of 8192 ran 30 us; validation/h200_shape_kinds_grid_raw.json.gz)."""
    x, groups, channels, hxw = _tensor(op, "input"), op.args.get("group"), op.args.get("C"), op.args.get("HxW")
    if x is None or not all(isinstance(v, int) and v > 0 for v in (groups, channels, hxw)):
        return base.key
    return (channels // groups * hxw, x.itemsize)


@register("aten.native_group_norm")
def native_group_norm(op: OpRecord, ctx: CostContext) -> Cost:
    # a kind of its own: group norm reduces over C/G x H x W per group, not along rows as layer norm does
    base = memory_op(op, NORM_FLOPS_PER_ELEMENT, kind="group_norm")
    base = dataclasses.replace(base, key=group_key(op, base))
    hxw = op.args.get("HxW")
    if not isinstance(hxw, int):
        return base
    affine = _tensor(op, "weight") is not None or _tensor(op, "bias") is not None
    # the moments kernel reads the input, then the normalising kernel reads it again
    x = _tensor(op, "input")
    return dataclasses.replace(base, kernels=group_norm_forward_kernels(hxw, affine),
                               bytes_read=base.bytes_read + (x.nbytes if x is not None else 0))


@register("aten.native_group_norm_backward")
def native_group_norm_backward(op: OpRecord, ctx: CostContext) -> Cost:
    base = memory_op(op, NORM_BACKWARD_FLOPS_PER_ELEMENT, kind="group_norm_backward")
    base = dataclasses.replace(base, key=group_key(op, base))
    hxw = op.args.get("HxW")
    if not isinstance(hxw, int):
        return base
    kernels = group_norm_backward_kernels(hxw, _tensor(op, "weight") is not None, _output_mask(op, 3))
    return dataclasses.replace(base, kernels=kernels)


# Weight normalization's fused kernels (aten/src/ATen/native/cuda/WeightNorm.cu, torch 2.11), one each way; the
# composite torch._weight_norm calls them for a norm over the first or the last dim. Over the first dim
# (weight_norm_{fwd,bwd}_first_dim_kernel): a block of 256 threads per row, v.size(0) blocks, each walking its
# row. Over the last dim (*_last_dim_kernel): blocks of TILE_W x TILE_H = 16 x 64 threads, one per 16 columns,
# each walking every row. Their time follows the elements a block walks and how many blocks run at once
# (calibrate/norm_blocks.py fits it from calibrate's weight_norm_grid), not the bytes: on the H200 a (36864, 128)
# fp32 forward over the last dim (8 blocks) took 335 us for 38 MB.
WEIGHT_NORM_TILE_COLUMNS = 16
WEIGHT_NORM_FLOPS_PER_ELEMENT = 4.0  # square and sum; scale by g / norm
WEIGHT_NORM_BACKWARD_FLOPS_PER_ELEMENT = 6.0


def weight_norm_blocks(v: TensorMeta, dim: int) -> tuple[str, int, int]:
    """("rows" or "columns", thread blocks, elements each block walks) of the fused weight-norm kernels for v
    normed over every dim but `dim` (0: a block per row of v.size(0); the last: a block per 16 columns)."""
    numel = max(math.prod(v.shape), 1)
    if len(v.shape) > 1 and dim in (len(v.shape) - 1, -1):
        columns = v.shape[-1]
        blocks = max(math.ceil(columns / WEIGHT_NORM_TILE_COLUMNS), 1)
        return "columns", blocks, numel // max(columns, 1) * min(columns, WEIGHT_NORM_TILE_COLUMNS)
    rows = v.shape[0] if v.shape else 1
    return "rows", max(rows, 1), numel // max(rows, 1)


def _weight_norm(op: OpRecord, v: TensorMeta, backward: bool) -> Cost:
    dim = op.args.get("dim", 0)
    layout, blocks, per_block = weight_norm_blocks(v, dim if isinstance(dim, int) else 0)
    kind = f"weight_norm_{layout}" + ("_backward" if backward else "")
    base = memory_op(op, WEIGHT_NORM_BACKWARD_FLOPS_PER_ELEMENT if backward else WEIGHT_NORM_FLOPS_PER_ELEMENT,
                     kind=kind)
    return dataclasses.replace(base, key=blocks_key(blocks, 1, per_block, v.itemsize))


@register("aten._weight_norm_interface")
def weight_norm_interface(op: OpRecord, ctx: CostContext) -> Cost:
    return _weight_norm(op, _tensor(op, "v") or op.tensors_in()[0], backward=False)


@register("aten._weight_norm_interface_backward")
def weight_norm_interface_backward(op: OpRecord, ctx: CostContext) -> Cost:
    return _weight_norm(op, _tensor(op, "saved_v") or op.tensors_in()[1], backward=True)
