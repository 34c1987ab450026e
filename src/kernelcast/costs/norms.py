"""Layer norm, RMS norm and group norm: the kernels their CUDA host code launches, by shape, dtype and alignment.

Ops costed here (their launch rules win over any simpler formula elsewhere):
    aten.native_layer_norm, aten.native_layer_norm_backward, aten._fused_rms_norm,
    aten._fused_rms_norm_backward, aten.native_group_norm, aten.native_group_norm_backward

Each rule restates the host code of aten/src/ATen/native/cuda/layer_norm_kernel.cu or group_norm_kernel.cu
(torch 2.11); tests/costs/test_launch_rules.py checks them against the H200's counts.

Pointer alignment: PyTorch's CUDA caching allocator hands out blocks whose sizes are rounded up to 512 bytes
(c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize), so every allocation starts 512-byte aligned; a tensor's
data pointer is then aligned as its storage offset (TensorMeta.offset, elements) times its item size is.
"""

from __future__ import annotations

import dataclasses
import math

from kernelcast.records import OpRecord, TensorMeta

from .common import (arg, blocks_key, channels_last_kind, contiguous_copies, memory_op, row_major,
                     strided)
from .conv_layout import channels_last_contiguous
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


# -- batch norm ----------------------------------------------------------------------------------------------
# Native batch norm (measured, validation/op_sweep.json): training = statistics, running-stat update, normalise
# (3 kernels); eval = three kernels either layout. Backward: contiguous NCHW one fused kernel; channels_last a
# reduce and an elementwise kernel. The channels_last statistics and backward reduce add a memset of their
# semaphores where they split the reduction across thread blocks (batch_norm_channels_last_split).
BATCH_NORM_TRAIN_KERNELS = 3
BATCH_NORM_EVAL_KERNELS = 3
BATCH_NORM_BACKWARD_KERNELS = {True: 2, False: 1}  # keyed by the channels_last kernels
SEMAPHORE_MEMSETS = 1
# aten/src/ATen/native/cuda/Normalization.cuh, flexible_launch_configs (CUDA build): the channels_last kernels'
# blocks tile (reduction, channels) with at most 32 channels across, 512 threads, 16 elements per thread, at
# most 128 blocks along the reduction, and only split it across blocks (grid.y > 1, with staging buffers and
# zeroed semaphores) from 8 blocks on.
BN_TILE_CHANNELS = 32
BN_MAX_BLOCK_THREADS = 512
BN_ELEMENTS_PER_THREAD = 16
BN_MAX_REDUCTION_BLOCKS = 128
BN_MIN_SPLIT_BLOCKS = 8


@register("aten._native_batch_norm_legit_no_training")
def batch_norm_eval(op: OpRecord, ctx: CostContext) -> Cost:
    """Inference batch norm: a per-channel scale and shift (one elementwise kernel), not training's reductions."""
    return memory_op(op, NORM_FLOPS_PER_ELEMENT, kind=channels_last_kind("batch_norm_eval", arg(op, "input")))


# cuDNN's batch norm (the path F.batch_norm takes on CUDA for most inputs) is timed apart from ATen's native
# kernels, and NHWC apart from NCHW: different kernels (calibrate extras2 measures them through F.batch_norm).
# In training on a contiguous NC(D)HW input, cuDNN runs one block per channel over its N x spatial values
# (bn_fw_tr_1C11_kernel_NCHW / _singleread, and the backward's bn_bw_1C11 kernels): 16 channels of 33 M values
# take 14.9 ms on the H200 at 0.44 ns per value on 16 SMs (validation/h200_channel_grid_raw.json.gz), so they are
# keyed by their blocks (calibrate/norm_blocks.py), as ATen's own kernels are; inference and NHWC stay on the
# byte curves.
# A channel whose N x spatial values fit on chip is read once (bn_fw_tr_1C11_singleread); a larger one twice, once
# for its statistics and once to normalize it (bn_fw_tr_1C11_kernel_NCHW). On the H200 (validation/
# h200_channel_grid_raw.json.gz) the single-read kernel ran for slices up to 128 KiB (fp16, 16 x 64 x 64) and the
# two-read one from 256 KiB (fp32, the same shape): the register file an SM gives the block is 256 KiB.
CUDNN_BN_SINGLE_READ_MAX_BYTES = 128 * 1024


def cudnn_batch_norm_reads(x: TensorMeta) -> int:
    """How many times cuDNN's NCHW batch norm in training reads its input: 1 or 2 (above)."""
    channels = x.shape[1] if len(x.shape) > 1 else 1
    return 1 if x.nbytes // max(channels, 1) <= CUDNN_BN_SINGLE_READ_MAX_BYTES else 2


@register("aten.cudnn_batch_norm")
def cudnn_batch_norm(op: OpRecord, ctx: CostContext) -> Cost:
    """Its bytes count the input as often as the kernel reads it: a two-read batch norm streams 3 passes, which
    is what bounds it on a GPU of little bandwidth (KernelBench L1 #33, 64 channels of 1 M fp32 values: 3.52 ms on
    an L4, 300 GB/s, where two passes would take 1.8 ms)."""
    x = arg(op, "input")
    cost = memory_op(op, NORM_FLOPS_PER_ELEMENT, kind=channels_last_kind("cudnn_batch_norm", x))
    if not op.args.get("training", True):
        return cost
    if row_major(x) and len(x.shape) >= 3:
        cost = dataclasses.replace(cost, bytes_read=cost.bytes_read + (cudnn_batch_norm_reads(x) - 1) * x.nbytes)
    return _channel_blocks(cost, x, not row_major(x))


