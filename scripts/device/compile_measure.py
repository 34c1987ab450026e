"""Measure zoo workloads compiled with torch.compile on a real GPU, beside their eager baseline: the ground
truth for kernelcast's compiled predictions (`kernelcast predict WORKLOAD --compile MODE`, capture/inductor.py).
No kernelcast capture runs here; scripts/eval/compile_validate.py re-predicts elsewhere.

    PYTHONPATH=src python3 scripts/device/compile_measure.py --budget-s 320 --out $OUT/compile_measured.json.gz \
        [--only NAME ...]

Each workload runs in a process of its own (this script with --worker), so a native crash or a hang loses that
workload's remaining variants, not the run (H200, torch 2.11: a `std::bad_array_new_length` abort once ended a
run after 15 workloads). The worker writes after every variant; the parent merges, rewrites --out after every
workload, and kills a worker (its whole process group: Inductor's compile pool too) at the workload's time
limit. --budget-s is a hard deadline for the whole run: no workload starts with less than MIN_START_S left, and
none runs past it. --only keeps its own order (most wanted first).

Per workload, three variants, each from a fresh build() after torch._dynamo.reset() and with Dynamo's counters
cleared:
- "eager": the step as written;
- "default", "reduce-overhead": torch.compile(step, mode=...), as `kernelcast predict --compile MODE` runs it.
  Under reduce-overhead every call is preceded by torch.compiler.cudagraph_mark_step_begin(), as a training
  loop's user does (without it cudagraph trees start a generation at each compiled frame and invalidate the
  forward's outputs before the backward reads them: H200, torch 2.11, zoo layernorm_odd_widths and
  grouped_conv_nchw). Where the step keeps a compiled output across steps (optimizer state created inside
  the graph: SGD's momentum buffers), cudagraph trees refuse it at the next step; that variant is retried once
  after one eager step (the state then exists before compiling, as a user who warms the optimizer up has it),
  and the retry says so (`eager_first_step`).
For each: compile_s (wall time of the warm-up calls until a call compiles nothing new, at most
MAX_WARMUP_CALLS), graphs (Dynamo's unique graphs for this variant), graph_breaks, step_ms (REPEATS timings of
STEPS back-to-back steps between CUDA events), synced_ms, frames Dynamo converted while timing (0 when warm),
and one profiled step: every GPU work item with its name (Inductor's triton_poi_/triton_red_/triton_per_
kernels, cuBLAS, ...), duration and aten launch chain, the work item count and GPU time. A compiled step is
profiled without the module ranges eager steps get (their hooks make Dynamo recompile; see _profiled), and
`profile_compiled_frames` says how many frames Dynamo converted in it (0: the timed code ran). Inductor's
byte count per generated kernel (`config.benchmark_kernel`, as the capture sets it) is read back from the
loaded kernels: `triton_bytes` = {kernel name: [bytes, ...] over the graphs that define it}.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "zoo"))
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts

# Small zoo workloads across families, forward and training, that compile in seconds on the H200's host (the
# issue's facts among them: a ViT and a BERT forward that compile made slower, a GPT-2 forward, a T5 forward
# that CUDA graphs made 13x faster, the non-contiguous mean). Ordered cheapest first, so a cut-off run keeps
# the most workloads.
COMPILE_ZOO = (
    "compiled_mean", "layernorm_odd_widths", "losses_train", "optim_adamw", "optim_sgd_momentum", "cnn_train_item",
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
DEFAULT_BUDGET_S = 320.0  # hard deadline of the whole run (the device call has ~6 minutes)
WORKLOAD_LIMIT_S = 120.0  # one workload's three variants, compile included (the slowest so far: 40 s)
MIN_START_S = 25.0  # no workload starts with less left than this
OVERWRITTEN = "accessing tensor output of CUDAGraphs that has been overwritten"


# -- the worker: one workload, its variants, in this process ------------------------------------------------
def _unique_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _graph_breaks() -> list[str]:
    from torch._dynamo.utils import counters

    return [f"{reason[:300]} x{n}" for reason, n in counters["graph_break"].items()]


def _frames_compiled() -> int:
    """Frames Dynamo has converted (a hook traced as a frame of its own counts, though it adds no graph)."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["total"])


def _caller(step, args, mode: str):
    """step(*args) as the variant calls it: reduce-overhead marks each call a new step of cudagraph trees."""
    import torch

    if mode != "reduce-overhead":
        return lambda: step(*args)

    def call():
        torch.compiler.cudagraph_mark_step_begin()
        return step(*args)

    return call


