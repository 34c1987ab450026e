"""Matrix products and convolutions: tensor-core math.

FLOP counts follow torch.utils.flop_counter (2 FLOPs per multiply-add; a bias add is not counted), and tests
check them against it.
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord, TensorMeta

from .common import arg, bytes_read, bytes_written, contiguous_copy, dense, is_blocks_key, row_major, width_key
from .conv_backend import CUDNN, NATIVE_DEPTHWISE, conv_backend
from .conv_layout import ConvOperands, backward_operands, cudnn_nhwc, forward_operands
from .reduce_config import REDUCE_SEMAPHORE_MEMSETS, is_global_reduce, reduces_fastest_dim
from .registry import Cost, CostContext, register
from .tensor_iterator import index32_parts


def mm_flops(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> float:
    """(M, K) @ (K, N): 2 * M * N * K."""
    m, k = a_shape
    k2, n = b_shape
    assert k == k2, f"mm inner dims differ: {a_shape} @ {b_shape}"
    return 2.0 * m * n * k


def bmm_flops(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> float:
    """(B, M, K) @ (B, K, N): 2 * B * M * N * K."""
    b, m, k = a_shape
    b2, k2, n = b_shape
    assert b == b2 and k == k2, f"bmm shapes differ: {a_shape} @ {b_shape}"
    return 2.0 * b * m * n * k


def _matmul_cost(op: OpRecord, flops: float, dtype: str, kernels: int = 1, math_kind: str = "matmul",
                 kind: str = "gemm", key: tuple = ()) -> Cost:
    return Cost(flops=flops, bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=kernels,
                math=math_kind, dtype=dtype, kind=kind, key=key)


def _column_major(t: TensorMeta) -> bool:
    return len(t.shape) == 2 and t.stride[0] == 1 and t.shape[1] > 1 and t.stride[1] >= t.shape[0]


def gemm_key(a: TensorMeta, b: TensorMeta, bias: bool, batch: int = 1) -> tuple:
    """(dtype, a transposed, b transposed, bias, M, N, K): how launch and time tables look a GEMM up. A batched
    product counts as one GEMM with the batch folded into M."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    last2 = lambda t: TensorMeta(t.shape[-2:], t.dtype, t.stride[-2:], t.device)  # noqa: E731
    return (a.dtype, _column_major(last2(a)), _column_major(last2(b)), bias, batch * m, n, k)


def gemm_kernels(ctx: CostContext, key: tuple) -> int:
    """Work items of one cuBLAS GEMM: measured per shape where a profile has them, else one kernel."""
    if ctx.launches is None:
        return 1
    items = ctx.launches.gemm_items(*key)
    return items if items is not None else 1


# -- what cuBLAS is handed (aten/src/ATen/native/cuda/Blas.cpp) ------------------------------------------------
# cuBLAS reads each matrix in row- or column-major order with a leading dimension; an operand in neither gets a
# contiguous clone inside the op's CUDA code, and a complex operand whose conjugate bit is set is conjugated into a
# copy (resolve_conj, at::native's conj kernel) unless cuBLAS can take it as a conjugate transpose ('c'). Measured
# on the H200 (zoo fft_layers_train, torch 2.11): the spectral layers' complex einsum ran its bmm with a clone of
# the permuted operand forward, and backward a clone plus a conjugating copy per bmm: 7 kernels a layer, not 3.


def _conj_copy(t: TensorMeta) -> Cost:
    """resolve_conj(): one elementwise kernel reading and writing the operand."""
    return Cost(bytes_read=t.touched_bytes, bytes_written=t.nbytes, kernels=1, dtype=t.dtype, kind="copy",
                key=width_key(t))


def matrix_operand_copies(t: TensorMeta, transpose_result: bool) -> tuple[Cost, ...]:
    """Copies mm/addmm make of one 2-D operand before cuBLAS (prepare_matrix_for_cublas): none for a dense one
    but a conjugating copy where it is conjugated and read untransposed; none for a row- or column-major one with
    a leading dimension; else a contiguous clone."""
    if dense(t):
        transpose = row_major(t)
        resolve = transpose if transpose_result else not transpose
        return (_conj_copy(t),) if t.conj and resolve else ()
    (s0, s1), (n0, n1) = t.stride, t.shape
    if s0 == 1 and s1 >= max(1, n0):
        return (_conj_copy(t),) if t.conj and not transpose_result else ()
    if s1 == 1 and s0 >= max(1, n1):
        return (_conj_copy(t),) if t.conj and transpose_result else ()
    return (contiguous_copy(t),)


