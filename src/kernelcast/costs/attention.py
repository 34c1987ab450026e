"""Fused attention (flash, memory-efficient, cuDNN): tensor-core math over the (query, key) pairs computed.

Non-causal FLOPs equal torch.utils.flop_counter's: forward is QK^T plus PV, 2*B*H*Sq*Sk*(Dqk + Dv); backward
is four such products, 2*B*H*Sq*Sk*(2*Dqk + 2*Dv). A causal kernel skips the masked pairs, so it counts only
the pairs it computes: query i sees keys 0..i (torch's top-left causal alignment).
"""

from __future__ import annotations

from kernelcast.records import OpRecord

from .common import arg, bytes_read, bytes_written
from .registry import Cost, register

# GPU work items per call, as the CUDA backends launch them (forward: one fused kernel; backward: a
# preprocessing kernel for dO*O, the main kernel, and a dQ conversion/accumulation kernel).
FLASH_BACKWARD_KERNELS = 3
EFFICIENT_BACKWARD_KERNELS = 2
CUDNN_BACKWARD_KERNELS = 3


def attended_pairs(sq: int, sk: int, causal: bool) -> int:
    """(query, key) pairs a kernel computes. Causal: sum over queries i of min(i + 1, Sk)."""
    if not causal:
        return sq * sk
    full_rows = min(sq, sk)  # rows 0..full_rows-1 see i+1 keys
    return full_rows * (full_rows + 1) // 2 + max(sq - sk, 0) * sk


def attention_forward_flops(q_shape, k_shape, v_shape, causal: bool) -> float:
    b, h, sq, d_qk = q_shape
    sk, d_v = k_shape[2], v_shape[3]
    return 2.0 * b * h * attended_pairs(sq, sk, causal) * (d_qk + d_v)


def attention_backward_flops(q_shape, k_shape, v_shape, causal: bool) -> float:
    b, h, sq, d_qk = q_shape
    sk, d_v = k_shape[2], v_shape[3]
    return 2.0 * b * h * attended_pairs(sq, sk, causal) * (2 * d_qk + 2 * d_v)


def _attention_cost(op: OpRecord, flops: float, kernels: int) -> Cost:
    q = arg(op, "query")
    return Cost(flops=flops, bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=kernels,
                math="attention", dtype=q.dtype)


def _shapes(op: OpRecord):
    return arg(op, "query").shape, arg(op, "key").shape, arg(op, "value").shape


@register("aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_efficient_attention",
          "aten._scaled_dot_product_cudnn_attention")
def attention_forward(op: OpRecord) -> Cost:
    causal = bool(op.args.get("is_causal", False))
    return _attention_cost(op, attention_forward_flops(*_shapes(op), causal), kernels=1)


def _backward(kernels: int):
    def formula(op: OpRecord) -> Cost:
        causal = bool(op.args.get("is_causal", False))
        return _attention_cost(op, attention_backward_flops(*_shapes(op), causal), kernels)

    return formula


register("aten._scaled_dot_product_flash_attention_backward")(_backward(FLASH_BACKWARD_KERNELS))
register("aten._scaled_dot_product_efficient_attention_backward")(_backward(EFFICIENT_BACKWARD_KERNELS))
register("aten._scaled_dot_product_cudnn_attention_backward")(_backward(CUDNN_BACKWARD_KERNELS))
