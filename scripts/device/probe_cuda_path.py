"""Device probe for the CUDA-path rules that the zoo could not settle (run on a GPU; no kernelcast needed).

    python3 scripts/device/probe_cuda_path.py --out $OUT/cuda_path_probe.json

Measures, with torch.profiler, the GPU work items (kernels, memsets, memcpys) of:
- cuDNN attention forward by query length (1 to 128 rows against 1024 keys, bf16, head dim 128, 16 query
  heads over 16 or 4 key/value heads): where cuDNN stops launching its workspace memset (capture: 1 item for a
  single query, 2 beyond; transformers >= 5.24 folds grouped heads into the query when decoding);
- the backend torch._fused_sdp_choice picks for head dims 128, 160, 192 (with 128 for v) and 256 (cuDNN's
  head-dim limit on sm90 depends on the cuDNN and cudnn-frontend versions: capture/attention.py assumes 256);
- torch.sort of 1-D float32 and int64 tensors from 4096 to 1M elements (beyond 4096 cub's radix sort runs;
  costs/elementwise.py counted it as one item).
Run on the H200 (torch 2.11, cuDNN 9.19): validation/probes/cuda_path_probe.json; the rules now follow it
(costs/attention.py, capture/attention.py, costs/data_dependent.py sort_kernels, costs/cub.py).
"""

from __future__ import annotations

import argparse
import json

import torch
from torch.profiler import ProfilerActivity, profile

BACKENDS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn"}


def work_items(fn) -> int:
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def attention_items() -> list[dict]:
    rows = []
    for kv_heads in (16, 4):
        for seq_q in (1, 2, 4, 8, 16, 32, 48, 64, 128):
            q = torch.randn(8, 16, seq_q, 128, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(8, kv_heads, 1024, 128, device="cuda", dtype=torch.bfloat16)
            fn = lambda: torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, k, None, False, 0.0, False,
                                                                               False)
            try:
                rows.append({"seq_q": seq_q, "kv_heads": kv_heads, "items": work_items(fn)})
            except RuntimeError as exc:
                rows.append({"seq_q": seq_q, "kv_heads": kv_heads, "error": str(exc)[:200]})
    return rows


def backend_by_head_dim() -> list[dict]:
    rows = []
    for d_qk, d_v in ((128, 128), (160, 160), (192, 128), (192, 192), (256, 256)):
        q = torch.randn(2, 8, 256, d_qk, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(2, 8, 256, d_v, device="cuda", dtype=torch.bfloat16)
        choice = torch._fused_sdp_choice(q, q, v)
        rows.append({"d_qk": d_qk, "d_v": d_v, "backend": BACKENDS.get(int(choice), str(choice))})
    return rows


def sort_items() -> list[dict]:
    rows = []
    for dtype in (torch.float32, torch.int64):
        for n in (4096, 4097, 8192, 65536, 1 << 20):
            x = (torch.randn(n, device="cuda") * 1000).to(dtype)
            rows.append({"dtype": str(dtype), "n": n, "items": work_items(lambda: torch.sort(x))})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    doc = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "device": torch.cuda.get_device_name(), "attention_items": attention_items(),
           "backend_by_head_dim": backend_by_head_dim(), "sort_items": sort_items()}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