def batch_operand_copies(t: TensorMeta, transpose_result: bool, m: int, n: int) -> tuple[Cost, ...]:
    """Copies bmm/baddbmm make of one 3-D operand before cuBLAS (prepare_batch_matrix_for_cublas, m and n as it
    is called with): none for one whose fast dim is unit-stride with a leading dimension of at least m (a
    conjugating copy if it is conjugated), none for the transposed layout with one of at least n; else none for
    a contiguous one (conjugated: a conjugating copy where the result is transposed), a contiguous clone
    otherwise."""
    fast, lead = (2, 1) if transpose_result else (1, 2)
    if t.stride[fast] == 1 and t.stride[lead] >= max(1, m):
        return (_conj_copy(t),) if t.conj else ()
    if t.stride[lead] == 1 and t.stride[fast] >= max(1, n):
        return ()
    if row_major(t) and t.stride[1] != 0 and t.stride[2] != 0:
        return (_conj_copy(t),) if t.conj and transpose_result else ()
    return (contiguous_copy(t),)


def bmm_operand_copies(a: TensorMeta, b: TensorMeta) -> tuple[Cost, ...]:
    """The copies of (B, M, K) @ (B, K, N) into a new row-major result (baddbmm_out_cuda_impl): the result reads
    as transposed unless N is 1, and cuBLAS then takes b as its first matrix."""
    m, k, n = a.shape[1], a.shape[2], b.shape[2]
    if n == 1:
        return (*batch_operand_copies(a, False, m, k), *batch_operand_copies(b, False, k, n))
    return (*batch_operand_copies(b, True, n, k), *batch_operand_copies(a, True, k, m))


def mm_operand_copies(a: TensorMeta, b: TensorMeta) -> tuple[Cost, ...]:
    """The copies of (M, K) @ (K, N) into a new row-major result (addmm_out_cuda_impl: the result is read
    transposed)."""
    if a.shape[0] == 0 or b.shape[-1] == 0 or len(a.shape) != 2 or len(b.shape) != 2:
        return ()
    return (*matrix_operand_copies(b, True), *matrix_operand_copies(a, True))


@register("aten.mm")
def mm(op: OpRecord, ctx: CostContext) -> Cost:
    a, b = arg(op, "self"), arg(op, "mat2")
    key = gemm_key(a, b, bias=False)
    cost = _matmul_cost(op, mm_flops(a.shape, b.shape), a.dtype, gemm_kernels(ctx, key), key=key)
    return cost.with_parts(*mm_operand_copies(a, b))


@register("aten.addmm")
def addmm(op: OpRecord, ctx: CostContext) -> Cost:
    a, b = arg(op, "mat1"), arg(op, "mat2")
    key = gemm_key(a, b, bias=True)
    cost = _matmul_cost(op, mm_flops(a.shape, b.shape), a.dtype, gemm_kernels(ctx, key), key=key)
    return cost.with_parts(*mm_operand_copies(a, b))


@register("aten._addmm_activation")
def addmm_activation(op: OpRecord, ctx: CostContext) -> Cost:
    """addmm with relu or gelu applied in the GEMM's epilogue: cuBLASLt's gemm_and_bias with an activation
    epilogue (addmm_out_cuda_impl's Lt path), one kernel as addmm's; nn.TransformerEncoderLayer's fused inference
    path runs its first feed-forward GEMM so (transformer.cpp linear_for_ffn)."""
    return addmm(op, ctx)


@register("aten.bmm")
def bmm(op: OpRecord, ctx: CostContext) -> Cost:
    a, b = arg(op, "self"), arg(op, "mat2")
    cost = _matmul_cost(op, bmm_flops(a.shape, b.shape), a.dtype, key=gemm_key(a, b, False, a.shape[0]))
    return cost.with_parts(*bmm_operand_copies(a, b))


@register("aten.baddbmm")
def baddbmm(op: OpRecord, ctx: CostContext) -> Cost:
    a, b = arg(op, "batch1"), arg(op, "batch2")
    cost = _matmul_cost(op, bmm_flops(a.shape, b.shape), a.dtype, key=gemm_key(a, b, True, a.shape[0]))
    return cost.with_parts(*bmm_operand_copies(a, b))


