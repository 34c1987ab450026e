"""PyTorch's fused inference path for its attention modules, as the CUDA build runs it.

nn.MultiheadAttention and nn.TransformerEncoderLayer in eval mode without autograd call
torch._native_multi_head_attention and torch._transformer_encoder_layer_fwd (torch/nn/modules/activation.py,
transformer.py), where the module's conditions hold and torch.overrides.has_torch_function finds no handler. Each
is one aten op whose CUDA kernel calls other aten ops; the capture routes the two to the functions here, which
call those ops in the CUDA kernel's order, so the recorder sees the kernels the GPU runs:

- _transformer_encoder_layer_fwd (aten/src/ATen/native/transformers/transformer.cpp
  transformer_encoder_layer_forward): [layer_norm if norm_first], the attention below, add_ (residual),
  layer_norm, [layer_norm if norm_first], addmm + relu/gelu (_addmm_activation), addmm, add_, [layer_norm];
- _native_multi_head_attention (cuda/attention.cu native_multi_head_attention_cuda): for self-attention with
  head dim a multiple of 8, no weights asked for and no mask, where the backend torch._fused_sdp_choice picks for
  the heads is a fused one (SDPA_BACKENDS): linear (the packed qkv projection), scaled_dot_product_attention, the
  heads transposed back (free where the backend wrote them head-minor), linear (the output projection).
  Otherwise (a mask, the math backend, weights asked for) its own chain (attention.cpp): mm (qkv_projection's
  gemm_nt), _transform_bias_rescale_qkv, bmm (q k^T), softmax in place or _masked_softmax, bmm into q's storage,
  the 0213 transpose (a copy), addmm.

The nested-tensor batch nn.TransformerEncoder makes from a left-aligned padding mask is not taken (router.py
NESTED_MASK_NOTE): its layers run here on the padded batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .attention import _describe, choose_backend

aten = torch.ops.aten

SDPA_HEAD_DIM_MULTIPLE = 8  # attention.cu: the SDPA branch wants dim_per_head % 8 == 0
# The backends for which attention.cu takes the SDPA branch. Its source read flash and efficient; the H200 with
# torch 2.11 took it with cuDNN too (nn.MultiheadAttention, bf16, eval: linear, cuDNN attention, linear;
# validation/zoo_fastpath_measured.json.gz mha_fastpath_forward).
SDPA_BACKENDS = ("flash", "efficient", "cudnn")


def takes_sdpa_branch(arch: str, query: torch.Tensor, same_qkv: bool, num_head: int, mask, need_weights: bool) -> bool:
    """Whether native_multi_head_attention_cuda hands the heads to scaled_dot_product_attention (True) or runs
    its own chain: self-attention, dim_per_head % 8 == 0, need_weights false, no mask, and a fused backend
    (SDPA_BACKENDS) picked by _fused_sdp_choice for the (B, H, T, dh) views of the input."""
    dim_per_head = query.shape[-1] // num_head
    if not same_qkv or dim_per_head % SDPA_HEAD_DIM_MULTIPLE or need_weights or mask is not None:
        return False
    heads = query.view(query.shape[0], -1, num_head, dim_per_head).transpose(1, 2)
    return choose_backend(_describe(heads, heads, heads, None, 0.0, False, False), arch) in SDPA_BACKENDS


def native_multi_head_attention(arch: str, query, key, value, embed_dim: int, num_head: int, qkv_weight, qkv_bias,
                                proj_weight, proj_bias, mask=None, need_weights: bool = True,
                                average_attn_weights: bool = True, mask_type=None):
    """torch._native_multi_head_attention's CUDA chain (see the module docstring). query: (B, T, D), D =
    embed_dim; returns ((B, T, D), the (B, H, T, T) or head-averaged (B, T, T) weights, or None)."""
    batch, dim_per_head = query.shape[0], embed_dim // num_head
    if takes_sdpa_branch(arch, query, query is key and key is value, num_head, mask, need_weights):
        qkv = F.linear(query, qkv_weight, qkv_bias)
        q, k, v = (c.view(batch, -1, num_head, dim_per_head).transpose(1, 2) for c in qkv.chunk(3, -1))
        y = F.scaled_dot_product_attention(q, k, v)
        return F.linear(y.transpose(1, 2).reshape(batch, -1, embed_dim), proj_weight, proj_bias), None
    if not (query is key and key is value):
        raise NotImplementedError("the fused path's cross-attention (query, key, value not one tensor)")
    seq = query.shape[1]
    qkv = torch.mm(query.reshape(batch * seq, embed_dim), qkv_weight.t()).view(batch, seq, 3 * embed_dim)
    q, k, v = aten._transform_bias_rescale_qkv(qkv, qkv_bias, num_head)
    heads = batch * num_head
    scores = torch.bmm(q.reshape(heads, seq, dim_per_head), k.reshape(heads, seq, dim_per_head).transpose(1, 2))
    scores = scores.view(batch, num_head, seq, seq)
    if mask is not None:
        scores = aten._masked_softmax(scores, mask if mask.dtype == torch.bool else mask.to(torch.bool), 3, mask_type)
    else:
        scores = aten._softmax.out(scores, 3, False, out=scores)
    context = torch.bmm(scores.view(heads, seq, seq), v.reshape(heads, seq, dim_per_head),
                        out=q.reshape(heads, seq, dim_per_head))
    context = context.view(batch, num_head, seq, dim_per_head).permute(0, 2, 1, 3).contiguous()
    out = F.linear(context.view(batch * seq, embed_dim), proj_weight, proj_bias).view(batch, seq, embed_dim)
    if not need_weights:
        return out, None
    return out, (scores.sum(1) / num_head if average_attn_weights else scores)


def transformer_encoder_layer_fwd(arch: str, src, embed_dim: int, num_heads: int, qkv_weight, qkv_bias, proj_weight,
                                  proj_bias, use_gelu: bool, norm_first: bool, eps: float, norm1_weight, norm1_bias,
                                  norm2_weight, norm2_bias, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
                                  mask=None, mask_type=None):
    """torch._transformer_encoder_layer_fwd's chain (transformer.cpp). src: (B, T, D); returns (B, T, D)."""
    def norm(x, weight, bias):
        return F.layer_norm(x, (embed_dim,), weight, bias, eps)

    x = norm(src, norm1_weight, norm1_bias) if norm_first else src
    x = native_multi_head_attention(arch, x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                    proj_bias, mask, False, True, mask_type)[0]
    x.add_(src)
    if not norm_first:
        x = norm(x, norm1_weight, norm1_bias)
    residual = x
    if norm_first:
        x = norm(x, norm2_weight, norm2_bias)
    rows = x.reshape(-1, embed_dim)
    hidden = aten._addmm_activation(ffn_bias_1, rows, ffn_weight_1.t(), use_gelu=use_gelu)
    x = torch.addmm(ffn_bias_2, hidden, ffn_weight_2.t()).view(src.shape)
    x.add_(residual)
    return x if norm_first else norm(x, norm2_weight, norm2_bias)


def routes(arch: str) -> dict:
    """The Router's routes for the two ops (capture/router.py): torch function -> (func, args, kwargs) -> out."""
    def mha(func, args, kwargs):
        return native_multi_head_attention(arch, *args, **kwargs)

    def encoder_layer(func, args, kwargs):
        return transformer_encoder_layer_fwd(arch, *args, **kwargs)

    return {torch._native_multi_head_attention: mha, torch._transformer_encoder_layer_fwd: encoder_layer}
