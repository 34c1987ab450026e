"""Microbenchmark sweep: GPU work items and kernel time of single aten ops over shapes, on a real GPU.

    PYTHONPATH=src python3 scripts/sweep_ops.py --out $OUT/op_sweep.json [--quick]

Each case calls exactly one aten op. After two warm-up calls, REPEATS calls are profiled with
torch.profiler; for each call it records the GPU work items (kernels, memsets, memcpys) by name and their
summed device time. Inputs are random normal data (never zeros). This is the raw material for the launch
counts in kernelcast/costs and for the calibrated kernel-time model.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

aten = torch.ops.aten
REPEATS = 3
DEV = "cuda"


def profile_calls(fn, repeats: int = REPEATS) -> list[dict]:
    fn()
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
            torch.cuda.synchronize()
    items = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                   key=lambda e: e.time_range.start)
    per_call = max(1, len(items) // repeats)
    calls = []
    for r in range(repeats):
        chunk = items[r * per_call:(r + 1) * per_call]
        calls.append({"items": [e.name[:90] for e in chunk],
                      "device_us": sum(e.time_range.end - e.time_range.start for e in chunk)})
    return calls


def record(results: list, kind: str, params: dict, fn) -> None:
    try:
        calls = profile_calls(fn)
        results.append({"kind": kind, **params, "items": calls[-1]["items"], "n_items": len(calls[-1]["items"]),
                        "device_us": statistics.median(c["device_us"] for c in calls),
                        "device_us_all": [round(c["device_us"], 3) for c in calls]})
    except Exception as exc:  # keep sweeping; the failure is data too
        results.append({"kind": kind, **params, "error": f"{type(exc).__name__}: {exc}"[:300]})


def randn(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=dtype)


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
            del a, b, bias, w, g


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

    for (b, h, s, d), backend in itertools.product(
            [(8, 12, 512, 64), (4, 32, 512, 128), (2, 8, 2048, 64), (32, 12, 128, 64)],
            [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        q, k, v = (torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        base = {"b": b, "h": h, "s": s, "d": d, "backend": backend.name}
        with sdpa_kernel([backend]):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            grad = torch.randn_like(out)
            record(results, "sdpa_fwd", base,
                   lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
            record(results, "sdpa_fwd_bwd", base, lambda: torch.autograd.grad(
                torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), grad))


def norms_and_more(results: list, quick: bool) -> None:
    for rows, width, dtype in itertools.product([4096, 16384], [768, 4096], (torch.bfloat16, torch.float32)):
        x, w, bsz = randn(rows, width, dtype=dtype), randn(width, dtype=dtype), randn(width, dtype=dtype)
        out, mean, rstd = aten.native_layer_norm(x, [width], w, bsz, 1e-5)
        g = torch.randn_like(out)
        base = {"rows": rows, "width": width, "dtype": str(dtype)[6:]}
        record(results, "layer_norm_fwd", base, lambda: aten.native_layer_norm(x, [width], w, bsz, 1e-5))
        record(results, "layer_norm_bwd", base, lambda: aten.native_layer_norm_backward(
            g, x, [width], mean, rstd, w, bsz, [True, True, True]))
        record(results, "softmax_fwd", base, lambda: aten._softmax(x, -1, False))
        logp = aten._log_softmax(x.float(), -1, False)
        target = torch.randint(0, width, (rows,), device=DEV)
        record(results, "nll_loss_fwd", base, lambda: aten.nll_loss_forward(logp, target, None, 1, -100))
    for (n, c, hw), cl, train in itertools.product([(64, 64, 56), (64, 256, 14)], (True, False), (True, False)):
        fmt = torch.channels_last if cl else torch.contiguous_format
        x = randn(n, c, hw, hw, dtype=torch.float32).to(memory_format=fmt).bfloat16()
        w, bsz = randn(c, dtype=torch.float32), randn(c, dtype=torch.float32)
        rm, rv = torch.zeros(c, device=DEV), torch.ones(c, device=DEV)
        base = {"n": n, "c": c, "size": hw, "channels_last": cl, "training": train}
        record(results, "native_batch_norm", base, lambda: aten.native_batch_norm(x, w, bsz, rm, rv, train, 0.1, 1e-5))
        out, sm, si = aten.native_batch_norm(x, w, bsz, rm, rv, True, 0.1, 1e-5)
        g = torch.randn_like(out)
        if train:
            record(results, "native_batch_norm_bwd", base, lambda: aten.native_batch_norm_backward(
                g, x, w, rm, rv, sm, si, True, 1e-5, [True, True, True]))
    for n_idx, vocab in [(512, 50257), (3072, 50257), (3073, 50257), (8192, 50257), (4096, 2), (65536, 32000)]:
        g = randn(n_idx, 768, dtype=torch.float32)
        idx = torch.randint(0, vocab, (n_idx,), device=DEV)
        record(results, "embedding_bwd", {"indices": n_idx, "vocab": vocab},
               lambda: aten.embedding_dense_backward(g, idx, vocab, -1, False))


def elementwise(results: list, quick: bool) -> None:
    for nbytes in [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]:
        n = nbytes // 4
        x, y = randn(n, dtype=torch.float32), randn(n, dtype=torch.float32)
        base = {"bytes_per_tensor": nbytes}
        record(results, "add_fp32", base, lambda: aten.add.Tensor(x, y))
        record(results, "copy_fp32", base, lambda: aten.clone(x))
        record(results, "to_bf16", base, lambda: aten._to_copy(x, dtype=torch.bfloat16))


SECTIONS = {"gemm": gemms, "conv": convs, "reduce": reductions, "attention": attention, "norms": norms_and_more,
            "elementwise": elementwise}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sections", nargs="*", default=list(SECTIONS))
    args = parser.parse_args()
    torch.manual_seed(0)
    results: list = []
    for name in args.sections:
        t0 = time.perf_counter()
        SECTIONS[name](results, args.quick)
        torch.cuda.empty_cache()
        print(f"{name}: {sum(1 for r in results if r['kind'].startswith(''))} cases so far, "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"),
            "command": "PYTHONPATH=src python3 scripts/sweep_ops.py --out $OUT/op_sweep.json"}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "cases": results}, f)
    errors = [r for r in results if "error" in r]
    print(f"{len(results)} cases, {len(errors)} errors", flush=True)
    for r in errors[:5]:
        print("  error:", r["kind"], r["error"][:200])


if __name__ == "__main__":
    main()