@register("aten._scaled_mm")
def scaled_mm(op: OpRecord, ctx: CostContext) -> Cost:
    """fp8 matmul with scales (cuBLASLt)."""
    a, b = arg(op, "self"), arg(op, "mat2")
    return _matmul_cost(op, mm_flops(a.shape, b.shape), a.dtype, key=gemm_key(a, b, op.args.get("bias") is not None))


def conv_flops(x_shape, w_shape, out_shape, transposed: bool) -> float:
    """2 * batch * C_out * (C_in / groups) * prod(kernel) * prod(spatial positions computed).

    The weight's second dim is already C_in / groups. A transposed conv computes at its input's positions.
    """
    batch = x_shape[0]
    positions = math.prod((x_shape if transposed else out_shape)[2:])
    c_out, c_in_per_group, *kernel = w_shape
    return 2.0 * batch * c_out * c_in_per_group * math.prod(kernel) * positions


def conv_backward_flops(grad_out_shape, x_shape, w_shape, grad_in_shape, transposed: bool, output_mask) -> float:
    """Each requested gradient (input, weight) is a convolution with the forward's multiply-adds (so 2x the
    forward for both); the bias gradient is a reduction and counted as no FLOPs, as flop_counter does.

    The input gradient is the forward's transposed conv. The weight gradient of a grouped conv: group g's
    weight (C_out/G, C_in/G, *k) sums grad_out[g] x input[g] over the batch and the output positions, i.e.
    2 * N * (C_out/G) * (C_in/G) * prod(k) * positions per group, G groups: 2 * N * C_out * (C_in/G) *
    prod(k) * positions, the forward's count. torch.utils.flop_counter (conv_backward_flop) instead counts
    it as an ungrouped conv of the (C_in, N, H, W) input with the (C_out, N, Ho, Wo) gradient:
    2 * C_in * C_out * N * prod(k) * positions, G times too many. For x (100, 2048, 14, 14), w
    (2048, 64, 3, 3), stride 2, pad 1, G = 32: forward 2 * 100 * 2048 * 64 * 9 * 49 = 11.56 GFLOP, and
    flop_counter's weight gradient 32 * 11.56 = 369.9 GFLOP where 11.56 is right.
    """
    forward = conv_flops(x_shape, w_shape, grad_out_shape, transposed)
    flops = 0.0
    if output_mask[0]:
        flops += conv_flops(grad_out_shape, w_shape, grad_in_shape, not transposed)
    if output_mask[1]:
        flops += forward
    return flops


CONV_PASSES = ("conv_fwd", "conv_bwd_input", "conv_bwd_weight", "conv_bwd")  # conv_bwd: both gradients


def kernel_family(cost: Cost) -> str:
    """The kernel family an op's main kernel belongs to: cost.math, except a convolution by the cuDNN kernels
    its pass runs (conv_key's pass and transposed flag): "conv" (forward kernels: a forward, or a transposed
    convolution's input gradient), "conv_dgrad" (data-gradient kernels: a transposed forward, or an input
    gradient), "conv_wgrad" (weight gradient). Both gradients in one call (conv_bwd) stay "conv". A forward or
    data-gradient cuDNN kernel writing fewer than NARROW_CHANNELS channels per group takes NARROW_SUFFIX ("conv_narrow",
    "conv_dgrad_narrow"). A kernel of one block per slice (common.blocks_key) is "blocks" (devices/achieved.py
    BLOCKS)."""
    key = cost.key
    if is_blocks_key(key):
        return "blocks"
    if cost.math != "conv" or len(key) < CONV_KEY_FIELDS or key[0] not in CONV_PASSES:
        return cost.math
    pass_, transposed = key[0], bool(key[11])
    if pass_ == "conv_bwd_weight":
        return "conv_wgrad"
    family = "conv_dgrad" if (pass_ == "conv_fwd") == transposed and pass_ != "conv_bwd" else "conv"
    narrow = pass_ != "conv_bwd" and conv_backend(key) == CUDNN and written_channels(key) < NARROW_CHANNELS
    return family + NARROW_SUFFIX if narrow else family