def _warm_up(call, compiled: bool) -> dict:
    import torch

    t0 = time.perf_counter()
    calls = 0
    for calls in range(1, (MAX_WARMUP_CALLS if compiled else EAGER_WARMUP) + 1):
        before = _unique_graphs()
        call()
        torch.cuda.synchronize()
        if compiled and calls > 1 and _unique_graphs() == before:
            break
    return {"compile_s": round(time.perf_counter() - t0, 3), "warmup_calls": calls}


def _time(call) -> dict:
    from kernelcast.measure import back_to_back_ms, synced_ms

    step_ms = back_to_back_ms(call, STEPS, REPEATS)
    synced = synced_ms(call, SYNCED)
    return {"step_ms": step_ms, "step_ms_median": statistics.median(step_ms), "synced_ms": synced,
            "synced_ms_median": statistics.median(synced)}


def _inductor_bytes() -> dict[str, list[float]]:
    """Inductor's byte count of every generated kernel loaded so far: {kernel name: [bytes, ...]} (a name can
    recur in another graph); see kernelcast.calibrate.triton_grid.inductor_kernel_facts."""
    from kernelcast.calibrate.triton_grid import inductor_kernel_facts

    out: dict[str, list[float]] = {}
    for kernels in inductor_kernel_facts().values():
        for name, facts in kernels.items():
            out.setdefault(name, []).append(facts["bytes"])
    return out


def _profiled(call, compiled: bool) -> dict:
    """One profiled step. A compiled step is profiled without the module ranges: their global module hooks
    make Dynamo compile the step again with a graph break at every module, and that entry then stays first in
    its cache, so even a retry without the hooks ran the broken graphs (H200, torch 2.11, zoo bert_forward_fp16:
    59 frames compiled in the profiled step, 126 kernels where the timed step ran 106).
    `profile_compiled_frames`: frames Dynamo converted during the profiled step (0 when it ran the timed code)."""
    from zoo_measure import _profile

    before = _frames_compiled() if compiled else 0
    prof = _profile(lambda: call(), (), module_ranges=not compiled)
    if compiled:
        prof["profile_compiled_frames"] = _frames_compiled() - before
        prof["profiled_without_module_ranges"] = True
    return prof


def measure_variant(build, mode: str, eager_first_step: bool = False) -> dict:
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    step, args = build()
    args = tuple(args)
    compiled = mode != "eager"
    out: dict = {}
    if eager_first_step:
        step(*args)
        torch.cuda.synchronize()
        out["eager_first_step"] = True
    if compiled:
        step = torch.compile(step, mode=mode)
    call = _caller(step, args, mode)
    out.update(_warm_up(call, compiled))
    if compiled:
        out["graphs"] = _unique_graphs()
        out["graph_breaks"] = _graph_breaks()
    before = _frames_compiled()
    out.update(_time(call))
    out["frames_compiled_while_timing"] = _frames_compiled() - before
    prof = _profiled(call, compiled)
    out.update(prof)
    out["gpu_time_us"] = round(sum(k[3] for k in prof["kernels"]), 3)
    out["triton_kernels"] = sum(1 for k in prof["kernels"] if k[2].startswith("triton_"))
    if compiled:
        out["triton_bytes"] = _inductor_bytes()
    return out


def _variant(build, folder, mode: str) -> dict:
    from kernelcast.capture.workload import on_sys_path

    try:
        with on_sys_path(folder):
            return measure_variant(build, mode)
    except Exception as exc:  # one failure must not lose the others
        first = {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc()[-3000:]}
    if mode != "reduce-overhead" or OVERWRITTEN not in first["error"]:
        return first
    try:  # a compiled output kept across steps (optimizer state): once more, the state made eagerly first
        with on_sys_path(folder):
            variant = measure_variant(build, mode, eager_first_step=True)
        variant["first_attempt_error"] = first["error"][:600]
        return variant
    except Exception as exc:
        first["retry_error"] = f"{type(exc).__name__}: {exc}"[:1000]
        return first


