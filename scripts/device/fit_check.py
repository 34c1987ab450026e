"""Issue 12's device check of `kernelcast fit`: the largest batch predicted to fit is run on a GPU, and so is the
next batch up; the first must fit and the second must run out of memory, for every model.

The GPU is given a memory limit for PyTorch's caching allocator with torch.cuda.set_per_process_memory_fraction
(LIMIT_BYTES, an L4-sized 24 GB by default), so an H200 answers for a smaller card; the prediction is judged
against the same limit (predict_memory's limit_bytes; the CUDA context is outside the limit on both sides).
Each run is a fresh subprocess (a clean allocator): WARMUP steps then one more, as a training loop runs them;
out of memory anywhere in build() or the steps is "oom".

On the device machine (one GPU, kernelcast's checkout, transformers installed):

    PYTHONPATH=src python3 scripts/device/fit_check.py --out $OUT/fit_check.json

That predicts each model's largest batch there (a capture per tried batch, on fake tensors), then runs batch b
and b + 1 on the GPU. To predict here instead (CPU) and only measure there:

    PYTHONPATH=src python3 scripts/device/fit_check.py --predict-only --out fit_predicted.json      # any machine
    PYTHONPATH=src python3 scripts/device/fit_check.py --predicted fit_predicted.json --out $OUT/fit_check.json  # GPU

The output lists, per model: the predicted max batch (with its predicted peak and reserved bytes), the measured
outcome at b and b + 1 (fits/oom, max_memory_allocated, memory_reserved), and whether the prediction was right;
plus the device's total memory and the CUDA context's own share (memory the driver reports used, less what
PyTorch reserved, right after initialisation), which pins predict/memory.py's CUDA_CONTEXT_BYTES assumption.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 24 * 10**9  # an L4's datasheet memory
MODELS = (  # (workload, batch range searched); each build() takes `batch`
    ("example:gpt", (1, 256)),  # GPT-2 small, bf16 autocast, AdamW
    ("example:cnn", (1, 16384)),  # ResNet-style CNN, channels_last, bf16 autocast, SGD with momentum
    ("example:llama", (1, 64)),  # transformers Llama 483M, bf16 autocast, fused AdamW
)
WARMUP = 2  # steps before the one that counts (optimizer state exists from the first)
RUN_TIMEOUT_S = 900


def predict(limit_bytes: int, gpu: str, only: list[str] | None = None) -> list[dict]:
    """The largest batch that fits under the limit, per model (kernelcast's fit search, memory judged against
    the allocator limit)."""
    import kernelcast  # noqa: F401  (before torch)

    from kernelcast.api import capture_file
    from kernelcast.devices import get_gpu
    from kernelcast.whatif.fit import largest_fitting
    from kernelcast.predict.memory import predict_memory

    out = []
    for spec, (low, high) in MODELS:
        if only and spec not in only:
            continue
        memory: dict[int, object] = {}

        def fits(batch: int) -> bool:
            mem = predict_memory(capture_file(spec, gpu, 1, {"batch": batch}), get_gpu(gpu), limit_bytes=limit_bytes)
            memory[batch] = mem
            print(f"  predicted {spec} batch {batch}: {'fits' if mem.fit.fits else 'oom'}", flush=True)
            return mem.fit.fits

        t0 = time.perf_counter()
        search = largest_fitting(fits, low, high)
        mem = memory.get(search.max_fit)
        out.append({"workload": spec, "max_batch": search.max_fit, "first_oom_batch": search.first_oom,
                    "predicted_peak_bytes": None if mem is None else mem.peak_bytes,
                    "predicted_reserved_bytes": None if mem is None else mem.fit.peak_reserved_bytes,
                    "tried": [list(t) for t in search.tried], "seconds": round(time.perf_counter() - t0, 1)})
    return out


def run_one(spec: str, batch: int, limit_bytes: int) -> dict:
    """In this (fresh) process: limit the allocator, build with `batch`, run WARMUP + 1 steps."""
    import kernelcast  # noqa: F401
    import torch

    from kernelcast.capture.workload import load_build, on_sys_path

    torch.cuda.init()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(limit_bytes / total)
    build, folder = load_build(spec)
    try:
        with on_sys_path(folder) if folder else _nothing():
            step, args = build(batch=batch)
            for _ in range(WARMUP):
                step(*args)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            step(*args)
            torch.cuda.synchronize()
        outcome = "fits"
    except torch.cuda.OutOfMemoryError as exc:
        outcome, error = "oom", str(exc).splitlines()[0][:300]
    result = {"outcome": outcome, "max_allocated": torch.cuda.max_memory_allocated(),
              "reserved": torch.cuda.memory_reserved()}
    if outcome == "oom":
        result["error"] = error
    return result


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def context_bytes() -> dict:
    """The device's total memory and the CUDA context's share right after a first allocation and a matmul
    (cuBLAS loaded): used by the driver, less what PyTorch's allocator reserved."""
    import torch

    x = torch.ones(1024, 1024, device="cuda")
    (x @ x).sum().item()
    free, total = torch.cuda.mem_get_info()
    return {"total_bytes": total, "used_bytes": total - free, "reserved_bytes": torch.cuda.memory_reserved(),
            "context_bytes": total - free - torch.cuda.memory_reserved(), "device": torch.cuda.get_device_name()}


def measure(predicted: list[dict], limit_bytes: int) -> list[dict]:
    rows = []
    for entry in predicted:
        b = entry["max_batch"]
        runs = {}
        for batch in ([b, b + 1] if b is not None else [entry["first_oom_batch"]]):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--run", entry["workload"], str(batch),
                   "--limit-bytes", str(limit_bytes)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=ROOT)
            try:
                runs[batch] = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                runs[batch] = {"outcome": "error", "stderr": proc.stderr[-2000:]}
            print(f"  {entry['workload']} batch {batch}: {runs[batch]['outcome']}", flush=True)
        right = (b is not None and runs[b]["outcome"] == "fits" and runs[b + 1]["outcome"] == "oom")
        rows.append({**entry, "measured": {str(k): v for k, v in runs.items()}, "right": right})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="where to write the results (JSON)")
    parser.add_argument("--limit-bytes", type=int, default=LIMIT_BYTES)
    parser.add_argument("--gpu", default="h200", help="the catalogue GPU whose kernels and workspaces are predicted")
    parser.add_argument("--predict-only", action="store_true", help="only predict (no GPU needed)")
    parser.add_argument("--predicted", help="predictions written by --predict-only, instead of predicting here")
    parser.add_argument("--only", nargs="*", help="only these workloads (e.g. example:cnn)")
    parser.add_argument("--run", nargs=2, metavar=("WORKLOAD", "BATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    if args.run:
        print(json.dumps(run_one(args.run[0], int(args.run[1]), args.limit_bytes)))
        return 0
    if args.predicted:
        predicted = [p for p in json.loads(Path(args.predicted).read_text())["predicted"]
                     if not args.only or p["workload"] in args.only]
    else:
        print(f"predicting the largest batch under {args.limit_bytes / 1e9:.1f} GB ...", flush=True)
        predicted = predict(args.limit_bytes, args.gpu, args.only)
    doc = {"limit_bytes": args.limit_bytes, "gpu": args.gpu, "predicted": predicted}
    if not args.predict_only:
        import torch

        doc["device"] = context_bytes()
        doc["torch"] = torch.__version__
        doc["rows"] = measure(predicted, args.limit_bytes)
        right = sum(r["right"] for r in doc["rows"])
        print(f"right on {right} of {len(doc['rows'])} models (batch b fits, b + 1 runs out of memory)")
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