# A convolution kernel whose output has fewer channels per group than this is its own rate class ("_narrow"):
# the channels it writes are its implicit GEMM's N, and an N narrower than a library's smallest tile leaves
# tensor-core lanes idle in a share that differs by architecture. On KernelBench level 2's 3-D transposed
# convolutions (stride 2, one shape family), the A100s ran those of 16 output channels 3.5-5.2x the H200's time
# and those of 32 or 64 1.8-2.4x, where the H100 ran both near 1.0x (scripts/fit/fit_gpu_rates.py; 16 and 32 are the
# only widths there, so the threshold is the gap between them). Whether the narrow class's factor differs from its
# family's is fitted per GPU; one with too few programs folds into its family (devices/achieved.py). cuDNN's
# kernels only: PyTorch's native depthwise kernels are no implicit GEMM.
NARROW_CHANNELS = 32
NARROW_SUFFIX = "_narrow"


def written_channels(key: tuple) -> float:
    """The channels per group a convolution kernel writes, from conv_key: the output's (C_out) for a forward pass,
    the input gradient's (C_in) for a backward pass; a transposed convolution's forward writes its C_out too."""
    channels = key[4] if key[0] == "conv_fwd" else key[3]
    return channels / max(int(key[8]), 1)


# conv_key's fields: the first 12 say which kernels run (launch tables, backend, kernel family); the last three
# (padding, dilation, output padding) where their windows fall, which the time model needs: without them,
# KernelBench's transposed 3-D convolutions of one key ran 1.0, 1.8 and 4.3 ms on the H200 (level 1 #77 dilated,
# #73 padded by 3, level 2 #20), and one measured row priced them all.
CONV_KEY_FIELDS = 15


def conv_key(x: TensorMeta, w: TensorMeta, op: OpRecord, pass_: str) -> tuple:
    """How launch and time tables look a convolution up: (pass, dtype, channels_last, C_in, C_out, kernel,
    stride, spatial size, groups, batch, spatial dims, transposed, padding, dilation, output padding). 1-, 2- and
    3-D convolutions; () otherwise. Padding, dilation and output padding are each the mean over the spatial dims,
    rounded (they can be 0).
    A convolution whose sizes differ between spatial dims (a 16 x 64 x 64 video clip, a 3 x 5 x 7 kernel) is
    keyed by each one's geometric mean (spatial_mean), so that size ** dims and kernel ** dims stay its
    positions and taps: the implicit GEMM the tables compare (predict/calibrated.py _conv_point). channels_last
    is the layout cuDNN runs in (costs/conv_layout.py: channels_last when the input or the weight is strided
    like it). A backward that computes both gradients runs cuDNN's input- and weight-gradient kernels one after
    the other (aten/src/ATen/native/cudnn/ConvShared.cpp, cudnn_convolution_backward), so it is looked up as the
    two."""
    dims = len(x.shape) - 2
    if dims not in (1, 2, 3):
        return ()
    transposed = bool(op.args.get("transposed", False))
    stride = tuple(op.args.get("stride") or (1,))
    groups = int(op.args.get("groups", 1) or 1)
    c_out = w.shape[1] * groups if transposed else w.shape[0]
    nhwc = dims >= 2 and cudnn_nhwc(x, w)
    return (pass_, x.dtype, nhwc, x.shape[1], c_out, spatial_mean(w.shape[2:]), spatial_mean(stride),
            spatial_mean(x.shape[2:]), groups, x.shape[0], dims, transposed, _dims_mean(op.args.get("padding"), 0),
            _dims_mean(op.args.get("dilation"), 1), _dims_mean(op.args.get("output_padding"), 0))


def _dims_mean(values, default: int) -> int:
    """The arithmetic mean of a per-dim int argument (padding: (1, 2, 2) -> 2), rounded; `default` if absent or not
    a list of ints (a "same" / "valid" string padding has been resolved to ints by aten.convolution)."""
    if isinstance(values, int):
        return values
    if not values or not all(isinstance(v, int) for v in values):
        return default
    return round(sum(values) / len(values))


def spatial_mean(sizes) -> int:
    """The geometric mean of a convolution's per-dim sizes, rounded (at least 1): (16, 64, 64) -> 40."""
    sizes = [max(int(s), 1) for s in sizes] or [1]
    return max(1, round(math.prod(sizes) ** (1.0 / len(sizes))))


def layout_copies(operands: ConvOperands) -> tuple[Cost, ...]:
    """The copy kernels of the operands PyTorch made contiguous for the backend (costs/conv_layout.py)."""
    return tuple(contiguous_copy(t) for t in operands.copies)


