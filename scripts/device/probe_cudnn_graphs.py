"""What a cuDNN attention call costs the host at a shape the process has not run before (issue 31).

    PYTHONPATH=src python3 scripts/device/probe_cudnn_graphs.py --out $OUT/cudnn_graphs.json   # on the GPU, ~1 min

PyTorch's cuDNN attention (aten/src/ATen/native/cudnn/MHA.cpp) builds a cuDNN graph per shape and caches it by
the shape (batch, heads, query and key lengths, head dim, strides, dtype, ...): a call at a new shape builds one.
The zoo's one-token GPT-2 decode step over a DynamicCache that grows every call (gpt2_decode_dynamic_cache) runs
247 kernels of 0.75 ms and measured 73-77 ms a step on the H200's host, kernelcast 9.1 ms; the generate() loops,
whose calls repeat the same lengths, are not slow. Here, for each case: the first call at a new shape and the
median of later calls at that shape, each between torch.cuda.synchronize() calls on a host timer; a decode loop
whose key length grows by one each call, against the same loop replayed at lengths it has already run; and the
backward (a training step at a new shape). The difference first - later is the graph's build.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernelcast.measure import require_gpu, synced_ms

LATER = 15
# (batch, heads, query length, key length, head dim, dtype): decode and prefill shapes of common models
CASES = [(4, 12, 1, 300, 64, torch.bfloat16), (4, 12, 1, 301, 64, torch.bfloat16), (1, 32, 1, 1000, 128, torch.bfloat16),
         (8, 16, 1, 500, 64, torch.float16), (4, 12, 128, 128, 64, torch.bfloat16), (2, 16, 512, 512, 128, torch.bfloat16),
         (32, 12, 197, 197, 64, torch.bfloat16), (4, 12, 1, 2000, 64, torch.bfloat16)]
LOOP_STEPS = 12


def attention(q, k, v):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v)


def qkv(b, h, sq, skv, d, dtype, grad=False):
    make = lambda s: torch.randn(b, h, s, d, device="cuda", dtype=dtype, requires_grad=grad)  # noqa: E731
    return make(sq), make(skv), make(skv)


def first_and_later(call) -> dict:
    first = synced_ms(call, 1)[0]
    later = synced_ms(call, LATER)
    return {"first_ms": round(first, 4), "later_ms": round(statistics.median(later), 4),
            "build_ms": round(first - statistics.median(later), 4)}


def case_rows() -> list[dict]:
    rows = []
    for b, h, sq, skv, d, dtype in CASES:
        q, k, v = qkv(b, h, sq, skv, d, dtype)
        row = {"batch": b, "heads": h, "sq": sq, "skv": skv, "d": d, "dtype": str(dtype).split(".")[-1],
               "pass": "forward", **first_and_later(lambda: attention(q, k, v))}
        rows.append(row)
        if sq > 1:  # a training step's shape: forward and backward at a new shape
            q, k, v = qkv(b, h, sq, skv + 1, d, dtype, grad=True)
            rows.append({**row, "skv": skv + 1, "pass": "forward+backward",
                         **first_and_later(lambda: attention(q, k, v).sum().backward())})
    return rows


def decode_loop(start: int, forced: bool = True) -> dict:
    """LOOP_STEPS one-token calls over keys growing by one each call (new shapes), then the same lengths again;
    forced onto cuDNN's backend, or as PyTorch picks it (`forced` False)."""
    b, h, d, dtype = 4, 12, 64, torch.bfloat16
    q = torch.randn(b, h, 1, d, device="cuda", dtype=dtype)
    keys = torch.randn(b, h, start + LOOP_STEPS, d, device="cuda", dtype=dtype)

    def run() -> list[float]:
        out = []
        for i in range(LOOP_STEPS):
            k = keys[:, :, :start + i].contiguous()
            call = (lambda: attention(q, k, k)) if forced else (lambda: F.scaled_dot_product_attention(q, k, k))
            out.extend(synced_ms(call, 1))
        return out

    new, seen = run(), run()
    return {"start": start, "steps": LOOP_STEPS, "backend": "cudnn" if forced else "default", "new_shapes_ms": [round(x, 4) for x in new],
            "seen_shapes_ms": [round(x, 4) for x in seen], "new_median_ms": round(statistics.median(new), 4),
            "seen_median_ms": round(statistics.median(seen), 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    require_gpu()
    torch.zeros(1, device="cuda")
    t0 = time.perf_counter()
    attention(*qkv(1, 1, 8, 8, 64, torch.bfloat16))  # cuDNN's own first-use set-up, apart from any shape's
    doc = {"command": "PYTHONPATH=src python3 scripts/device/probe_cudnn_graphs.py --out OUT",
           "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"),
           "first_use_ms": round((time.perf_counter() - t0) * 1e3, 2),
           "cases": case_rows(), "decode_loops": [decode_loop(257), decode_loop(1025), decode_loop(3001, forced=False)]}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    for r in doc["cases"]:
        print(f"{r['pass']:17s} b{r['batch']} h{r['heads']} {r['sq']}x{r['skv']} d{r['d']} {r['dtype']}: first "
              f"{r['first_ms']:.2f} ms, later {r['later_ms']:.3f} ms")
    for loop in doc["decode_loops"]:
        print(f"decode loop ({loop['backend']}) from {loop['start']}: new shapes {loop['new_median_ms']:.3f} ms a call, "
              f"seen {loop['seen_median_ms']:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
