"""Host-side evidence: wall time per step, measured and predicted, on host-bound and GPU-bound steps.

On a machine with a GPU, from the repository root:

    PYTHONPATH=src python3 scripts/device/validate_host.py --out validation/host_run1.json --captures captures/

For every step it measures (kernelcast.measure: 5 warm-up steps, then 5 timings of 10 back-to-back steps
between CUDA events, and one profiled step for the GPU kernel time), reads a naive host timer around single
steps (no synchronize), captures the same step with kernelcast on this machine, and predicts it. The verdict
(host- or GPU-bound) and the wall-time errors are computed by scripts/eval/report_validation.py from this JSON;
`--predict-only` re-predicts saved measurements with the current code and captures taken here.
"""

import argparse
import json
import os
import statistics
import sys
import time
import traceback

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(SCRIPTS, d) for d in ("device", "fit", "eval")]  # sibling scripts

import kernelcast  # noqa: F401  (before torch)

HF = "examples/hf_models.py"
HOST = "examples/host_steps.py"
HOST_SUITE = [
    # (name, workload, environment of the workload file)
    ("bert_forward_fp16_b32", f"{HF}:bert_forward", {"KC_BATCH": "32", "KC_SEQ": "128", "KC_DTYPE": "float16"}),
    ("gpt2_forward_b1", f"{HF}:gpt2_forward", {"KC_BATCH": "1", "KC_SEQ": "128"}),
    ("gpt2_train_b2", f"{HF}:gpt2_train", {"KC_BATCH": "2", "KC_SEQ": "256"}),
    ("vit_forward_b8", f"{HF}:vit_forward", {"KC_BATCH": "8"}),
    ("mlp_train", f"{HOST}:mlp_train", {}),
    ("item_loop", f"{HOST}:item_loop", {}),
    ("tiny_ops_chain", f"{HOST}:tiny_ops_chain", {}),
    ("copy_pageable", f"{HOST}:copy_pageable", {}),
    ("copy_pinned", f"{HOST}:copy_pinned", {}),
    ("side_stream_prefetch", f"{HOST}:side_stream", {}),
    ("gpt2_train_b16", f"{HF}:gpt2_train", {"KC_BATCH": "16", "KC_SEQ": "512"}),
    ("llama_forward_b8", f"{HF}:llama_forward", {"KC_BATCH": "8", "KC_SEQ": "512", "KC_LAYERS": "8"}),
    ("bert_train_b64", f"{HF}:bert_train", {"KC_BATCH": "64", "KC_SEQ": "128"}),
    ("vit_train_b64", f"{HF}:vit_train", {"KC_BATCH": "64"}),
    ("gpt_train_adamw_autocast", "example:gpt", {}),
]
NAIVE_TIMER_REPEATS = 20


def naive_timer_us(step, args) -> list[float]:
    """What `t0 = perf_counter(); step(); t1 = perf_counter()` reads with no synchronize, from an idle GPU."""
    import torch

    out = []
    for _ in range(NAIVE_TIMER_REPEATS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(*args)
        out.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return out


def measure_one(spec: str) -> dict:
    import torch

    from kernelcast.capture.workload import load_build, on_sys_path
    from kernelcast.measure import measure_step

    build, folder = load_build(spec)
    if folder:
        with on_sys_path(folder):
            step, args = build()
    else:
        step, args = build()
    m = measure_step(step, tuple(args))
    naive = naive_timer_us(step, tuple(args))
    del step, args
    torch.cuda.empty_cache()
    return {"step_ms": list(m.step_ms), "gpu_time_us": m.gpu_time_us, "work_items": m.work_items,
            "naive_timer_us": naive}


def predict_one(spec: str, capture_path: str, gpu: str) -> dict:
    from kernelcast.api import capture_file
    from kernelcast.predict import predict_capture
    from kernelcast.records import Capture

    if os.path.exists(capture_path):
        cap = Capture.load(capture_path)
    else:
        cap = capture_file(spec, gpu)
        cap.save(capture_path)
    p = predict_capture(cap, gpu)
    return {"step_time_us": p.step_time_us, "gpu_time_us": p.gpu_time_us, "host_time_us": p.host_time_us,
            "python_us": p.python_time_us, "naive_host_timer_us": p.naive_host_timer_us, "bound": p.bound,
            "gpu_idle_fraction": p.gpu_idle_fraction, "host": p.host, "sync_points": p.sync_points,
            "kernels": p.kernels, "launch_bound_ops": p.launch_bound_ops,
            "sync_groups": [{"kind": g.kind, "source": g.source, "saving_us": g.saving_us} for g in p.sync_groups],
            "capture_python_bench_us": cap.settings.python_bench_us}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--captures", required=True, help="folder for the captures (reused when present)")
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--measure-only", action="store_true")
    parser.add_argument("--predict-only", help="re-predict the measurements saved in this JSON")
    args = parser.parse_args()
    os.makedirs(args.captures, exist_ok=True)
    saved = {}
    if args.predict_only:
        saved = {r["name"]: r for r in json.load(open(args.predict_only))["steps"]}
    rows = []
    for name, spec, env in HOST_SUITE:
        if args.only and name not in args.only:
            continue
        os.environ.update(env)
        row = {"name": name, "workload": spec, "env": env}
        try:
            if args.predict_only:
                if "measured" not in saved.get(name, {}):
                    continue
                row["measured"] = saved[name]["measured"]
            else:
                row["measured"] = measure_one(spec)
            if not args.measure_only:
                row["predicted"] = predict_one(spec, os.path.join(args.captures, f"{name}.json"), args.gpu)
            m = row["measured"]
            print(f"{name:26s} step {statistics.median(m['step_ms']):8.3f} ms ({min(m['step_ms']):.3f}-"
                  f"{max(m['step_ms']):.3f})  GPU {m['gpu_time_us'] / 1000:8.3f} ms  naive timer "
                  f"{statistics.median(m['naive_timer_us']) / 1000:8.3f} ms"
                  + (f"  predicted {row['predicted']['step_time_us'] / 1000:8.3f} ms ({row['predicted']['bound']})"
                     if "predicted" in row else ""), flush=True)
        except Exception as exc:  # one broken step must not lose the rest
            row["error"] = f"{type(exc).__name__}: {exc}"[:1000]
            row["traceback"] = traceback.format_exc()[-3000:]
            print(f"{name:26s} ERROR {row['error'][:300]}", flush=True)
        finally:
            for key in env:
                os.environ.pop(key, None)
        rows.append(row)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv),
            "captured_on": "this machine" if not args.predict_only else "this machine (re-predicted)"}
    try:
        import torch

        if torch.cuda.is_available():
            meta.update(device=torch.cuda.get_device_name(), torch=torch.__version__)
    except ImportError:
        pass
    from kernelcast.capture.cpu_speed import python_bench_us

    meta["python_bench_us"] = python_bench_us()
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "steps": rows}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