def conv_backward_pass(mask) -> str | None:
    want_input, want_weight = bool(mask[0]), bool(mask[1])
    if want_input and want_weight:
        return "conv_bwd"
    return "conv_bwd_input" if want_input else ("conv_bwd_weight" if want_weight else None)


def conv_kernels(ctx: CostContext, key: tuple) -> int | None:
    """Work items of one cuDNN convolution pass from the profile's nearest measured conv."""
    if ctx.launches is None or not key:
        return None
    if key[0] == "conv_bwd":
        parts = [ctx.launches.conv_items(("conv_bwd_input", *key[1:])),
                 ctx.launches.conv_items(("conv_bwd_weight", *key[1:]))]
        return None if None in parts else sum(parts)
    return ctx.launches.conv_items(key)


@register("aten.convolution", "aten.cudnn_convolution", "aten._convolution")
def convolution(op: OpRecord, ctx: CostContext) -> Cost:
    x, w = arg(op, "input") if "input" in op.args else arg(op, "self"), arg(op, "weight")
    out = op.tensors_out()[0]
    transposed = bool(op.args.get("transposed", False))
    # cuDNN leaves the bias to a separate add_ kernel; PyTorch's depthwise kernel adds it itself (conv_backend).
    key = conv_key(x, w, op, "conv_fwd")
    backend = conv_backend(key) if key else CUDNN
    bias = op.args.get("bias")
    separate_bias = isinstance(bias, TensorMeta) and backend == CUDNN
    cost = _matmul_cost(op, conv_flops(x.shape, w.shape, out.shape, transposed), x.dtype, conv_kernels(ctx, key) or 1,
                        "conv", "conv", key)
    bias_parts = (conv_bias_add(out, bias),) if separate_bias else ()
    if not key:
        return cost.with_parts(*bias_parts)
    return cost.with_parts(*layout_copies(forward_operands(x, w, backend == NATIVE_DEPTHWISE)), *bias_parts)


# The bias of a cuDNN convolution is not in cuDNN's call: aten adds it after, in place over the whole output
# (aten/src/ATen/native/cudnn/ConvShared.cpp, `output.add_(reshape_bias(input.dim(), bias))`), a broadcast
# elementwise kernel; its gradient is a sum of grad_output over every dim but the channels (Convolution.cpp,
# convolution_backward). Neither is in the conv time tables, whose passes are timed without a bias. Measured on
# the H200 (KernelBench level 2 #19, 128 x 64 x 64 x 64 fp32 output): the add_ took 114 µs beside the
# transposed convolution's 174.


def conv_bias_add(out: TensorMeta, bias: TensorMeta) -> Cost:
    """The in-place add of a (C,) bias broadcast over a convolution's output (N, C, *spatial): reads the output and
    the bias, writes the output, one pointwise kernel on a broadcast input (kind pointwise_strided, as
    costs/common.py memory_key names an add whose input broadcasts), split where the output is too large for
    32-bit index math (costs/tensor_iterator.py)."""
    # no FLOPs: a bias add is not counted, as torch.utils.flop_counter counts none (module docstring)
    return Cost(bytes_read=float(out.nbytes + bias.nbytes), bytes_written=float(out.nbytes),
                kernels=index32_parts([out]), dtype=out.dtype, kind="pointwise_strided", key=width_key(out),
                reads_just_written=float(out.nbytes))


def conv_bias_grad(grad_out: TensorMeta, ctx: CostContext) -> Cost:
    """A convolution's bias gradient: grad_output (N, C, *spatial) summed to (C,), one reduce kernel and a memset
    where the sum splits outputs across blocks (bias_grad_items); kind by whether the fastest dim is reduced, as
    costs/elementwise.py prices a sum over the same dims."""
    channels = grad_out.shape[1] if len(grad_out.shape) > 1 else 1
    dims = {d for d in range(len(grad_out.shape)) if d != 1}
    fastest = reduces_fastest_dim(grad_out.shape, grad_out.stride, dims)
    kind, key = ("reduction", width_key(grad_out)) if fastest else ("reduction_outer", (channels, grad_out.itemsize))
    return Cost(bytes_read=float(grad_out.nbytes),
                bytes_written=float(channels * grad_out.itemsize),
                kernels=bias_grad_items(grad_out, ctx) * index32_parts([grad_out]),
                dtype=grad_out.dtype, kind=kind, key=key)