@register("aten.cudnn_batch_norm_backward")
def cudnn_batch_norm_backward(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "input")
    cost = memory_op(op, NORM_BACKWARD_FLOPS_PER_ELEMENT, kind=channels_last_kind("cudnn_batch_norm_backward", x))
    return _channel_blocks(cost, x, not row_major(x))


def _last_pow2(n: int) -> int:
    """2 ** floor(log2(n)), at least 1 (Normalization.cuh, lastPow2)."""
    return 1 << (max(n, 1).bit_length() - 1)


def batch_norm_channels_last_split(reduction: int, channels: int) -> bool:
    """Whether the channels_last batch-norm kernels split each channel's reduction (N x H x W elements) across
    thread blocks: flexible_launch_configs with coop_flag (Normalization.cuh), grid.y > 1. Measured on the H200
    (zoo resnet_train_channels_last, batch 32): a semaphore memset beside every channels_last batch norm and
    its backward down to 14 x 14 (grid.y 25), none at 7 x 7 (grid.y 7, below the 8 it takes)."""
    block_x = min(_last_pow2(channels), BN_TILE_CHANNELS)
    block_y = min(_last_pow2(-(-reduction // BN_ELEMENTS_PER_THREAD)), BN_MAX_BLOCK_THREADS // block_x)
    grid_y = min(-(-reduction // (block_y * BN_ELEMENTS_PER_THREAD)), BN_MAX_REDUCTION_BLOCKS)
    return grid_y >= BN_MIN_SPLIT_BLOCKS


def batch_norm_channels_last_kernels(x: TensorMeta) -> bool:
    """Whether native batch norm runs its channels_last kernels: batch_norm_choose_impl
    (aten/src/ATen/native/cuda/Normalization.cu) takes them for a channels_last-contiguous input and for a
    contiguous one whose channel stride is 1, such as BatchNorm1d's (N, C)."""
    if len(x.shape) < 2:
        return False
    return channels_last_contiguous(x) or (row_major(x) and x.stride[1] == 1 and x.shape[1] > 1)


def _batch_norm_memsets(x: TensorMeta) -> int:
    channels = x.shape[1]
    return SEMAPHORE_MEMSETS * batch_norm_channels_last_split(x.numel // max(channels, 1), channels)


def _batch_norm_kind(kind: str, nhwc: bool) -> str:
    """channels_last and NCHW batch norm are different kernels (measured 3-7x apart backward)."""
    return f"{kind}_channels_last" if nhwc else kind


@register("aten.native_batch_norm", "aten._native_batch_norm_legit", "aten._native_batch_norm_legit_functional",
          "aten._batch_norm_with_update")
def native_batch_norm(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "input")
    training = bool(op.args.get("training", True))
    nhwc = batch_norm_channels_last_kernels(x)
    kernels = BATCH_NORM_TRAIN_KERNELS + (_batch_norm_memsets(x) if nhwc else 0) if training else \
        BATCH_NORM_EVAL_KERNELS
    # eval: one scale-and-shift pass with the running statistics, a different kernel from training's reductions
    cost = memory_op(op, NORM_FLOPS_PER_ELEMENT, kernels, _batch_norm_kind("batch_norm" if training else
                                                                           "batch_norm_eval", nhwc))
    if training and not nhwc and len(x.shape) >= 3:
        # NCHW: batch_norm_collect_statistics_kernel reads the input, batch_norm_transform_input_kernel reads it
        # again (aten/src/ATen/native/cuda/Normalization.cuh)
        cost = dataclasses.replace(cost, bytes_read=cost.bytes_read + x.nbytes)
    return _channel_blocks(cost, x, nhwc) if training else cost


@register("aten.native_batch_norm_backward", "aten.batch_norm_backward")
def native_batch_norm_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """NCHW: one kernel, a thread block per channel; channels_last: a reduce (after its semaphore memset where
    it splits, batch_norm_channels_last_split) and an elementwise kernel."""
    x = arg(op, "input")
    nhwc = batch_norm_channels_last_kernels(x)
    kernels = BATCH_NORM_BACKWARD_KERNELS[nhwc] + (_batch_norm_memsets(x) if nhwc else 0)
    return _channel_blocks(memory_op(op, NORM_BACKWARD_FLOPS_PER_ELEMENT, kernels,
                                     _batch_norm_kind("batch_norm_backward", nhwc)), x, nhwc)


def _channel_blocks(cost: Cost, x: TensorMeta, nhwc: bool) -> Cost:
    """An NCHW batch norm in training runs a thread block per channel (calibrate/norm_blocks.py): keyed
    blocks_key(C, N, H*W, item size) for the calibrated model's block fit. channels_last: other kernels."""
    if nhwc or len(x.shape) < 3:
        return cost
    return dataclasses.replace(cost, key=blocks_key(x.shape[1], x.shape[0], math.prod(x.shape[2:]), x.itemsize))
