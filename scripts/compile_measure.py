"""Measure zoo workloads compiled with torch.compile on a real GPU, beside their eager baseline: the ground
truth for kernelcast's compiled predictions (`kernelcast predict WORKLOAD --compile MODE`, capture/inductor.py).
No kernelcast capture runs here; scripts/compile_validate.py (or zoo_validate-style code) re-predicts elsewhere.

    PYTHONPATH=src python3 scripts/compile_measure.py --out $OUT/compile_measured.json.gz

Per workload (COMPILE_ZOO: forward and training steps that compile in seconds), three variants, each from a
fresh build() after torch._dynamo.reset():
- "eager": the step as written;
- "default", "reduce-overhead": torch.compile(step, mode=...), as `kernelcast predict --compile MODE` runs it.
For each: compile_s (wall time of the warm-up calls until a call compiles nothing new, at most
MAX_WARMUP_CALLS; eager: its warm-up), graphs (Dynamo's unique graphs compiled), graph_breaks, then
step_ms (REPEATS timings of STEPS back-to-back steps between CUDA events), synced_ms, and one profiled step:
every GPU work item with its name (Inductor's triton_poi_/triton_red_/triton_per_ kernels, cuBLAS, ...),
duration and aten launch chain, the work item count and GPU time. The file is rewritten after every variant,
so a run cut off at its time limit keeps what it measured; --budget-s stops starting new workloads in time.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "zoo"))
sys.path.insert(0, str(ROOT / "scripts"))
from registry import ZOO  # noqa: E402
from zoo_measure import _profile, _write, cpu_microbenchmarks, cpu_name  # noqa: E402

from kernelcast.capture.workload import load_build, on_sys_path  # noqa: E402

# Small zoo workloads across families, forward and training, that compile in seconds on the H200's host (the
# issue's facts among them: a ViT and a BERT forward that compile made slower, a GPT-2 forward, a T5 forward
# that CUDA graphs made 13x faster, the non-contiguous mean). Ordered cheapest first, so a cut-off run keeps
# the most workloads.
COMPILE_ZOO = (
    "compiled_mean", "layernorm_odd_widths", "losses_train", "optim_adamw", "optim_sgd_momentum",
    "grouped_conv_nchw", "audio_conv1d_train", "dlrm_forward_mean", "gcn_train", "unet_block_forward_fp16",
    "resnet_forward_bf16", "mobilenet_forward_channels_last", "bert_forward_fp16", "gpt2_forward_fp32_b1",
    "vit_forward_b16", "distilbert_forward", "t5_forward", "convnext_forward_bf16", "roberta_train",
    "resnet_train_fp32",
)
MODES = ("eager", "default", "reduce-overhead")
MAX_WARMUP_CALLS = 4  # calls until one compiles nothing new (the optimizer's state makes the 2nd recompile)
EAGER_WARMUP = 3
STEPS = 5
REPEATS = 3
SYNCED = 5
DEFAULT_BUDGET_S = 300.0  # stop starting workloads after this (the one in flight finishes): the run has ~6 minutes


def _unique_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _graph_breaks() -> list[str]:
    from torch._dynamo.utils import counters

    return [f"{reason[:300]} x{n}" for reason, n in counters["graph_break"].items()]


def _warm_up(step, args, compiled: bool) -> dict:
    t0 = time.perf_counter()
    calls = 0
    for calls in range(1, (MAX_WARMUP_CALLS if compiled else EAGER_WARMUP) + 1):
        before = _unique_graphs()
        step(*args)
        torch.cuda.synchronize()
        if compiled and calls > 1 and _unique_graphs() == before:
            break
    return {"compile_s": round(time.perf_counter() - t0, 3), "warmup_calls": calls}


def _time(step, args) -> dict:
    step_ms = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(STEPS):
            step(*args)
        end.record()
        torch.cuda.synchronize()
        step_ms.append(start.elapsed_time(end) / STEPS)
    synced_ms = []
    for _ in range(SYNCED):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(*args)
        torch.cuda.synchronize()
        synced_ms.append((time.perf_counter() - t0) * 1e3)
    return {"step_ms": step_ms, "step_ms_median": statistics.median(step_ms), "synced_ms": synced_ms,
            "synced_ms_median": statistics.median(synced_ms)}


def measure_variant(build, mode: str) -> dict:
    torch._dynamo.reset()
    step, args = build()
    args = tuple(args)
    compiled = mode != "eager"
    if compiled:
        step = torch.compile(step, mode=mode)
    out = _warm_up(step, args, compiled)
    if compiled:
        out["graphs"] = _unique_graphs()
        out["graph_breaks"] = _graph_breaks()
    out.update(_time(step, args))
    prof = _profile(step, args)
    out.update(prof)
    out["gpu_time_us"] = round(sum(k[3] for k in prof["kernels"]), 3)
    out["triton_kernels"] = sum(1 for k in prof["kernels"] if k[2].startswith("triton_"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S)
    args = parser.parse_args()
    started = time.perf_counter()
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "cpu_count": os.cpu_count(),
           "python": platform.python_version(),
           "command": "PYTHONPATH=src python3 scripts/compile_measure.py " + " ".join(sys.argv[1:]),
           "settings": {"steps": STEPS, "repeats": REPEATS, "synced": SYNCED, "max_warmup_calls": MAX_WARMUP_CALLS},
           "cpu_microbenchmarks": cpu_microbenchmarks(), "workloads": []}
    try:
        import triton
        doc["triton"] = triton.__version__
    except ImportError:
        pass
    specs = {name: (family, spec) for name, family, spec in ZOO}
    for name in COMPILE_ZOO:
        if args.only and name not in args.only:
            continue
        if time.perf_counter() - started > args.budget_s:
            doc.setdefault("skipped_for_time", []).append(name)
            _write(doc, args.out)
            continue
        family, spec = specs[name]
        entry = {"name": name, "family": family, "workload": spec, "variants": {}}
        doc["workloads"].append(entry)
        path, func = spec.split(":")
        build, folder = load_build(str(ROOT / path) + ":" + func)
        for mode in MODES:
            t0 = time.perf_counter()
            try:
                with on_sys_path(folder):
                    variant = measure_variant(build, mode)
            except Exception as exc:  # one failure must not lose the others
                variant = {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc()[-3000:]}
            variant["seconds"] = round(time.perf_counter() - t0, 1)
            entry["variants"][mode] = variant
            gc.collect()
            torch.cuda.empty_cache()
            line = (f"kernels {variant['work_items']:5d} gpu {variant['gpu_time_us'] / 1e3:8.3f} ms "
                    f"step {variant['step_ms_median']:8.3f} ms compile {variant['compile_s']:6.1f} s"
                    if "error" not in variant else "ERROR " + variant["error"][:160])
            print(f"{name:32s} {mode:16s} {line} ({variant['seconds']} s)", flush=True)
            _write(doc, args.out)
    torch._dynamo.reset()
    doc["seconds"] = round(time.perf_counter() - started, 1)
    _write(doc, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