def bias_grad_items(grad_out: TensorMeta, ctx: CostContext) -> int:
    """Work items of a convolution's bias gradient: convolution_backward sums grad_output over every dim but the
    channels (aten/src/ATen/native/Convolution.cpp), one reduce kernel, and a semaphore memset where that sum
    splits its outputs across thread blocks (costs/reduce_config.py). Seen on the H200 (zoo convnext_train):
    memset + reduce_kernel for the depthwise 7x7's bias, one reduce_kernel for the 1x1's."""
    dims = {d for d in range(len(grad_out.shape)) if d != 1}
    channels = grad_out.shape[1] if len(grad_out.shape) > 1 else 1
    per_channel = grad_out.numel // max(channels, 1)
    fastest = reduces_fastest_dim(grad_out.shape, grad_out.stride, dims)
    return 1 + REDUCE_SEMAPHORE_MEMSETS * is_global_reduce(channels, per_channel, fastest, ctx.sm_count,
                                                           ctx.max_threads_per_sm)


@register("aten.convolution_backward")
def convolution_backward(op: OpRecord, ctx: CostContext) -> Cost:
    grad_out, x, w = arg(op, "grad_output"), arg(op, "input"), arg(op, "weight")
    mask = tuple(op.args.get("output_mask", (True, True, True)))
    grad_in = op.outputs[0]
    flops = conv_backward_flops(grad_out.shape, x.shape, w.shape, grad_in.shape if grad_in else x.shape,
                                bool(op.args.get("transposed", False)), mask)
    pass_ = conv_backward_pass(mask)
    key = conv_key(x, w, op, pass_) if pass_ else ()
    measured = conv_kernels(ctx, key)
    # the sweep measured input and weight gradients; a bias gradient is a reduction of its own (conv_bias_grad)
    kernels = measured if measured is not None else max(sum(1 for want in mask[:2] if want), 1)
    native = bool(key) and conv_backend(key) == NATIVE_DEPTHWISE
    bias_parts = (conv_bias_grad(grad_out, ctx),) if mask[2] and grad_out.numel else ()
    if not pass_ and bias_parts:  # the bias gradient alone: a reduction
        return bias_parts[0]
    cost = _matmul_cost(op, flops, x.dtype, kernels, "conv", "conv", key)
    if not key:
        return cost.with_parts(*bias_parts)
    return cost.with_parts(*layout_copies(backward_operands(grad_out, x, w, mask, native,
                                                                   bool(op.args.get("transposed", False)))),
                           *bias_parts)


# torch._grouped_mm (aten/src/ATen/native/cuda/GroupedBlas.cpp, _grouped_mm_cuda): bf16 operands and output on
# sm_90 / sm_100 take the CUTLASS path, a kernel that prepares the per-group problem table on the device, then
# the grouped GEMM (two work items; measured on the H200, torch 2.11, zoo mixtral_forward: 8 for 4 calls).
# Anything else takes _grouped_mm_fallback (GroupedMMUtils.h): 3D x 3D is one bmm; with offsets it copies them
# to the host (`offs.cpu()`, a sync: capture/recorder.py) and runs one mm per group.
GROUPED_MM_FAST_ITEMS = 2
GROUPED_MM_FAST_ARCH_MAJORS = (9, 10)
D2H_MEMCPY_ITEMS = 1
BMM_KERNELS = 1


def grouped_mm_fallback_items(offs) -> int:
    """One bmm for 3D x 3D; else the offsets' device-to-host copy and one mm per group."""
    if not isinstance(offs, TensorMeta):
        return BMM_KERNELS
    return D2H_MEMCPY_ITEMS + (offs.shape[0] if offs.shape else 1)


def grouped_mm_flops(a_shape, b_shape, out_shape) -> float:
    """2 * (every output element) * K, with K the contraction length each output element sums over.

    2D x 3D (rows grouped by offsets along M): out (M, N), K = a.shape[-1]. 3D x 3D (batched): out (G, M, N),
    K = a.shape[-1]. 3D x 2D (columns grouped along N): out (M, N), K = a.shape[-1]. 2D x 2D (groups split K,
    the weight gradient): out (G, M, N) and each group sums over its own slice of K, so all groups together
    sum over K once: 2*M*N*K.
    """
    if len(a_shape) == 2 and len(b_shape) == 2:
        m, k = a_shape
        return 2.0 * m * b_shape[-1] * k
    return 2.0 * math.prod(out_shape) * a_shape[-1]


