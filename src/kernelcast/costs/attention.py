"""Fused attention (flash, memory-efficient, cuDNN): tensor-core math over the (query, key) pairs computed.

Non-causal FLOPs equal torch.utils.flop_counter's: forward is QK^T plus PV, 2*B*H*Sq*Sk*(Dqk + Dv); backward
recomputes QK^T (the fused kernels keep no score matrix), then dP = dO V^T, dV = P^T dO, dQ = dS K and
dK = dS^T Q: 2*B*H*Sq*Sk*(3*Dqk + 2*Dv) (flop_counter's sdpa_backward_flop_count). A causal kernel skips the
masked pairs, so it counts only the pairs it computes: query i sees keys 0..i (torch's top-left causal
alignment); flop_counter counts every pair.
"""

from __future__ import annotations

from kernelcast.records import OpRecord

from .common import arg, bytes_read, bytes_written
from .registry import Cost, CostContext, register

# GPU work items per call, measured on the H200 (torch 2.11, cuDNN 9.19; validation/op_sweep.json, sdpa_*).
# cuDNN: forward = workspace memset + fused kernel; backward = memset, dO*O preprocessing, main, dQ conversion.
# Flash backward: two zero-fills, then dO*O, main and dQ conversion. Efficient backward: a fill and the kernel.
CUDNN_FORWARD_KERNELS = 2
DROPOUT_RNG_KERNELS = 1  # with dropout, one more item to set up the RNG seed and offset (measured, cuDNN)
CUDNN_BACKWARD_KERNELS = 4
# A single query with as many key/value heads as query heads (decoding, multi-head) takes cuDNN's sm80 fprop
# kernel, launched without the workspace memset: one item (zoo llama_decode_static_cache, 4 calls, and
# gpt2_decode_dynamic_cache, 12: one kernel each). Every other shape takes the memset and the fused kernel: 2
# queries and more, and a single query over fewer key/value heads (grouped-query decoding). H200 (torch 2.11,
# cuDNN 9.19, validation/probes/cuda_path_probe.json): 16 query heads against 1024 keys, head dim 128 bf16:
# seq_q 1 over 16 kv heads 1 item; seq_q 2-128 over 16 kv heads 2; seq_q 1-128 over 4 kv heads 2.
CUDNN_DECODE_FORWARD_KERNELS = 1
CUDNN_DECODE_MAX_SEQ_Q = 1
# With fewer key/value heads than query heads (grouped-query attention), the backward reduces dK and dV over
# each group of heads: two fmha_reduce_head kernels more (zoo qwen2_train: 8 for 4 backward calls).
CUDNN_GQA_BACKWARD_REDUCE_KERNELS = 2
FLASH_FORWARD_KERNELS = 1
FLASH_BACKWARD_KERNELS = 5
EFFICIENT_FORWARD_KERNELS = 1
EFFICIENT_BACKWARD_KERNELS = 2


BACKWARD_QK_PRODUCTS = 3  # the QK^T recompute, dQ, dK
BACKWARD_V_PRODUCTS = 2  # dP = dO V^T, dV


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
    return 2.0 * b * h * attended_pairs(sq, sk, causal) * (BACKWARD_QK_PRODUCTS * d_qk + BACKWARD_V_PRODUCTS * d_v)


BACKENDS = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION"}
# An fp32 call is a kernel family of its own: PyTorch runs fp32 attention on the memory-efficient backend, whose
# fp32 kernels (fmha_cutlassF_f32_*) run on the CUDA cores, not the tensor cores its bf16 / fp16 kernels use.
# Looked up among bf16 rows at the bf16 roof, our whole-model programs' fp32 calls (an H100, torch 2.11) ran
# 3.5-4.2x their predicted time. Its rows: the sweep section attention_fp32 (calibrate/sweep.py).
FP32_SUFFIX = "_FP32"


def _backend(op: OpRecord) -> str:
    name = next((name for short, name in BACKENDS.items() if f"_{short}_attention" in op.op), "")
    return name + FP32_SUFFIX if name and arg(op, "query").dtype == "float32" else name


def _attention_cost(op: OpRecord, flops: float, kernels: int) -> Cost:
    """Key for calibrated lookup: (backend, pass, B*H, Sq, Sk, head dim, causal, dropout, mask); an fp32 call's backend
    carries FP32_SUFFIX (its kernels are another family)."""
    q, k = arg(op, "query"), arg(op, "key")
    b, h, sq, d = q.shape
    key = (_backend(op), "bwd" if op.op.endswith("_backward.default") else "fwd", b * h, sq, k.shape[2], d,
           bool(op.args.get("is_causal", False)), float(op.args.get("dropout_p") or 0.0) > 0.0,
           op.args.get("attn_bias") is not None)
    return Cost(flops=flops, bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=kernels,
                math="attention", dtype=q.dtype, kind="attention", key=key)


def _shapes(op: OpRecord):
    return arg(op, "query").shape, arg(op, "key").shape, arg(op, "value").shape


def _forward(kernels: int):
    def formula(op: OpRecord, ctx: CostContext) -> Cost:
        causal = bool(op.args.get("is_causal", False))
        return _attention_cost(op, attention_forward_flops(*_shapes(op), causal), kernels)

    return formula


