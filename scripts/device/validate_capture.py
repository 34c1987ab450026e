"""Compare what kernelcast captures with what a real GPU runs: kernels per step and the op mix.

Run on a machine with a CUDA GPU, from the repository root:

    PYTHONPATH=src python3 scripts/device/validate_capture.py --out $OUT/capture_validation.json

or, on any machine, re-capture the same workloads with the code as it is now and compare them with the
kernels a device run measured (the capture is told the torch version of that run, whose launch rules differ):

    python3 scripts/device/validate_capture.py --predict-only validation/capture_validation.json \
        --out validation/capture_repredicted.json

For each workload it (1) captures the step with kernelcast under fake CUDA, as on a laptop, and counts the
GPU work items (kernels, memcpys, memsets) the cost registry says each op launches; (2) builds the model for
real, warms up, and profiles one step with torch.profiler, attributing every GPU work item to the aten op
that launched it. Then docs are regenerated from the JSON with scripts/eval/report_validation.py.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Iterator

import kernelcast  # noqa: F401  (before torch)
import torch

from kernelcast.capture import capture_workload
from kernelcast.capture.workload import load_build, on_sys_path
from kernelcast.measure import measure_step, packet
from kernelcast.predict import predict_capture

# (name, workload, environment for the workload file)
WORKLOADS = [
    ("gpt2_forward", "examples/hf_models.py:gpt2_forward", {"KC_BATCH": "8", "KC_SEQ": "512"}),
    ("gpt2_train", "examples/hf_models.py:gpt2_train", {"KC_BATCH": "8", "KC_SEQ": "512"}),
    ("llama_forward", "examples/hf_models.py:llama_forward", {"KC_BATCH": "4", "KC_SEQ": "512", "KC_LAYERS": "8"}),
    ("llama_train", "examples/hf_models.py:llama_train", {"KC_BATCH": "2", "KC_SEQ": "512", "KC_LAYERS": "2"}),
    ("bert_train", "examples/hf_models.py:bert_train", {"KC_BATCH": "32", "KC_SEQ": "128"}),
    ("vit_train", "examples/hf_models.py:vit_train", {"KC_BATCH": "32"}),
    ("vit_forward", "examples/hf_models.py:vit_forward", {"KC_BATCH": "64"}),
    ("cnn_train", "example:cnn", {}),
    ("gpt_train_adamw", "example:gpt", {}),
]


def predicted_kernels(cap, pred) -> dict:
    by_op: collections.Counter = collections.Counter()
    for p in pred.ops:
        if p.kernels:
            by_op[packet(p.op)] += p.kernels
    return {"kernels": pred.kernels, "by_op": dict(by_op), "uncosted": list(pred.uncosted),
            "captured_ops": sorted({packet(op.op) for op in cap.ops}),
            "step_time_us": pred.step_time_us, "gpu_time_us": pred.gpu_time_us, "ops": len(cap.ops)}


@contextlib.contextmanager
def _loaded(spec: str, env: dict) -> Iterator[Callable]:
    """The workload's build(), with its environment variables set and its folder importable."""
    os.environ.update(env)
    try:
        build, folder = load_build(spec)
        with on_sys_path(folder) if folder else contextlib.nullcontext():
            yield build
    finally:
        for key in env:
            os.environ.pop(key, None)


# What the re-prediction keeps of a device measurement (the kernel list stays in the device run's JSON).
REPREDICT_MEASURED_KEYS = ("kernels", "by_op")


def repredict_one(saved: dict, gpu: str, torch_version: str) -> dict:
    """The saved workload captured here, its kernels predicted as for the torch the device ran."""
    result = {key: saved[key] for key in ("name", "workload", "env")}
    result["measured"] = {key: saved["measured"][key] for key in REPREDICT_MEASURED_KEYS}
    with _loaded(saved["workload"], saved["env"]) as build:
        cap = capture_workload(build, gpu, workload=saved["workload"])
    cap = dataclasses.replace(cap, settings=dataclasses.replace(cap.settings, torch_version=torch_version))
    result["predicted"] = predicted_kernels(cap, predict_capture(cap, gpu))
    return result


def run_one(name: str, spec: str, env: dict, gpu: str) -> dict:
    result: dict = {"name": name, "workload": spec, "env": env}
    try:
        with _loaded(spec, env) as build:
            t0 = time.perf_counter()
            cap = capture_workload(build, gpu, workload=spec)
            result["capture_s"] = round(time.perf_counter() - t0, 2)
            result["predicted"] = predicted_kernels(cap, predict_capture(cap, gpu))
            step, args = build()
            m = measure_step(step, tuple(args), recorded_ops=set(result["predicted"]["captured_ops"]))
        result["measured"] = {
            "kernels": m.work_items, "attributed": len(m.kernels),
            "by_op": {op: n for op, (n, _) in m.by_op().items()}, "gpu_time_us": m.gpu_time_us,
            "kernel_list": [[k.op, k.name[:120], round(k.duration_us, 3)] for k in m.kernels],
            "step_ms": list(m.step_ms), "step_ms_median": m.step_ms_median,
        }
    except Exception as exc:  # keep going: one broken workload must not lose the others' results
        result["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        result["traceback"] = traceback.format_exc()[-4000:]
    finally:
        torch.cuda.empty_cache()
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--only", nargs="*", help="workload names to run")
    parser.add_argument("--predict-only", help="re-capture here the workloads measured in this JSON")
    args = parser.parse_args()
    if args.predict_only:
        saved = json.loads(Path(args.predict_only).read_text())
        rows = [repredict_one(w, args.gpu, saved["torch"]) for w in saved["workloads"]
                if "measured" in w and (not args.only or w["name"] in args.only)]
        for r in rows:
            p, m = r["predicted"]["kernels"], r["measured"]["kernels"]
            print(f"{r['name']:18s} kernels predicted {p:6d} measured {m:6d} ({(p - m) / m:+.1%})", flush=True)
        meta = {key: saved[key] for key in ("device", "torch", "cuda", "cudnn", "date")}
        Path(args.out).write_text(json.dumps({
            **meta, "measured_in": args.predict_only, "captured_with_torch": torch.__version__,
            "command": "python3 scripts/device/validate_capture.py " + " ".join(sys.argv[1:]), "workloads": rows}, indent=1))
        return 0
    results = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"),
        "command": "PYTHONPATH=src python3 scripts/device/validate_capture.py --out $OUT/capture_validation.json",
        "workloads": [],
    }
    for name, spec, env in WORKLOADS:
        if args.only and name not in args.only:
            continue
        r = run_one(name, spec, env, args.gpu)
        results["workloads"].append(r)
        if "error" in r:
            print(f"{name:18s} ERROR {r['error'][:300]}", flush=True)
        else:
            p, m = r["predicted"]["kernels"], r["measured"]["kernels"]
            print(f"{name:18s} kernels predicted {p:6d} measured {m:6d} ({(p - m) / m:+.1%}); "
                  f"capture {r['capture_s']} s; step {r['measured']['step_ms_median']:.2f} ms", flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