@register("aten._grouped_mm")
def grouped_mm(op: OpRecord, ctx: CostContext) -> Cost:
    a, b = arg(op, "self"), arg(op, "mat2")
    out = op.tensors_out()[0]
    fast = (a.dtype == b.dtype == out.dtype == "bfloat16" and ctx.capability[0] in GROUPED_MM_FAST_ARCH_MAJORS)
    if fast:  # CUTLASS's grouped GEMM, priced by its own fit (calibrate/grouped_gemm.py)
        return _matmul_cost(op, grouped_mm_flops(a.shape, b.shape, out.shape), a.dtype, GROUPED_MM_FAST_ITEMS,
                            kind="grouped_gemm")
    return _matmul_cost(op, grouped_mm_flops(a.shape, b.shape, out.shape), a.dtype,
                        grouped_mm_fallback_items(op.args.get("offs")))


# Matrix-vector and vector products (aten/src/ATen/native/cuda/Blas.cpp): addmv copies `self` into the result
# first when beta != 0 (addmv_out_cuda), then one cuBLAS gemv; mv is addmv_ into a fresh result with beta 0,
# the gemv alone. dot / vdot: one cuBLAS dot writing its 0-d result on the device (CUBLAS_POINTER_MODE_DEVICE;
# ASSUMED one item). addr: one TensorIterator kernel, beta * self + alpha * outer(vec1, vec2) (addr_impl_cuda).
# addbmm: a copy of `self` into the result (beta != 0), then one addmm per batch, accumulating (addbmm_out_cuda).
GEMV_KERNELS = 1
CUBLAS_DOT_ITEMS = 1
COPY_KERNELS = 1
ADDR_FLOPS_PER_ELEMENT = 2.0  # a multiply and an add per output element (the scalings folded in)


def mv_flops(m: int, n: int) -> float:
    """(M, N) @ (N,): 2 * M * N."""
    return 2.0 * m * n


def _beta_copies(op: OpRecord) -> int:
    """The copy of `self` into the result: skipped by the in-place variants (the result is self) and when
    beta == 0 (the GEMM ignores the result's contents)."""
    beta = op.args.get("beta", 1)
    in_place = "inplace" in op.tags
    zero_beta = isinstance(beta, (int, float)) and beta == 0
    return COPY_KERNELS * (not in_place and not zero_beta)


@register("aten.mv")
def mv(op: OpRecord, ctx: CostContext) -> Cost:
    a = arg(op, "self")
    return _matmul_cost(op, mv_flops(*a.shape[-2:]), a.dtype, GEMV_KERNELS)


@register("aten.addmv", "aten.addmv_")
def addmv(op: OpRecord, ctx: CostContext) -> Cost:
    a = arg(op, "mat")
    return _matmul_cost(op, mv_flops(*a.shape[-2:]), a.dtype, _beta_copies(op) + GEMV_KERNELS)


@register("aten.dot", "aten.vdot")
def dot(op: OpRecord, ctx: CostContext) -> Cost:
    a = arg(op, "self")
    return _matmul_cost(op, 2.0 * a.numel, a.dtype, CUBLAS_DOT_ITEMS)


@register("aten.addr", "aten.addr_")
def addr(op: OpRecord, ctx: CostContext) -> Cost:
    out = op.tensors_out()[0] if op.tensors_out() else arg(op, "self")
    return Cost(flops=ADDR_FLOPS_PER_ELEMENT * out.numel, bytes_read=bytes_read(op), bytes_written=bytes_written(op),
                kernels=1, dtype=out.dtype, kind="pointwise")


@register("aten.addbmm", "aten.addbmm_")
def addbmm(op: OpRecord, ctx: CostContext) -> Cost:
    a, b = arg(op, "batch1"), arg(op, "batch2")
    batch = a.shape[0]
    return _matmul_cost(op, bmm_flops(a.shape, b.shape), a.dtype, _beta_copies(op) + batch,
                        key=gemm_key(a, b, True, batch))


@register("aten.addmm_")
def addmm_inplace(op: OpRecord, ctx: CostContext) -> Cost:
    return addmm(op, ctx)


@register("aten._scaled_mm_v2")
def scaled_mm_v2(op: OpRecord, ctx: CostContext) -> Cost:
    """The v2 signature of _scaled_mm (per-operand scale recipes): one cuBLASLt / CUTLASS GEMM."""
    return scaled_mm(op, ctx)