def _backward(kernels: int):
    def formula(op: OpRecord, ctx: CostContext) -> Cost:
        causal = bool(op.args.get("is_causal", False))
        return _attention_cost(op, attention_backward_flops(*_shapes(op), causal), kernels)

    return formula


@register("aten._scaled_dot_product_cudnn_attention")
def cudnn_attention_forward(op: OpRecord, ctx: CostContext) -> Cost:
    dropout = float(op.args.get("dropout_p") or 0.0) > 0.0
    q, k = arg(op, "query"), arg(op, "key")
    decode = q.shape[2] <= CUDNN_DECODE_MAX_SEQ_Q and k.shape[1] == q.shape[1]
    kernels = CUDNN_DECODE_FORWARD_KERNELS if decode else CUDNN_FORWARD_KERNELS
    return _forward(kernels + DROPOUT_RNG_KERNELS * dropout)(op, ctx)


@register("aten._scaled_dot_product_cudnn_attention_backward")
def cudnn_attention_backward(op: OpRecord, ctx: CostContext) -> Cost:
    grouped = arg(op, "key").shape[1] < arg(op, "query").shape[1]
    return _backward(CUDNN_BACKWARD_KERNELS + CUDNN_GQA_BACKWARD_REDUCE_KERNELS * grouped)(op, ctx)

register("aten._scaled_dot_product_flash_attention")(_forward(FLASH_FORWARD_KERNELS))
register("aten._scaled_dot_product_efficient_attention")(_forward(EFFICIENT_FORWARD_KERNELS))
register("aten._scaled_dot_product_flash_attention_backward")(_backward(FLASH_BACKWARD_KERNELS))
register("aten._scaled_dot_product_efficient_attention_backward")(_backward(EFFICIENT_BACKWARD_KERNELS))


# The kernels under the SDPA ops, called directly: aten._flash_attention_forward / _backward and
# aten._efficient_attention_forward / _backward take (batch, seq, heads, head dim) tensors (the SDPA ops
# transpose into that layout first: attention.cu), or (total tokens, heads, head dim) with cumulative sequence
# offsets for variable-length batches, whose per-sequence lengths are data on the device: kernelcast counts
# every token against max_k keys there (an upper bound). Their work items are the SDPA ops' above (the SDPA op
# adds no kernel of its own). torch.utils.flop_counter passes these tensors to its (batch, heads, seq, dim)
# formula unchanged, so it swaps heads and sequence length: its count is wrong for them (and it raises when
# seq is not a multiple of heads), which the OpInfo sweep lists as a known difference.
def _bshd_to_bhsd(shape: tuple[int, ...], max_seq: int | None) -> tuple[int, ...]:
    if len(shape) == 3:  # (total, heads, dim): variable length, one "batch" of all tokens
        total, h, d = shape
        return (1, h, total, d)
    b, s, h, d = shape
    return (b, h, s, d)


def _raw_shapes(op: OpRecord, k_len_arg: str):
    q, k, v = arg(op, "query"), arg(op, "key"), arg(op, "value")
    q_shape, k_shape, v_shape = (_bshd_to_bhsd(t.shape, None) for t in (q, k, v))
    if len(k.shape) == 3 and isinstance(op.args.get(k_len_arg), int):  # variable length: max_k keys per token
        k_shape = (1, k_shape[1], int(op.args[k_len_arg]), k_shape[3])
        v_shape = (1, v_shape[1], int(op.args[k_len_arg]), v_shape[3])
    return q_shape, k_shape, v_shape


def _raw_causal(op: OpRecord) -> bool:
    """Flash: is_causal; efficient: custom_mask_type 1 (top-left) or 2 (bottom-right, counted as top-left)."""
    return bool(op.args.get("is_causal")) or int(op.args.get("custom_mask_type") or 0) != 0


def _raw_cost(op: OpRecord, flops: float, kernels: int) -> Cost:
    q = arg(op, "query")
    return Cost(flops=flops, bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=kernels,
                math="attention", dtype=q.dtype, kind="attention")


@register("aten._flash_attention_forward", "aten._efficient_attention_forward")
def raw_attention_forward(op: OpRecord, ctx: CostContext) -> Cost:
    flash = op.op.startswith("aten._flash")
    shapes = _raw_shapes(op, "max_k" if flash else "max_seqlen_k")
    kernels = FLASH_FORWARD_KERNELS if flash else EFFICIENT_FORWARD_KERNELS
    return _raw_cost(op, attention_forward_flops(*shapes, _raw_causal(op)), kernels)


@register("aten._flash_attention_backward", "aten._efficient_attention_backward")
def raw_attention_backward(op: OpRecord, ctx: CostContext) -> Cost:
    flash = op.op.startswith("aten._flash")
    shapes = _raw_shapes(op, "max_k" if flash else "max_seqlen_k")
    kernels = FLASH_BACKWARD_KERNELS if flash else EFFICIENT_BACKWARD_KERNELS
    return _raw_cost(op, attention_backward_flops(*shapes, _raw_causal(op)), kernels)
