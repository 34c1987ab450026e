"""Microbenchmarks for a device profile: single aten ops over shapes, on a real GPU.

Each case calls one op (attention: forward, or forward and backward). The op records are taken from the call
itself (so the calibration costs an op exactly as the predictor will), then, after two warm-up calls,
REPEATS calls are profiled with torch.profiler: the GPU work items of each call by name and their summed
device time (timing.py). Inputs are random normal data, never zeros. The whole sweep takes well under a minute
on an H200. These are the default sections (SECTIONS); the grids beside them run by name (grids.py).
"""

from __future__ import annotations

import itertools
import time
from typing import Callable

import torch

from kernelcast import progress

from .norm_blocks import BN_WARM_KINDS
from .timing import DEV, aten, randn, record


def gemms(results: list, quick: bool) -> None:
    ms = [256, 2048, 8192] if quick else [128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
    nk = [(768, 768), (2304, 768), (3072, 768), (768, 3072), (4096, 4096), (11008, 4096), (4096, 11008),
          (32000, 4096), (50257, 768), (50304, 768)]
    for dtype in (torch.bfloat16, torch.float32):
        for m, (n, k) in itertools.product(ms, nk):
            if dtype == torch.float32 and m > 4096:
                continue
            a, b = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
            bias = randn(n, dtype=dtype)
            w = randn(n, k, dtype=dtype)  # nn.Linear weight layout: x @ w.t()
            g = randn(m, n, dtype=dtype)
            base = {"m": m, "n": n, "k": k, "dtype": str(dtype)[6:]}
            record(results, "mm_nn", base, lambda: aten.mm(a, b))
            record(results, "addmm_linear", base, lambda: aten.addmm(bias, a, w.t()))
            record(results, "mm_linear", base, lambda: aten.mm(a, w.t()))
            record(results, "mm_grad_input", base, lambda: aten.mm(g, w))  # (m,n) @ (n,k)
            record(results, "mm_grad_weight", base, lambda: aten.mm(g.t(), a))  # (n,m) @ (m,k)
    # Leading dimensions that are not a multiple of 16 bytes: cuBLAS falls back to slower kernels (the GPT-2
    # vocabulary 50257 is the known case). Odd K, N, or both, at small and large sizes.
    for (m, n, k), dtype in itertools.product(UNALIGNED_GEMMS, (torch.bfloat16, torch.float32)):
        a, w, b = randn(m, k, dtype=dtype), randn(n, k, dtype=dtype), randn(k, n, dtype=dtype)
        base = {"m": m, "n": n, "k": k, "dtype": str(dtype)[6:]}
        record(results, "mm_nn", base, lambda: aten.mm(a, b))
        record(results, "mm_linear", base, lambda: aten.mm(a, w.t()))
    # Language-model heads with a vocabulary that is not a multiple of 8 (most tokenizers'): a sweep over the
    # vocabulary size, in the three GEMMs of a linear layer's forward and backward.
    for (m, k), n in itertools.product(LM_HEAD_MK if not quick else LM_HEAD_MK[:1], LM_HEAD_VOCABS):
        a, w, g = randn(m, k), randn(n, k), randn(m, n)
        base = {"m": m, "n": n, "k": k, "dtype": "bfloat16"}
        record(results, "mm_linear", base, lambda: aten.mm(a, w.t()))
        record(results, "mm_grad_input", base, lambda: aten.mm(g, w))
        record(results, "mm_grad_weight", base, lambda: aten.mm(g.t(), a))
    for batch, m, n, k in [(96, 512, 512, 64), (96, 512, 64, 512), (32, 1024, 1024, 128), (384, 128, 128, 64)]:
        a, b = randn(batch, m, k), randn(batch, k, n)
        record(results, "bmm", {"batch": batch, "m": m, "n": n, "k": k, "dtype": "bfloat16"}, lambda: aten.bmm(a, b))
    # Other precisions at a few sizes: fp16, tf32 (fp32 inputs with TF32 allowed), fp8 (scaled matmul).
    for m, n, k in [(256, 256, 256), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192)]:
        a16, b16 = randn(m, k, dtype=torch.float16), randn(k, n, dtype=torch.float16)
        record(results, "mm_fp16", {"m": m, "n": n, "k": k, "dtype": "float16"}, lambda: aten.mm(a16, b16))
        a32, b32 = randn(m, k, dtype=torch.float32), randn(k, n, dtype=torch.float32)
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            record(results, "mm_tf32", {"m": m, "n": n, "k": k, "dtype": "tf32"}, lambda: aten.mm(a32, b32))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        if hasattr(torch, "float8_e4m3fn"):
            a8 = a16.to(torch.float8_e4m3fn)
            b8 = b16.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major B, as cuBLASLt fp8 wants
            one = torch.ones((), device=DEV)
            record(results, "mm_fp8", {"m": m, "n": n, "k": k, "dtype": "float8_e4m3fn"},
                   lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16))


