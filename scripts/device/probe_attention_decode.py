"""Decode-shaped attention on the H200: how long cuDNN's fused kernel takes for one query against a short cache,
with the cache hot in L2 (as in a generation loop) and after an L2 flush (as the sweep's attention_decode times
it), with contiguous and with GPT-2-style strided queries (a view of the fused qkv projection).

    PYTHONPATH=src python3 scripts/device/probe_attention_decode.py --out $OUT/attention_decode_probe.json

Each point: REPEATS calls under torch.profiler, the median of the calls' kernel-duration sums (µs), and the
spread (min, max). Written to answer why the zoo's greedy generate() (validation/zoo_issue31_measured.json.gz)
measured 3.1 µs per decode attention call where the profile's decode rows at nearby sizes read 6-48 µs.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.autograd import DeviceType
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile, record_function

REPEATS = 25
BATCH_HEADS = ((4, 12), (1, 12), (8, 16), (2, 32))
KEYS = (40, 128, 256, 512, 1024)
HEAD_DIMS = (64, 128)


def _queries(batch: int, heads: int, d: int, strided: bool) -> torch.Tensor:
    if not strided:
        return torch.randn(batch, heads, 1, d, device="cuda", dtype=torch.bfloat16)
    qkv = torch.randn(batch, 1, 3 * heads * d, device="cuda", dtype=torch.bfloat16)
    return qkv.split(heads * d, dim=2)[0].view(batch, 1, heads, d).transpose(1, 2)


def _point(batch, heads, sk, d, strided, flush) -> dict:
    q = _queries(batch, heads, d, strided)
    k = torch.randn(batch, heads, sk, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    scratch = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(REPEATS):
                if flush:
                    scratch.zero_()
                with record_function(f"call{i}"):
                    F.scaled_dot_product_attention(q, k, v)
            torch.cuda.synchronize()
    kernels = sorted((e.time_range.start, e.time_range.elapsed_us(), e.name) for e in prof.events()
                     if e.device_type == DeviceType.CUDA)
    attention = [us for _, us, name in kernels if "zero" not in name.lower() and "fill" not in name.lower()
                 and "memset" not in name.lower()]
    per_call = max(len(attention) // REPEATS, 1)
    sums = [sum(attention[i:i + per_call]) for i in range(0, per_call * REPEATS, per_call)]
    sums = [s for s in sums if s > 0]
    return {"batch": batch, "heads": heads, "sk": sk, "d": d, "strided_q": strided, "l2_flush": flush,
            "median_us": round(statistics.median(sums), 3), "min_us": round(min(sums), 3),
            "max_us": round(max(sums), 3), "calls": len(sums), "kernels_per_call": per_call}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    for batch, heads in BATCH_HEADS:
        for sk in KEYS:
            for d in HEAD_DIMS:
                for strided in (False, True):
                    for flush in (False, True):
                        row = _point(batch, heads, sk, d, strided, flush)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "command": "PYTHONPATH=src python3 scripts/device/probe_attention_decode.py --out OUT", "rows": rows}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
