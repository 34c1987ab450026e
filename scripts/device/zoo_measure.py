"""Measure the validation zoo on a real GPU: kernels per step with the aten op chain of each, GPU kernel time,
step time, and device memory. No kernelcast capture runs here: the measurement does not depend on the code it
checks, and is re-predicted elsewhere with scripts/eval/zoo_validate.py.

    PYTHONPATH=src python3 scripts/device/zoo_measure.py --out $OUT/zoo_measured.json.gz

Per workload, after WARMUP steps:
- step_ms: REPEATS timings of STEPS back-to-back steps between two CUDA events, each divided by STEPS;
- synced_ms: SYNCED single steps, each between torch.cuda.synchronize() calls, on a host timer;
- memory: memory_allocated() before a step, max_memory_allocated() over it after reset_peak_memory_stats(),
  memory_reserved() after it (what issue 12's memory model must predict);
- one step under torch.profiler: each GPU work item with its duration, the aten ops on its launch stack
  (outermost first), the module, and the order it launched in; every aten op the CPU ran, with its depth; the
  CUDA runtime calls that block the host (synchronize, blocking memcpy).
Also the host CPU and three CPU-bound microbenchmarks (for carrying host times across CPUs).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "zoo"))
from registry import ZOO  # noqa: E402

from kernelcast.capture.workload import load_build, on_sys_path  # noqa: E402
from kernelcast.measure import (_module_ranges, attribute, back_to_back_ms, measure_memory, packet,  # noqa: E402
                                synced_ms, work_item_us)

WARMUP = 3
STEPS = 5
REPEATS = 5
SYNCED = 10
BLOCKING_RUNTIME_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                          "cudaMemcpy", "cudaMemcpyAsync")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def cpu_microbenchmarks() -> dict:
    """Three CPU-bound loops, fastest of 5 (µs): plain Python, small-tensor dispatch (CPU tensors), and
    module-call overhead (nn.Module __call__ with hooks machinery); capture/cpu_speed.py defines them, and a
    capture records the same three on its machine. (The run of 2026-11-30 timed them on a wall clock; they are
    CPU time of the thread now, the same on an idle host.)"""
    from kernelcast.capture.cpu_speed import measure_cpu_bench

    bench = measure_cpu_bench().to_json()
    bench.pop("cpu")  # recorded beside them, as "cpu"
    return bench


def _profile(step, args, module_ranges: bool = True) -> dict:
    import contextlib

    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with (_module_ranges() if module_ranges else contextlib.nullcontext()), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(*args)
        torch.cuda.synchronize()
    events = prof.events()
    kernels, total = attribute(events, None)
    aten = []
    blocking: dict[str, int] = {}
    for e in sorted(events, key=lambda e: e.time_range.start):
        if e.device_type != DeviceType.CPU:
            continue
        if e.name.startswith("aten::"):
            depth, parent = 0, e.cpu_parent
            while parent is not None:
                depth += parent.name.startswith("aten::")
                parent = parent.cpu_parent
            aten.append([depth, packet(e.name)])
        elif e.name in BLOCKING_RUNTIME_CALLS:
            blocking[e.name] = blocking.get(e.name, 0) + 1
    return {"work_items": total, "work_item_us": round(work_item_us(events), 3),
            "kernels": [[list(k.chain), k.module, k.name[:160], round(k.duration_us, 3)] for k in kernels],
            "aten_ops": aten, "runtime_calls": blocking}


def backend_flags() -> tuple:
    """The global math settings a workload's build() may change for its own step (TF32 GEMMs, convolutions)."""
    return (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
            torch.get_float32_matmul_precision())


def restore_backend_flags(flags: tuple) -> None:
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, precision = flags
    torch.set_float32_matmul_precision(precision)


def _step_times(step, args: tuple) -> dict:
    """WARMUP steps, then the back-to-back and the synchronized step times."""
    for _ in range(WARMUP):
        step(*args)
    torch.cuda.synchronize()
    step_ms = back_to_back_ms(lambda: step(*args), STEPS, REPEATS)
    synced = synced_ms(lambda: step(*args), SYNCED)
    return {"step_ms": step_ms, "step_ms_median": statistics.median(step_ms), "synced_ms": synced,
            "synced_ms_median": statistics.median(synced)}


