"""Compare what kernelcast captures with what a real GPU runs: kernels per step and the op mix.

Run on a machine with a CUDA GPU, from the repository root:

    PYTHONPATH=src python3 scripts/validate_capture.py --out $OUT/capture_validation.json

For each workload it (1) captures the step with kernelcast under fake CUDA, as on a laptop, and counts the
GPU work items (kernels, memcpys, memsets) the cost registry says each op launches; (2) builds the model for
real, warms up, and profiles one step with torch.profiler, attributing every GPU work item to the aten op
that launched it. Then docs are regenerated from the JSON with scripts/report_validation.py.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import kernelcast  # noqa: F401  (before torch)
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from kernelcast.capture import capture_workload
from kernelcast.capture.workload import load_build, on_sys_path
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
AUTOCAST_CAST = "_to_copy"
WARMUP_STEPS = 3
TIMED_STEPS = 10


def packet(name: str) -> str:
    """"aten::mm" / "aten.mm.default" -> "mm"."""
    name = name.replace("aten::", "aten.")
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "aten" else name


def predicted_kernels(cap, pred) -> dict:
    by_op: collections.Counter = collections.Counter()
    for p in pred.ops:
        if p.kernels:
            by_op[packet(p.op)] += p.kernels
    return {"kernels": pred.kernels, "by_op": dict(by_op), "uncosted": list(pred.uncosted),
            "captured_ops": sorted({packet(op.op) for op in cap.ops}),
            "step_time_us": pred.step_time_us, "gpu_time_us": pred.gpu_time_us, "ops": len(cap.ops)}


def _aten_chain(event) -> list[str]:
    chain = []
    while event is not None:
        if event.name.startswith("aten::"):
            chain.append(packet(event.name))
        event = event.cpu_parent
    return list(reversed(chain))  # outermost first


def _depth(event) -> int:
    depth = 0
    while event.cpu_parent is not None:
        event, depth = event.cpu_parent, depth + 1
    return depth


def _own_kernels(prof):
    """(event, kernels it launched itself). The profiler sometimes lists the same kernels on an op and on its
    parent op (seen for cuDNN convolutions); a parent keeps only kernels its sub-ops did not already claim."""
    events = [e for e in prof.events() if e.device_type == DeviceType.CPU and e.kernels]
    claimed: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    own = []
    for event in sorted(events, key=_depth, reverse=True):
        keys = collections.Counter((k.name, round(k.duration, 3)) for k in event.kernels)
        mine = keys - claimed[id(event)]
        kernels, budget = [], collections.Counter(mine)
        for k in event.kernels:
            key = (k.name, round(k.duration, 3))
            if budget[key] > 0:
                budget[key] -= 1
                kernels.append(k)
        if kernels:
            own.append((event, kernels))
        parent = event.cpu_parent
        while parent is not None:
            claimed[id(parent)] += keys
            parent = parent.cpu_parent
    return own


def attribute(prof, captured: set[str]) -> dict:
    """Each GPU work item -> the outermost aten op on its launch stack that the capture also records."""
    by_op: collections.Counter = collections.Counter()
    kernel_list = []
    total_device = sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
    for event, kernels in _own_kernels(prof):
        chain = _aten_chain(event)
        first = next((i for i, name in enumerate(chain) if name in captured), None)
        if first is None:
            op = chain[-1] if chain else "(no aten op)"
        elif AUTOCAST_CAST in chain[first + 1:]:
            # Autocast casts inputs inside the profiler scope of the op it wraps (e.g. addmm), but they are
            # separate dispatches, and the capture records them as such.
            op = AUTOCAST_CAST
        else:
            op = chain[first]
        for kernel in kernels:
            by_op[op] += 1
            kernel_list.append([op, kernel.name[:120], round(kernel.duration, 3)])
    return {"kernels": total_device, "attributed": sum(by_op.values()), "by_op": dict(by_op),
            "gpu_time_us": sum(k[2] for k in kernel_list), "kernel_list": kernel_list}


def measure(build) -> dict:
    step, args = build()
    for _ in range(WARMUP_STEPS):
        step(*args)
    torch.cuda.synchronize()
    times_ms = []
    for _ in range(TIMED_STEPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step(*args)
        end.record()
        torch.cuda.synchronize()
        times_ms.append(start.elapsed_time(end))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(*args)
        torch.cuda.synchronize()
    return {"prof": prof, "step_ms": times_ms}


def run_one(name: str, spec: str, env: dict, gpu: str) -> dict:
    os.environ.update(env)
    result: dict = {"name": name, "workload": spec, "env": env}
    try:
        build, folder = load_build(spec)
        with on_sys_path(folder) if folder else _null():
            t0 = time.perf_counter()
            cap = capture_workload(build, gpu, workload=spec)
            result["capture_s"] = round(time.perf_counter() - t0, 2)
            result["predicted"] = predicted_kernels(cap, predict_capture(cap, gpu))
            m = measure(build)
        result["measured"] = attribute(m["prof"], set(result["predicted"]["captured_ops"]))
        result["measured"]["step_ms"] = m["step_ms"]
        result["measured"]["step_ms_median"] = statistics.median(m["step_ms"])
    except Exception as exc:  # keep going: one broken workload must not lose the others' results
        result["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        result["traceback"] = traceback.format_exc()[-4000:]
    finally:
        for key in env:
            os.environ.pop(key, None)
        torch.cuda.empty_cache()
    return result


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--only", nargs="*", help="workload names to run")
    args = parser.parse_args()
    results = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"),
        "command": "PYTHONPATH=src python3 scripts/validate_capture.py --out $OUT/capture_validation.json",
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