UNALIGNED_GEMMS = [(1000, 1000, 1001), (2048, 3001, 2048), (4096, 4096, 4095), (513, 4097, 1023),
                   (8000, 1000, 3001), (3001, 3001, 3001), (256, 999, 255), (6000, 2000, 999),
                   (1000, 1002, 1000), (2048, 3002, 2048), (4096, 4094, 4096), (6000, 2002, 998)]  # even


LM_HEAD_MK = [(8192, 768), (2048, 4096), (4096, 1024)]
LM_HEAD_VOCABS = [10001, 20001, 32001, 40001, 65001, 100001, 10002, 20002, 40002, 65002]  # odd and even


def convs(results: list, quick: bool) -> None:
    # (batch, c_in, c_out, kernel, stride, size)
    configs = [(64, 3, 64, 7, 2, 224), (64, 64, 64, 3, 1, 56), (64, 64, 128, 3, 2, 56), (64, 128, 128, 3, 1, 28),
               (64, 128, 256, 3, 2, 28), (64, 256, 256, 3, 1, 14), (64, 256, 512, 3, 2, 14), (64, 512, 512, 3, 1, 7),
               (64, 64, 128, 1, 2, 56), (64, 3, 768, 16, 16, 224)]
    if quick:
        configs = configs[:3]
    for (n, ci, co, ks, st, hw), (dtype, cl) in itertools.product(
            configs, [(torch.bfloat16, True), (torch.bfloat16, False), (torch.float32, False)]):
        fmt = torch.channels_last if cl else torch.contiguous_format
        x = randn(n, ci, hw, hw, dtype=dtype).to(memory_format=fmt)
        w = randn(co, ci, ks, ks, dtype=dtype).to(memory_format=fmt)
        pad = ks // 2 if ks < 16 else 0
        out = aten.convolution(x, w, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1)
        gout = torch.randn_like(out)
        base = {"n": n, "c_in": ci, "c_out": co, "kernel": ks, "stride": st, "size": hw,
                "dtype": str(dtype)[6:], "channels_last": cl}
        record(results, "conv_fwd", base,
               lambda: aten.convolution(x, w, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1))
        record(results, "conv_bwd", base,
               lambda: aten.convolution_backward(gout, x, w, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1,
                                                 [ci != 3, True, False]))


def reductions(results: list, quick: bool) -> None:
    shapes = [(4096, 768), (4096, 3072), (8192, 50304), (128, 768), (1, 8192), (64, 100000), (16384, 4096),
              (256, 256), (32, 4096)]
    for (r, c), dtype in itertools.product(shapes, (torch.bfloat16, torch.float32)):
        x = randn(r, c, dtype=dtype)
        base = {"rows": r, "cols": c, "dtype": str(dtype)[6:]}
        record(results, "sum_dim0", base, lambda: aten.sum.dim_IntList(x, [0], True))
        record(results, "sum_dim1", base, lambda: aten.sum.dim_IntList(x, [1], True))
        record(results, "sum_all", base, lambda: aten.sum.default(x))