def _dynamo_graphs() -> int:
    """A count that grows whenever Dynamo compiles in this process (its own stats and frames counters): compared
    before and after a workload's timed steps, it says whether the step runs torch.compile'd code."""
    import torch._dynamo.utils

    return sum(torch._dynamo.utils.counters["stats"].values()) + sum(torch._dynamo.utils.counters["frames"].values())


def measure(build) -> dict:
    step, args = build()
    args = tuple(args)
    graphs = _dynamo_graphs()
    times = _step_times(step, args)
    compiled = _dynamo_graphs() != graphs
    memory = measure_memory(step, args).to_json()
    # A step that runs torch.compile'd code is profiled without the module ranges: they are global module hooks,
    # which Dynamo's guards see as changed state, so the profiled step recompiled (Inductor's autotuning and CUDA
    # graph recording): transformers' static-cache generate() read 7588 work items and 51.9 ms of kernels, 3102
    # of them the autotuner's L2 flushes, against 1992 and 4.99 ms in its steady state
    # (validation/probes/generate_calls.json). scripts/device/compile_measure.py profiles compiled steps alike.
    prof = _profile(step, args, module_ranges=not compiled)
    # the device-side events' durations: the kernels attributed to ops can sum to more (measure.work_item_us)
    return {**times, "gpu_time_us": prof["work_item_us"], "memory": memory, "compiled": compiled, **prof}


def measure_timing(build) -> dict:
    """Step times alone, no torch.profiler in the process: a profiler session leaves every later op's host cost
    about 40% higher in that process (scripts/device/host_spread_probe.py --isolate profiler, H200 host, torch 2.11:
    a 20-op chain 0.160 -> 0.226 and 0.162 -> 0.233 ms, none 0.169 -> 0.160 and 0.150 -> 0.155), so a
    workload timed after another's profile reads slow: --timing-only times every workload before any profile."""
    step, args = build()
    return _step_times(step, tuple(args))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--timing-only", action="store_true",
                        help="step times alone, in a process that never runs torch.profiler (measure_timing)")
    args = parser.parse_args()
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(),
           "cpu_count": os.cpu_count(), "python": platform.python_version(),
           "command": "PYTHONPATH=src python3 scripts/device/zoo_measure.py " + " ".join(sys.argv[1:]),
           "cpu_microbenchmarks": cpu_microbenchmarks(), "workloads": []}
    try:
        import transformers
        doc["transformers"] = transformers.__version__
    except ImportError:
        pass
    root = Path(__file__).resolve().parents[2]
    for name, family, spec in ZOO:
        if args.only and name not in args.only:
            continue
        entry = {"name": name, "family": family, "workload": spec}
        flags = backend_flags()  # a build() may set TF32 for its step: the next workload gets the defaults back
        t0 = time.perf_counter()
        try:
            build, folder = load_build(str(root / spec.split(":")[0]) + ":" + spec.split(":")[1])
            with on_sys_path(folder):
                entry["measured"] = (measure_timing if args.timing_only else measure)(build)
        except Exception as exc:  # keep going: one broken workload must not lose the others' results
            entry["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            entry["traceback"] = traceback.format_exc()[-3000:]
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        restore_backend_flags(flags)
        doc["workloads"].append(entry)
        gc.collect()
        torch.cuda.empty_cache()
        m = entry.get("measured")
        line = ("ERROR " + entry["error"][:200] if not m else f"step {m['step_ms_median']:8.2f} ms" if args.timing_only
                else f"kernels {m['work_items']:6d} gpu {m['gpu_time_us'] / 1e3:8.2f} ms step {m['step_ms_median']:8.2f} ms")
        print(f"{name:32s} {line} ({entry['seconds']} s)", flush=True)
        _write(doc, args.out)  # after every workload: a run stopped at its time limit keeps what it measured
    return 0


def _write(doc: dict, path: str) -> None:
    tmp = path + ".tmp"
    with gzip.open(tmp, "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
