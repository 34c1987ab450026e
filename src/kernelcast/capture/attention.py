"""scaled_dot_product_attention as CUDA runs it: the fused backend the target would pick, and the ops around it.

torch picks the backend in C++ (`select_sdp_backend` in aten/src/ATen/native/transformers/cuda/sdp_utils.cpp)
through a stub that a CPU build does not have, so on fake CUDA it falls back to the math path. This module
re-states those rules for the capture's target arch and emits what `scaled_dot_product_attention` in
attention.cpp emits for each backend: boolean-mask conversion, head-dim padding (flash), mask alignment
(efficient), the backend op, and the slice back. Rules as of torch 2.10-2.13; see docs/capture.md.

The route is a kernel of `aten::scaled_dot_product_attention` at the AutogradCUDA key (where its implicit
formula would run), registered for the length of the capture (`sdpa_routed`): every call reaches it, also
those made inside other functions (nn.MultiheadAttention's forward calls it from Python, where no
TorchFunctionMode sees it: zoo amp_bf16_clip_train ran cuDNN attention where the capture had the math path).

The checks, each a filter of sdp_utils.cpp / sdp_utils_cpp.h that fails a backend:
- every fused backend: 4-D query, key and value of one batch size, non-empty sequences, the last dim of
  query, key and value contiguous (stride 1; cuDNN and flash also take a head dim of 1), and a mask's last dim
  contiguous (check_last_dim_stride_equals_1_dense): transposed views of q/k/v run the math path (zoo
  unet_block_train), and so does a mask built by a permute (T5's relative position bias, as the device's
  transformers built it for zoo t5_forward);
- cuDNN: half or bfloat16 on sm80-sm121; a mask that does not require grad, whose last two dims are the
  sequence lengths or 1 and which is 2-D or 4-D with batch and heads each 1 or full (check_attn_mask_shape);
  batch and heads at most 65535, head dims multiples of 8 within the arch's limit, a key/value sequence longer
  than 1, no dropout with a single query (check_cudnn_tensor_shapes); not in deterministic mode;
- flash: half or bfloat16 on sm80-sm121, no mask, equal head dims up to 256, no causal flag with unequal
  sequence lengths;
- efficient: half, bfloat16 or float on sm50-sm121, head dims aligned (8 for half types, 4 for float).
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from typing import Iterator

import torch

aten = torch.ops.aten

FLASH_MAX_HEAD_DIM = 256
# cuDNN's head-dim limit: 256 on sm90 (H200, torch 2.11, cuDNN 9.19, validation/probes/cuda_path_probe.json:
# torch._fused_sdp_choice picked cuDNN for (d_qk, d_v) = (128, 128), (160, 160), (192, 128), (192, 192) and
# (256, 256)); 128 on other arches (sdp_utils.cpp check_cudnn_tensor_shapes, not measured here).
CUDNN_MAX_HEAD_DIM_SM90 = 256
CUDNN_MAX_HEAD_DIM = 128
CUDNN_MAX_BATCH_OR_HEADS = 65535  # check_cudnn_tensor_shapes
HEAD_DIM_ALIGNMENT = 8  # cuDNN/flash/efficient want head dims in multiples of 8 (efficient fp32: 4)
EFFICIENT_FP32_ALIGNMENT = 4
MASK_ALIGNMENT = 8  # efficient attention pads a mask whose strides are not multiples of 8
# torch >= 2.10 puts cuDNN first on sm_90/sm_100-class GPUs when the runtime cuDNN is newer than 9.15.0; the
# wheels bundle such a cuDNN from 2.11 on. TORCH_CUDNN_SDPA_DEPRIORITIZED=1 turns that off.
CUDNN_FIRST_FROM_TORCH = (2, 11)
CUDNN_FIRST_ARCHES = {"sm_90", "sm_100", "sm_103"}


@dataclass(frozen=True)
class SdpaCall:
    """What the backend choice depends on."""

    dtype: torch.dtype
    head_dim_qk: int
    head_dim_v: int
    seq_q: int
    seq_k: int
    heads_q: int
    heads_k: int
    heads_v: int
    has_mask: bool
    mask_ok_for_cudnn: bool
    dropout: bool
    causal: bool
    gqa: bool
    four_d: bool
    needs_grad: bool
    # Layout (check_last_dim_stride_equals_1_dense): query, key and value with a contiguous last dim, and the
    # mask's last dim contiguous (True without a mask). Batch sizes of query, key and value alike.
    qkv_last_dim_contiguous: bool = True
    mask_last_dim_contiguous: bool = True
    same_batch: bool = True
    batch: int = 1


def _torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def priority_order(arch: str) -> list[str]:
    cudnn_first = (
        _torch_version() >= CUDNN_FIRST_FROM_TORCH and arch in CUDNN_FIRST_ARCHES
        and os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "0") in ("", "0")
    )
    return ["cudnn", "flash", "efficient", "math"] if cudnn_first else ["flash", "efficient", "math", "cudnn"]


def _sm(arch: str) -> int:
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 0


def _enabled(backend: str) -> bool:
    flags = {
        "cudnn": torch.backends.cuda.cudnn_sdp_enabled, "flash": torch.backends.cuda.flash_sdp_enabled,
        "efficient": torch.backends.cuda.mem_efficient_sdp_enabled, "math": torch.backends.cuda.math_sdp_enabled,
    }
    return flags[backend]()


def _heads_ok(c: SdpaCall, supports_gqa: bool, same_kv_heads: bool) -> bool:
    if c.heads_q == c.heads_k == c.heads_v:
        return True
    if not (c.gqa and supports_gqa):
        return False
    return c.heads_q % c.heads_k == 0 and c.heads_q % c.heads_v == 0 and (not same_kv_heads or c.heads_k == c.heads_v)


def _layout_ok(c: SdpaCall, ignore_singleton_dim: bool) -> bool:
    """check_last_dim_stride_equals_1_dense: the fused kernels read q, k, v and the mask row by row."""
    qkv = c.qkv_last_dim_contiguous or (ignore_singleton_dim and c.head_dim_qk == 1)
    return qkv and c.mask_last_dim_contiguous


def can_use(backend: str, c: SdpaCall, arch: str) -> bool:
    sm = _sm(arch)
    half = c.dtype in (torch.float16, torch.bfloat16)
    if backend == "math":
        return True
    if not c.four_d or c.seq_q == 0 or c.seq_k == 0 or not c.same_batch:
        return False
    if backend == "cudnn":
        limit = CUDNN_MAX_HEAD_DIM_SM90 if arch == "sm_90" else CUDNN_MAX_HEAD_DIM
        return (half and 80 <= sm <= 121 and c.mask_ok_for_cudnn and c.seq_k != 1
                and not (c.seq_q == 1 and c.dropout) and _layout_ok(c, ignore_singleton_dim=True)
                and max(c.batch, c.heads_q) <= CUDNN_MAX_BATCH_OR_HEADS
                and c.head_dim_qk % HEAD_DIM_ALIGNMENT == 0 and c.head_dim_v % HEAD_DIM_ALIGNMENT == 0
                and max(c.head_dim_qk, c.head_dim_v) <= limit
                and _heads_ok(c, supports_gqa=True, same_kv_heads=False)
                and not torch.are_deterministic_algorithms_enabled())
    if backend == "flash":
        return (half and 80 <= sm <= 121 and not c.has_mask and c.head_dim_qk == c.head_dim_v
                and c.head_dim_qk <= FLASH_MAX_HEAD_DIM and not (c.causal and c.seq_q != c.seq_k)
                and _layout_ok(c, ignore_singleton_dim=True)
                and _heads_ok(c, supports_gqa=True, same_kv_heads=True))
    if backend == "efficient":
        align = HEAD_DIM_ALIGNMENT if half else EFFICIENT_FP32_ALIGNMENT
        return ((half or c.dtype == torch.float32) and 50 <= sm <= 121 and c.head_dim_qk % align == 0
                and c.head_dim_v % align == 0 and _layout_ok(c, ignore_singleton_dim=False)
                and _heads_ok(c, supports_gqa=False, same_kv_heads=False))
    raise ValueError(backend)


def choose_backend(c: SdpaCall, arch: str) -> str:
    for backend in priority_order(arch):
        if _enabled(backend) and can_use(backend, c, arch):
            return backend
    return "math"


def mask_ok_for_cudnn(mask: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor) -> bool:
    """check_attn_mask_shape (sdp_utils_cpp.h): no grad; last two dims the sequence lengths or 1; 2-D, or 4-D
    with batch and heads each 1 or full."""
    if mask is None:
        return True
    if mask.requires_grad or mask.dim() not in (2, 4):
        return False
    if mask.shape[-2] not in (q.shape[-2], 1) or mask.shape[-1] not in (k.shape[-2], 1):
        return False
    return mask.dim() == 2 or (mask.shape[0] in (1, q.shape[0]) and mask.shape[1] in (1, q.shape[1]))


def _describe(q, k, v, mask, dropout_p, is_causal, enable_gqa) -> SdpaCall:
    four_d = q.dim() == 4 and k.dim() == 4 and v.dim() == 4
    return SdpaCall(
        dtype=q.dtype, head_dim_qk=q.shape[-1], head_dim_v=v.shape[-1], seq_q=q.shape[-2], seq_k=k.shape[-2],
        heads_q=q.shape[1] if four_d else 1, heads_k=k.shape[1] if four_d else 1,
        heads_v=v.shape[1] if four_d else 1, has_mask=mask is not None,
        mask_ok_for_cudnn=four_d and mask_ok_for_cudnn(mask, q, k),
        dropout=dropout_p > 0, causal=is_causal, gqa=enable_gqa, four_d=four_d,
        needs_grad=torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)),
        qkv_last_dim_contiguous=all(t.stride(-1) == 1 for t in (q, k, v)),
        mask_last_dim_contiguous=mask is None or mask.stride(-1) == 1,
        same_batch=q.shape[0] == k.shape[0] == v.shape[0], batch=q.shape[0],
    )


def _autocast(*tensors):
    """scaled_dot_product_attention has an AutocastCUDA kernel that casts float inputs to the autocast dtype;
    the backend ops we call instead have none, so cast here as it would."""
    if not torch.is_autocast_enabled("cuda"):
        return tensors
    dtype = torch.get_autocast_dtype("cuda")
    return tuple(t.to(dtype) if t is not None and t.is_floating_point() and t.dtype != dtype else t
                 for t in tensors)


def _pad_last_dim(t: torch.Tensor, multiple: int) -> torch.Tensor:
    rem = t.shape[-1] % multiple
    return t if rem == 0 else aten.constant_pad_nd(t, [0, multiple - rem], 0.0)


def _aligned(mask: torch.Tensor) -> bool:
    return mask.stride(-1) == 1 and all(s % MASK_ALIGNMENT == 0 for s in mask.stride()[:-1])


def route_sdpa(arch: str, query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
               scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:
    q, k, v, mask = _autocast(query, key, value, attn_mask)
    with torch.autocast("cuda", enabled=False):
        call = _describe(q, k, v, mask, dropout_p, is_causal, enable_gqa)
        backend = choose_backend(call, arch)
        if backend == "math":
            return aten._scaled_dot_product_attention_math(
                q, k, v, mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)[0]
        if mask is not None and mask.dtype == torch.bool:  # bool mask -> additive mask, as attention.cpp does
            mask = aten.where.ScalarSelf(mask, 0.0, aten.scalar_tensor(-math.inf, dtype=q.dtype, device=mask.device))
        compute_lse = call.needs_grad
        if backend == "cudnn":
            return aten._scaled_dot_product_cudnn_attention(
                q, k, v, mask, compute_lse, dropout_p, is_causal, False, scale=scale)[0]
        if backend == "flash":
            head_dim = q.shape[-1]
            og_scale = scale if scale is not None else 1.0 / math.sqrt(head_dim)
            qp, kp, vp = (_pad_last_dim(t, HEAD_DIM_ALIGNMENT) for t in (q, k, v))
            out = aten._scaled_dot_product_flash_attention(qp, kp, vp, dropout_p, is_causal, False, scale=og_scale)[0]
            return out if out.shape[-1] == head_dim else out[..., :head_dim]
        if mask is not None:
            if not _aligned(mask):
                sk = mask.shape[-1]
                mask = _pad_last_dim(mask, MASK_ALIGNMENT)[..., :sk]
            mask = mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        return aten._scaled_dot_product_efficient_attention(
            q, k, v, mask, compute_lse, dropout_p, is_causal, scale=scale)[0]


@contextlib.contextmanager
def sdpa_routed(arch: str) -> Iterator[None]:
    """For the length of the capture, every call of aten::scaled_dot_product_attention on CUDA tensors takes
    the backend CUDA would pick for `arch`: a kernel at AutogradCUDA, where the implicit formula runs (its
    backend ops record their own autograd nodes, as they do on a GPU)."""
    def kernel(*args, **kwargs):
        return route_sdpa(arch, *args, **kwargs)

    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("scaled_dot_product_attention", kernel, "AutogradCUDA")
        yield
    finally:
        lib._destroy()
