"""Issue 12's scale check: a Llama-70B-shaped model (transformers' LlamaConfig at Llama-2/3-70B's sizes), FSDP2 at
world size 8 (example:llama_fsdp's wrapping: fully_shard per decoder layer and the root, bf16 compute through the
mixed-precision policy, fp32 sharded parameters and fused AdamW), captured as rank 0 of torch's fake process
group on this CPU-only machine, and its memory predicted per rank.

    python3 scripts/eval/llama70b_memory.py [--batch 1] [--seq 4096] [--gpu h200] [--checkpoint] [--json OUT]

Prints the capture's wall time and this process's peak RSS (ru_maxrss), the ops captured, and the per-rank
memory prediction (peak, resident, reserved, by category, the verdict on the GPU).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import kernelcast  # noqa: F401  (before torch)

from kernelcast.capture import capture_workload
from kernelcast.whatif.transforms import checkpoint_layers
from kernelcast.predict import predict_capture
from kernelcast.predict.memory import memory_json
from kernelcast.report.memory_text import human_bytes

# Llama-2-70B / Llama-3-70B: 8192 wide, 80 layers, 64 query and 8 key/value heads, SwiGLU 28672 (Llama 3's vocab).
SIZES = {"hidden": 8192, "intermediate": 28672, "heads": 64, "kv_heads": 8, "layers": 80, "vocab": 128256}
WORLD_SIZE = 8


def build(batch: int, seq: int):
    """As torchtitan builds it: the model on the meta device, sharded, then given (sharded) CUDA memory; the
    full 70B model never exists on one GPU (its fp32 parameters alone are 280 GB)."""
    from kernelcast.examples.llama import make_model, training_step
    from kernelcast.examples.llama_fsdp import STEP_OPTIONS, wrap

    model = wrap(make_model(**SIZES, seq=seq, device="meta"))
    model.to_empty(device="cuda")
    return training_step(model, batch=batch, seq=seq, vocab=SIZES["vocab"], **STEP_OPTIONS)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--json")
    parser.add_argument("--checkpoint", action="store_true",
                        help="activation checkpointing of each decoder layer (memory_fixes.checkpoint_layers)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    cap = capture_workload(lambda: build(args.batch, args.seq), args.gpu, workload="llama-70b fsdp2",
                           world_size=WORLD_SIZE, prepare=checkpoint_layers if args.checkpoint else None)
    capture_s = time.perf_counter() - t0
    pred = predict_capture(cap, args.gpu, interconnect="nvlink")
    total_s = time.perf_counter() - t0
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30  # ru_maxrss is KiB on Linux
    mem = pred.memory
    params = sum(a.nbytes for a in cap.memory.allocations if a.label == "parameters")
    print(f"Llama-70B shape, FSDP2 at world size {WORLD_SIZE}, batch {args.batch} x {args.seq} tokens per rank"
          + (", each decoder layer checkpointed" if args.checkpoint else ""))
    print(f"capture {capture_s:.1f} s, capture + prediction {total_s:.1f} s, peak RSS {rss_gib:.2f} GiB, "
          f"{len(cap.ops)} ops, {len(cap.memory.allocations)} storages")
    print(f"per rank: peak {human_bytes(mem.peak_bytes)}, resident {human_bytes(mem.resident_bytes)}, reserved "
          f"{human_bytes(mem.reserved_bytes)}; sharded fp32 parameters {human_bytes(params)}")
    print("at the peak: " + ", ".join(f"{k} {human_bytes(v)}" for k, v in mem.by_category.items() if v))
    fit = mem.fit
    print(f"on {pred.gpu.name}: {'fits' if fit.fits else 'OUT OF MEMORY'} ({human_bytes(fit.peak_reserved_bytes)} "
          f"reserved at most of {human_bytes(fit.usable_bytes)} usable); step {pred.step_time_us / 1000:.1f} ms")
    if args.json:
        doc = {"capture_s": capture_s, "total_s": total_s, "peak_rss_bytes": int(rss_gib * 2**30), "ops": len(cap.ops),
               **memory_json(pred)}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
