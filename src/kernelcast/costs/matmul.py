"""Matrix products and convolutions: tensor-core math.

FLOP counts follow torch.utils.flop_counter (2 FLOPs per multiply-add; a bias add is not counted), and tests
check them against it.
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord

from .common import arg, bytes_read, bytes_written
from .registry import Cost, register


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


def _matmul_cost(op: OpRecord, flops: float, dtype: str, kernels: int = 1, math_kind: str = "matmul") -> Cost:
    return Cost(flops=flops, bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=kernels,
                math=math_kind, dtype=dtype)


@register("aten.mm")
def mm(op: OpRecord) -> Cost:
    a, b = arg(op, "self"), arg(op, "mat2")
    return _matmul_cost(op, mm_flops(a.shape, b.shape), a.dtype)


@register("aten.addmm")
def addmm(op: OpRecord) -> Cost:
    a, b = arg(op, "mat1"), arg(op, "mat2")
    return _matmul_cost(op, mm_flops(a.shape, b.shape), a.dtype)


@register("aten.bmm")
def bmm(op: OpRecord) -> Cost:
    a, b = arg(op, "self"), arg(op, "mat2")
    return _matmul_cost(op, bmm_flops(a.shape, b.shape), a.dtype)


@register("aten.baddbmm")
def baddbmm(op: OpRecord) -> Cost:
    a, b = arg(op, "batch1"), arg(op, "batch2")
    return _matmul_cost(op, bmm_flops(a.shape, b.shape), a.dtype)


@register("aten._scaled_mm")
def scaled_mm(op: OpRecord) -> Cost:
    """fp8 matmul with scales (cuBLASLt)."""
    a, b = arg(op, "self"), arg(op, "mat2")
    return _matmul_cost(op, mm_flops(a.shape, b.shape), a.dtype)


def conv_flops(x_shape, w_shape, out_shape, transposed: bool) -> float:
    """2 * batch * C_out * (C_in / groups) * prod(kernel) * prod(spatial positions computed).

    The weight's second dim is already C_in / groups. A transposed conv computes at its input's positions.
    """
    batch = x_shape[0]
    positions = math.prod((x_shape if transposed else out_shape)[2:])
    c_out, c_in_per_group, *kernel = w_shape
    return 2.0 * batch * c_out * c_in_per_group * math.prod(kernel) * positions


def _swap01(shape):
    return (shape[1], shape[0], *shape[2:])


def conv_backward_flops(grad_out_shape, x_shape, w_shape, grad_in_shape, grad_w_shape, transposed: bool,
                        output_mask) -> float:
    """Each requested gradient is one convolution of the same size as the forward (so 2x forward for both)."""
    flops = 0.0
    if output_mask[0]:
        flops += conv_flops(grad_out_shape, w_shape, grad_in_shape, not transposed)
    if output_mask[1]:
        if transposed:
            flops += conv_flops(_swap01(grad_out_shape), _swap01(x_shape), _swap01(grad_w_shape), False)
        else:
            flops += conv_flops(_swap01(x_shape), _swap01(grad_out_shape), _swap01(grad_w_shape), False)
    return flops


@register("aten.convolution", "aten.cudnn_convolution", "aten._convolution")
def convolution(op: OpRecord) -> Cost:
    x, w = arg(op, "input") if "input" in op.args else arg(op, "self"), arg(op, "weight")
    out = op.tensors_out()[0]
    transposed = bool(op.args.get("transposed", False))
    # A bias is added by a second kernel after the cuDNN convolution.
    kernels = 2 if op.args.get("bias") is not None else 1
    return _matmul_cost(op, conv_flops(x.shape, w.shape, out.shape, transposed), x.dtype, kernels, "conv")


@register("aten.convolution_backward")
def convolution_backward(op: OpRecord) -> Cost:
    grad_out, x, w = arg(op, "grad_output"), arg(op, "input"), arg(op, "weight")
    mask = tuple(op.args.get("output_mask", (True, True, True)))
    grad_in, grad_w = op.outputs[0], op.outputs[1]
    flops = conv_backward_flops(
        grad_out.shape, x.shape, w.shape, grad_in.shape if grad_in else x.shape,
        grad_w.shape if grad_w else w.shape, bool(op.args.get("transposed", False)), mask)
    kernels = sum(1 for want in mask if want)  # one cuDNN kernel per gradient (bias: a reduction)
    return _matmul_cost(op, flops, x.dtype, max(kernels, 1), "conv")