def attention(results: list, quick: bool) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    for (b, h, s, d), backend, causal, p in itertools.product(
            [(8, 12, 512, 64), (4, 32, 512, 128), (2, 8, 2048, 64), (32, 12, 128, 64), (16, 16, 1024, 64)],
            [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION], (True, False),
            (0.0, 0.1)):
        q, k, v = (torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        base = {"b": b, "h": h, "s": s, "d": d, "backend": backend.name, "causal": causal, "dropout": p}
        with sdpa_kernel([backend]):
            out = sdpa(q, k, v, is_causal=causal, dropout_p=p)
            grad = torch.randn_like(out)
            record(results, "sdpa_fwd", base, lambda: sdpa(q, k, v, is_causal=causal, dropout_p=p))
            record(results, "sdpa_fwd_bwd", base,
                   lambda: torch.autograd.grad(sdpa(q, k, v, is_causal=causal, dropout_p=p), (q, k, v), grad))
    # Small problems (few heads x short sequences), where a fused kernel is far from its peak rate.
    for (b, h, s, d), p in itertools.product([(8, 12, 128, 64), (4, 12, 256, 64), (2, 16, 128, 128)], (0.0, 0.1)):
        q, k, v = (torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        base = {"b": b, "h": h, "s": s, "d": d, "backend": "CUDNN_ATTENTION", "causal": False, "dropout": p}
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            grad = torch.randn_like(q)
            record(results, "sdpa_fwd", base, lambda: sdpa(q, k, v, dropout_p=p))
            record(results, "sdpa_fwd_bwd", base,
                   lambda: torch.autograd.grad(sdpa(q, k, v, dropout_p=p), (q, k, v), grad))
    # Sequence lengths that are not a multiple of the kernels' 128-row tiles (image patches, odd prompts).
    for (b, h, s, d), backend in itertools.product(
            [(32, 12, 100, 64), (32, 12, 300, 64), (8, 16, 700, 64), (16, 12, 230, 64), (4, 16, 1000, 128)],
            [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        q, k, v = (torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        base = {"b": b, "h": h, "s": s, "d": d, "backend": backend.name, "causal": False, "dropout": 0.0}
        with sdpa_kernel([backend]):
            grad = torch.randn_like(q)
            record(results, "sdpa_fwd", base, lambda: sdpa(q, k, v))
            record(results, "sdpa_fwd_bwd", base, lambda: torch.autograd.grad(sdpa(q, k, v), (q, k, v), grad))
    # Additive masks, as encoder models pass a padding mask: (B, 1, S, S) broadcast over heads, float or bool.
    for (b, h, s, d), mask_dtype, backend in itertools.product(
            [(8, 12, 512, 64), (32, 12, 128, 64), (16, 16, 256, 64), (4, 32, 1024, 128)], (torch.bfloat16, torch.bool),
            [SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        q, k, v = (torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        mask = (torch.rand(b, 1, s, s, device=DEV) > 0.1)
        if mask_dtype != torch.bool:
            mask = torch.zeros(b, 1, s, s, device=DEV, dtype=mask_dtype).masked_fill(~mask, -1e4)
        base = {"b": b, "h": h, "s": s, "d": d, "backend": backend.name, "causal": False, "dropout": 0.0,
                "mask": str(mask_dtype)[6:]}
        with sdpa_kernel([backend]):
            try:
                grad = torch.randn_like(sdpa(q, k, v, attn_mask=mask))
            except RuntimeError as exc:  # this backend refuses this mask: the refusal is data too
                results.append({"kind": "sdpa_fwd", **base, "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            record(results, "sdpa_fwd", base, lambda: sdpa(q, k, v, attn_mask=mask))
            record(results, "sdpa_fwd_bwd", base,
                   lambda: torch.autograd.grad(sdpa(q, k, v, attn_mask=mask), (q, k, v), grad))


def record_row_kernels(results: list, base: dict, x, w, bsz, g) -> None:
    """Layer norm and softmax, forward and backward, over the last dim of a rows x width input."""
    width = x.shape[-1]
    record(results, "layer_norm_fwd", base, lambda: aten.native_layer_norm(x, [width], w, bsz, 1e-5))
    out, mean, rstd = aten.native_layer_norm(x, [width], w, bsz, 1e-5)
    record(results, "layer_norm_bwd", base, lambda: aten.native_layer_norm_backward(
        g, x, [width], mean, rstd, w, bsz, [True, True, True]))
    record(results, "softmax_fwd", base, lambda: aten._softmax(x, -1, False))
    sm = aten._softmax(x, -1, False)
    record(results, "softmax_bwd", base, lambda: aten._softmax_backward_data(g, sm, -1, x.dtype))


def record_batch_norm(results: list, n: int, c: int, hw: int, channels_last: bool, dtype, training: bool,
                       warm: bool = False) -> None:
    """Batch norm of an n x c x hw x hw input (fp32 weights and statistics); its backward when training. warm:
    also timed with L2 left as the previous call left it (kinds BN_WARM_KINDS), as in a model, where the input
    was just written by the layer before."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = randn(n, c, hw, hw, dtype=torch.float32).to(memory_format=fmt).to(dtype)
    w, bsz = randn(c, dtype=torch.float32), randn(c, dtype=torch.float32)
    rm, rv = torch.zeros(c, device=DEV), torch.ones(c, device=DEV)
    base = {"n": n, "c": c, "size": hw, "channels_last": channels_last, "training": training}
    forward = lambda: aten.native_batch_norm(x, w, bsz, rm, rv, training, 0.1, 1e-5)  # noqa: E731
    record(results, "native_batch_norm", base, forward)
    if warm:
        record(results, BN_WARM_KINDS[0], base, forward, flush=False)
    out, sm, si = aten.native_batch_norm(x, w, bsz, rm, rv, True, 0.1, 1e-5)
    g = torch.randn_like(out)
    if training:
        backward = lambda: aten.native_batch_norm_backward(g, x, w, rm, rv, sm, si, True, 1e-5,  # noqa: E731
                                                          [True, True, True])
        record(results, "native_batch_norm_bwd", base, backward)
        if warm:
            record(results, BN_WARM_KINDS[1], base, backward, flush=False)


def norms_and_more(results: list, quick: bool) -> None:
    for rows, width, dtype in itertools.product([4096, 16384], [768, 4096], (torch.bfloat16, torch.float32)):
        x, w, bsz = randn(rows, width, dtype=dtype), randn(width, dtype=dtype), randn(width, dtype=dtype)
        base = {"rows": rows, "width": width, "dtype": str(dtype)[6:]}
        record_row_kernels(results, base, x, w, bsz, torch.randn_like(x))
        logp = aten._log_softmax(x.float(), -1, False)
        target = torch.randint(0, width, (rows,), device=DEV)
        record(results, "nll_loss_fwd", base, lambda: aten.nll_loss_forward(logp, target, None, 1, -100))
    # Row length decides how a row-wise kernel maps rows to threads (a warp per row for short rows, a block per
    # row for long ones), so sweep it at a few total sizes.
    for cols, total_elems, dtype in itertools.product(ROW_LENGTHS, ROW_SWEEP_ELEMENTS, (torch.bfloat16, torch.float32)):
        rows = max(total_elems // cols, 1)
        x, w, bsz = randn(rows, cols, dtype=dtype), randn(cols, dtype=dtype), randn(cols, dtype=dtype)
        base = {"rows": rows, "width": cols, "dtype": str(dtype)[6:]}
        record_row_kernels(results, base, x, w, bsz, torch.randn_like(x))
        record(results, "sum_dim0", {"rows": rows, "cols": cols, "dtype": str(dtype)[6:]},
               lambda: aten.sum.dim_IntList(x, [0], True))
    for rows, vocab in [(2048, 32000), (8192, 50304)]:  # LM heads: softmax and loss over a vocabulary
        logits = randn(rows, vocab, dtype=torch.float32)
        target = torch.randint(0, vocab, (rows,), device=DEV)
        base = {"rows": rows, "width": vocab, "dtype": "float32"}
        record(results, "log_softmax_fwd", base, lambda: aten._log_softmax(logits, -1, False))
        logp = aten._log_softmax(logits, -1, False)
        g = torch.randn_like(logp)
        record(results, "log_softmax_bwd", base, lambda: aten._log_softmax_backward_data(g, logp, -1, torch.float32))
        record(results, "nll_loss_fwd", base, lambda: aten.nll_loss_forward(logp, target, None, 1, -100))
        total = torch.tensor(float(rows), device=DEV)
        gl = torch.ones((), device=DEV)
        record(results, "nll_loss_bwd", base, lambda: aten.nll_loss_backward(gl, logp, target, None, 1, -100, total))
    for (n, c, hw), cl, train in itertools.product([(64, 64, 56), (64, 256, 14)], (True, False), (True, False)):
        record_batch_norm(results, n, c, hw, cl, torch.bfloat16, train)
    for n_idx, vocab in [(512, 50257), (3072, 50257), (3073, 50257), (8192, 50257), (4096, 2), (65536, 32000)]:
        g = randn(n_idx, 768, dtype=torch.float32)
        idx = torch.randint(0, vocab, (n_idx,), device=DEV)
        record(results, "embedding_bwd", {"indices": n_idx, "vocab": vocab},
               lambda: aten.embedding_dense_backward(g, idx, vocab, -1, False))


ROW_LENGTHS = [32, 64, 128, 256, 384, 512, 1024, 2048, 8192]
ROW_SWEEP_ELEMENTS = [1 << 20, 1 << 24, 1 << 27]  # 2-4 MB (L2-sized) to 256-512 MB


def elementwise(results: list, quick: bool) -> None:
    for nbytes in [4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]:
        n = nbytes // 4
        x, y = randn(n, dtype=torch.float32), randn(n, dtype=torch.float32)
        xb, yb = x.bfloat16(), y.bfloat16()
        base = {"bytes_per_tensor": nbytes}
        record(results, "add_fp32", base, lambda: aten.add.Tensor(x, y))
        record(results, "add_fp32_l2_warm", base, lambda: aten.add.Tensor(x, y), flush=False)
        record(results, "add_bf16", base, lambda: aten.add.Tensor(xb, yb))
        record(results, "add_mixed", base, lambda: aten.add.Tensor(xb, y))  # bf16 + fp32 -> fp32: a casting kernel
        record(results, "copy_fp32", base, lambda: aten.clone(x))
        record(results, "to_bf16", base, lambda: aten._to_copy(x, dtype=torch.bfloat16))
        record(results, "to_fp32", base, lambda: aten._to_copy(xb, dtype=torch.float32))
        record(results, "gelu_fp32", base, lambda: aten.gelu(x))
        record(results, "gelu_bf16", base, lambda: aten.gelu(xb))
        record(results, "fill_fp32", base, lambda: aten.zero_(y))
    for rows, cols in [(4096, 768), (8192, 3072), (16384, 4096)]:
        x, bias = randn(rows, cols), randn(cols)
        record(results, "bias_add_bf16", {"rows": rows, "cols": cols}, lambda: aten.add.Tensor(x, bias))
    # Broadcast and strided operands (a per-row scale, half of each row as rotary embeddings take it): the
    # non-vectorised elementwise kernel, over sizes.
    for nbytes, dtype in itertools.product([64 << 10, 1 << 20, 16 << 20, 256 << 20], (torch.float32, torch.bfloat16)):
        cols = 1024
        rows = max(nbytes // (cols * (4 if dtype == torch.float32 else 2)), 1)
        x, scale, other = randn(rows, cols, dtype=dtype), randn(rows, 1, dtype=dtype), randn(rows, cols // 2, dtype=dtype)
        base = {"bytes_per_tensor": nbytes, "dtype": str(dtype)[6:]}
        record(results, "row_scale_mul", base, lambda: aten.mul.Tensor(x, scale))
        record(results, "half_row_mul", base, lambda: aten.mul.Tensor(x[:, : cols // 2], other))
    for rows, cols in [(4096, 4096), (8192, 768), (2048, 11008)]:
        x = randn(rows, cols)
        base = {"rows": rows, "cols": cols}
        record(results, "transpose_copy_bf16", base, lambda: x.t().contiguous())
        record(results, "cat_bf16", base, lambda: aten.cat([x, x], 1))
    for n_tensors, numel in [(148, 800_000), (291, 6_000_000), (1000, 1000)]:
        if quick and numel > 1_000_000:
            continue
        xs = [randn(numel, dtype=torch.float32) for _ in range(n_tensors)]
        ys = [randn(numel, dtype=torch.float32) for _ in range(n_tensors)]
        base = {"tensors": n_tensors, "numel": numel}
        record(results, "foreach_lerp_", base, lambda: torch._foreach_lerp_(xs, ys, 0.1))
        record(results, "foreach_addcmul_", base, lambda: torch._foreach_addcmul_(xs, ys, ys, 0.1))


def extras(results: list, quick: bool) -> None:
    """Memory-bound kinds the first profile did not cover (issue 10): norms at widths that are not a multiple
    of the vector size, group norm, RMS norm, embedding bags, index and scatter ops, sort/topk/cumsum."""
    for width, dtype in itertools.product([96, 192, 384, 770, 1023, 2040, 2041, 4095], (torch.float32, torch.bfloat16)):
        rows = max((1 << 24) // width, 1)
        x, w, b = randn(rows, width, dtype=dtype), randn(width, dtype=dtype), randn(width, dtype=dtype)
        out, mean, rstd = aten.native_layer_norm(x, [width], w, b, 1e-5)
        g = torch.randn_like(out)
        base = {"rows": rows, "width": width, "dtype": str(dtype)[6:]}
        record(results, "layer_norm_fwd", base, lambda: aten.native_layer_norm(x, [width], w, b, 1e-5))
        record(results, "layer_norm_bwd", base, lambda: aten.native_layer_norm_backward(
            g, x, [width], mean, rstd, w, b, [True, True, True]))
        if hasattr(aten, "_fused_rms_norm"):
            xr = x.detach().requires_grad_(True)
            record(results, "rms_norm_fwd", base, lambda: aten._fused_rms_norm(x, [width], w, 1e-5))
            record(results, "rms_norm_fwd_bwd", base,
                   lambda: torch.autograd.grad(torch.nn.functional.rms_norm(xr, [width], w, 1e-5), xr, g))
    for (n, c, hw), dtype in itertools.product([(8, 128, 32), (8, 256, 32), (16, 256, 64), (4, 512, 16), (32, 64, 56)],
                                              (torch.float32, torch.bfloat16)):
        x, w, b = randn(n, c, hw, hw, dtype=dtype), randn(c, dtype=dtype), randn(c, dtype=dtype)
        out, mean, rstd = aten.native_group_norm(x, w, b, n, c, hw * hw, 32, 1e-5)
        g = torch.randn_like(out)
        base = {"n": n, "c": c, "size": hw, "dtype": str(dtype)[6:]}
        record(results, "group_norm_fwd", base, lambda: aten.native_group_norm(x, w, b, n, c, hw * hw, 32, 1e-5))
        record(results, "group_norm_bwd", base, lambda: aten.native_group_norm_backward(
            g, x, mean, rstd, w, n, c, hw * hw, 32, [True, True, True]))
    for (rows, dim, batch, bag), mode in itertools.product([(100_000, 64, 2048, 20), (1_000_000, 128, 4096, 8),
                                                             (10_000, 32, 512, 50)], (0, 1)):
        weight = randn(rows, dim, dtype=torch.float32)
        idx = torch.randint(0, rows, (batch * bag,), device=DEV)
        offsets = torch.arange(0, batch * bag, bag, device=DEV)
        base = {"rows": rows, "dim": dim, "batch": batch, "bag": bag, "mode": ["sum", "mean"][mode]}
        record(results, "embedding_bag_fwd", base, lambda: aten._embedding_bag(weight, idx, offsets, False, mode))
        wg = weight.detach().requires_grad_(True)
        gbag = randn(batch, dim, dtype=torch.float32)
        record(results, "embedding_bag_fwd_bwd", base, lambda: torch.autograd.grad(
            torch.nn.functional.embedding_bag(idx, wg, offsets, mode=["sum", "mean"][mode]), wg, gbag))
    for (n_src, n_idx, dim), dtype in itertools.product([(50_000, 500_000, 128), (20_000, 200_000, 64),
                                                          (4096, 8192, 512), (100_000, 1000, 256)],
                                                         (torch.float32, torch.bfloat16)):
        src = randn(n_src, dim, dtype=dtype)
        idx = torch.randint(0, n_src, (n_idx,), device=DEV)
        upd = randn(n_idx, dim, dtype=dtype)
        base = {"rows": n_src, "indices": n_idx, "dim": dim, "dtype": str(dtype)[6:]}
        record(results, "index_select", base, lambda: aten.index_select(src, 0, idx))
        record(results, "index_add_", base, lambda: src.index_add_(0, idx, upd))
        record(results, "index_put_accumulate", base, lambda: aten._index_put_impl_(src, (idx,), upd, True, False))
        idx2 = idx[:, None].expand(-1, dim)
        record(results, "scatter_add_", base, lambda: src.scatter_add_(0, idx2, upd))
        record(results, "gather", base, lambda: aten.gather(upd, 0, torch.remainder(idx2, n_idx)))
        record(results, "scatter_reduce_amax", base, lambda: src.scatter_reduce(0, idx2, upd, "amax"))
    for (rows, cols), dtype in itertools.product([(1, 1 << 20), (4096, 1024), (65536, 8), (256, 32000), (1024, 50304)],
                                                 (torch.float32, torch.bfloat16)):
        x = randn(rows, cols, dtype=dtype)
        base = {"rows": rows, "cols": cols, "dtype": str(dtype)[6:]}
        record(results, "sort", base, lambda: aten.sort(x, -1))
        record(results, "cumsum", base, lambda: aten.cumsum(x, -1))
        for k in (2, 8, 50):
            if k < cols:
                record(results, "topk", {**base, "k": k}, lambda: aten.topk(x, k, -1))


def extras2(results: list, quick: bool) -> None:
    """Kinds the zoo showed too thinly calibrated (issue 10's second sweep): batch norm (NCHW and NHWC, fp32,
    bf16 with fp32 statistics as autocast runs it, fp16; 1-d and 2-d; training forward and backward, eval),
    pooling, grouped and depthwise convolution passes, and addmm with an untransposed weight (GPT-2's Conv1D) at
    decode-shaped M in fp32 and bf16."""
    shapes = [(8, 64, 112), (32, 64, 56), (32, 256, 56), (64, 128, 28), (32, 512, 14), (128, 2048, 7),
              (16, 32, 224), (64, 1024, 14)]
    def batch_norm_cases(x: torch.Tensor, base: dict) -> None:
        """Through F.batch_norm, as models call it (cuDNN's kernels where CUDA picks them): training forward,
        eval forward, and the backward alone (on a graph built outside the timed call)."""
        c = x.shape[1]
        w, b = randn(c, dtype=torch.float32), randn(c, dtype=torch.float32)
        rm, rv = torch.zeros(c, device=DEV), torch.ones(c, device=DEV)
        bn = torch.nn.functional.batch_norm
        record(results, "batch_norm_train", base, lambda: bn(x, rm, rv, w, b, True))
        record(results, "batch_norm_eval", base, lambda: bn(x, rm, rv, w, b, False))
        xg = x.detach().requires_grad_(True)
        out = bn(xg, rm, rv, w, b, True)
        g = torch.randn_like(out)
        record(results, "batch_norm_bwd", base, lambda: torch.autograd.grad(out, xg, g, retain_graph=True))

    for (n, c, hw), dtype, cl in itertools.product(shapes, (torch.float32, torch.bfloat16, torch.float16),
                                                   (False, True)):
        fmt = torch.channels_last if cl else torch.contiguous_format
        batch_norm_cases(randn(n, c, hw, hw, dtype=dtype).contiguous(memory_format=fmt),
                         {"n": n, "c": c, "size": hw, "dtype": str(dtype)[6:], "channels_last": cl})
    for (n, c, length), dtype in itertools.product([(8, 256, 9600), (8, 256, 300), (32, 512, 1000), (16, 80, 3000)],
                                                   (torch.float32, torch.bfloat16)):
        batch_norm_cases(randn(n, c, length, dtype=dtype),
                         {"n": n, "c": c, "length": length, "dtype": str(dtype)[6:]})
    for (n, c, hw), dtype, cl in itertools.product([(32, 64, 112), (64, 64, 112), (16, 256, 28)],
                                                   (torch.float32, torch.bfloat16), (False, True)):
        fmt = torch.channels_last if cl else torch.contiguous_format
        x = randn(n, c, hw, hw, dtype=dtype).contiguous(memory_format=fmt).requires_grad_(True)
        base = {"n": n, "c": c, "size": hw, "dtype": str(dtype)[6:], "channels_last": cl}
        out, idx = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])
        g = torch.randn_like(out)
        record(results, "max_pool2d", base, lambda: aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1]))
        record(results, "max_pool2d_bwd", base, lambda: aten.max_pool2d_with_indices_backward(
            g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, idx))
        record(results, "adaptive_avg_pool2d", base, lambda: aten._adaptive_avg_pool2d(x, [1, 1]))
    for (n, c, hw, k, s), groups, dtype, cl in itertools.product(
            [(64, 1024, 14, 3, 2), (32, 256, 56, 3, 1), (32, 512, 28, 3, 2), (16, 96, 56, 7, 1), (64, 384, 14, 7, 1),
             (32, 64, 112, 3, 1), (32, 768, 7, 3, 1)], ("depthwise", 32), (torch.float16, torch.bfloat16, torch.float32),
            (False, True)):
        g_count = c if groups == "depthwise" else groups
        fmt = torch.channels_last if cl else torch.contiguous_format
        x = randn(n, c, hw, hw, dtype=dtype).contiguous(memory_format=fmt)
        w = randn(c, c // g_count, k, k, dtype=dtype).contiguous(memory_format=fmt)
        args = ([s, s], [k // 2, k // 2], [1, 1], False, [0, 0], g_count)
        out = aten.convolution(x, w, None, *args)
        gout = torch.randn_like(out)
        base = {"n": n, "c_in": c, "c_out": c, "kernel": k, "stride": s, "size": hw, "groups": g_count,
                "dtype": str(dtype)[6:], "channels_last": cl}
        record(results, "conv_fwd", base, lambda: aten.convolution(x, w, None, *args))
        record(results, "conv_bwd_input", base, lambda: aten.convolution_backward(gout, x, w, None, *args,
                                                                                [True, False, False]))
        record(results, "conv_bwd_weight", base, lambda: aten.convolution_backward(gout, x, w, None, *args,
                                                                                 [False, True, False]))
    for m, (n, k), dtype in itertools.product([1, 2, 4, 8, 16, 32, 64, 128, 512, 2048],
                                              [(2304, 768), (768, 768), (3072, 768), (768, 3072), (4096, 4096)],
                                              (torch.float32, torch.bfloat16)):
        a, w, bias = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype), randn(n, dtype=dtype)
        record(results, "addmm_nn", {"m": m, "n": n, "k": k, "dtype": str(dtype)[6:]},
               lambda: aten.addmm(bias, a, w))


SECTIONS = {"gemm": gemms, "conv": convs, "reduce": reductions, "attention": attention, "norms": norms_and_more,
            "elementwise": elementwise, "extras": extras, "extras2": extras2}


def run_all(quick: bool = False, sections: list[str] | None = None, log: Callable[[str], None] = print) -> list:
    """The named sections (the default ones where None), each case appended to the list returned."""
    from .grids import DEFAULT_GRIDS, EXTRA_SECTIONS  # (grids.py imports this module's row and batch-norm recorders)

    torch.manual_seed(0)
    results: list = []
    names = sections or [*SECTIONS, *DEFAULT_GRIDS]
    every = {**SECTIONS, **EXTRA_SECTIONS}
    progress.stage("microbenchmarks", total=len(names))
    for name in names:
        t0 = time.perf_counter()
        before = len(results)
        every[name](results, quick)
        torch.cuda.empty_cache()
        log(f"{name}: {len(results) - before} cases in {time.perf_counter() - t0:.1f} s")
        progress.advance()
    return results