def run_worker(name: str, out_path: str) -> int:
    import torch
    import torch._inductor.config as inductor_config

    from kernelcast.capture.workload import load_build
    from registry import ZOO

    inductor_config.benchmark_kernel = True  # Inductor's byte count in each kernel's meta, as the capture has it
    specs = {n: (family, spec) for n, family, spec in ZOO}
    family, spec = specs[name]
    entry = {"name": name, "family": family, "workload": spec, "variants": {},
             "device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda}
    path, func = spec.split(":")
    build, folder = load_build(str(ROOT / path) + ":" + func)
    for mode in MODES:
        t0 = time.perf_counter()
        variant = _variant(build, folder, mode)
        variant["seconds"] = round(time.perf_counter() - t0, 1)
        entry["variants"][mode] = variant
        gc.collect()
        torch.cuda.empty_cache()
        line = (f"kernels {variant['work_items']:5d} gpu {variant['gpu_time_us'] / 1e3:8.3f} ms "
                f"step {variant['step_ms_median']:8.3f} ms compile {variant['compile_s']:6.1f} s"
                if "error" not in variant else "ERROR " + variant["error"][:160])
        flags = "".join(f" [{k}]" for k in ("eager_first_step", "profiled_without_module_ranges") if variant.get(k))
        print(f"{name:32s} {mode:16s} {line} ({variant['seconds']} s){flags}", flush=True)
        _write_json(entry, out_path)
    torch._dynamo.reset()
    return 0


# -- the parent: one worker per workload, a hard deadline ---------------------------------------------------
def _write_json(doc: dict, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    os.replace(tmp, path)


def _write(doc: dict, path: str) -> None:
    from zoo_measure import _write as write_gz

    write_gz(doc, path)


def how_it_ended(returncode: int | None, timed_out: bool) -> str | None:
    """None for a clean exit; else one phrase (a timeout, a signal such as SIGABRT from std::terminate)."""
    if timed_out:
        return "killed at its time limit"
    if returncode is None or returncode == 0:
        return None
    if returncode < 0:
        try:
            return f"died of {signal.Signals(-returncode).name}"
        except ValueError:
            return f"died of signal {-returncode}"
    return f"exited with status {returncode}"


def run_in_subprocess(cmd: list[str], limit_s: float) -> tuple[int | None, bool]:
    """Run cmd in a session of its own (its output goes to ours); at limit_s kill its whole process group.
    (returncode, timed out)."""
    proc = subprocess.Popen(cmd, start_new_session=True)
    try:
        return proc.wait(timeout=max(limit_s, 1.0)), False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return proc.returncode, True


def merge_worker(name: str, family: str, spec: str, worker_doc: dict | None, ended: str | None,
                 seconds: float) -> dict:
    """The workload's entry: what the worker wrote, each variant it did not reach marked with how it ended."""
    entry = {"name": name, "family": family, "workload": spec, "variants": {}, **(worker_doc or {})}
    variants = dict(entry.get("variants", {}))
    for mode in MODES:
        if mode not in variants and ended is not None:
            variants[mode] = {"error": f"not measured: the workload's process {ended} before this variant"}
    entry["variants"] = variants
    entry["process"] = {"seconds": round(seconds, 1), "ended": ended or "ok"}
    return entry


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--only", nargs="*", help="these workloads, in this order")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S)
    parser.add_argument("--workload-limit-s", type=float, default=WORKLOAD_LIMIT_S)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return run_worker(args.worker, args.worker_out)
    if not args.out:
        print("compile_measure.py: --out is required", file=sys.stderr)
        return 2
    from registry import ZOO
    from zoo_measure import cpu_microbenchmarks, cpu_name

    known = {n: (family, spec) for n, family, spec in ZOO}
    names = list(args.only) if args.only else list(COMPILE_ZOO)
    if unknown := [n for n in names if n not in known]:
        print(f"compile_measure.py: not zoo workloads: {' '.join(unknown)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    deadline = started + args.budget_s
    doc = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "cpu_count": os.cpu_count(),
           "python": platform.python_version(),
           "command": "PYTHONPATH=src python3 scripts/device/compile_measure.py " + " ".join(sys.argv[1:]),
           "settings": {"steps": STEPS, "repeats": REPEATS, "synced": SYNCED, "max_warmup_calls": MAX_WARMUP_CALLS,
                        "process_per_workload": True, "reduce_overhead_mark_step_begin": True,
                        "inductor_benchmark_kernel": True},
           "cpu_microbenchmarks": cpu_microbenchmarks(), "workloads": []}
    try:
        import triton
        doc["triton"] = triton.__version__
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            left = deadline - time.perf_counter()
            if left < MIN_START_S:
                doc.setdefault("skipped_for_time", []).append(name)
                continue
            worker_out = os.path.join(tmp, f"{name}.json")
            t0 = time.perf_counter()
            returncode, timed_out = run_in_subprocess(
                [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--worker-out", worker_out],
                min(args.workload_limit_s, left))
            ended = how_it_ended(returncode, timed_out)
            try:
                worker_doc = json.loads(Path(worker_out).read_text())
            except (OSError, ValueError):
                worker_doc = None
            entry = merge_worker(name, *known[name], worker_doc, ended, time.perf_counter() - t0)
            for key in ("device", "torch", "cuda"):
                if key in entry:
                    doc.setdefault(key, entry.pop(key))
            doc["workloads"].append(entry)
            if ended:
                print(f"{name:32s} the workload's process {ended} after {entry['process']['seconds']} s", flush=True)
            doc["seconds"] = round(time.perf_counter() - started, 1)
            _write(doc, args.out)
    doc["seconds"] = round(time.perf_counter() - started, 1)
    _write(doc, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
