"""KernelBench levels 1-2 timed on a real GPU by KernelBench's own protocol: how long one call from an idle GPU
takes, today, on this machine (issues 30 and 33).

    KERNELBENCH_DIR=<a copy of ../shared/kernelbench> PYTHONPATH=src \
        python3 scripts/device/kernelbench_call_times.py --out $OUT/h200_call_times_run1.json   # on the GPU
    PYTHONPATH=src python3 scripts/device/kernelbench_call_times.py --dir benchmarks/whole_models \
        --profiled --out $OUT/whole_models.json                                                 # our own programs

Why: most of KernelBench's 200 programs are host-bound single calls, and kernelcast's first-call prediction of
them on the H200 reads 20% median against `timing/H200_ours` (level 2's chains of six or more kernels -31%
signed, their host part predicted at 0.62x). The host of the device machine runs up to 1.6x apart between days
(../.library device notes), so the same programs timed again, in two processes, say how much of that miss is
the day's host and how much the model's.

Protocol, as KernelBench's (../shared/kernelbench README): seed 42 before get_inputs() and before
get_init_inputs(), model and inputs on CUDA, torch.no_grad(), WARMUP calls, then TRIALS trials, each one call
between two CUDA events followed by a synchronize (so each call starts from an idle GPU and carries its launch
gaps). All programs in order in one process, as H200_ours was taken. With --profiled, then PROFILED calls under
torch.profiler (the GPU busy time and kernels of a call, their medians) and one call's peak memory over what was
allocated before it. Output: {"env", "problems": {name: {mean_ms, median_ms, min_ms, max_ms[, gpu_busy_us,
kernels, mem_before_bytes, mem_peak_bytes]}}}, H200_ours's field names. --dir: the KernelBench-format programs
of one folder (Model, get_inputs, get_init_inputs), named "<folder>/<file>", instead of levels 1-2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts

WARMUP = 3
TRIALS = 30  # H200_ours's level-2 count
PROFILED = 3


def time_program(path: Path, trials: int, profiled: bool = False) -> dict:
    """One program's call times (ms) by KernelBench's protocol."""
    import torch
    from kernelbench_validate import _build_for, _load

    from kernelcast.measure import back_to_back_ms

    step, inputs = _build_for(_load(path))()
    for _ in range(WARMUP):
        step(*inputs)
    torch.cuda.synchronize()
    times = back_to_back_ms(lambda: step(*inputs), 1, trials)  # one call between two events, then a synchronize
    out = {"mean_ms": statistics.fmean(times), "median_ms": statistics.median(times), "min_ms": min(times),
           "max_ms": max(times)}
    if profiled:
        out.update(_profiled(step, inputs))
    return out


def _profiled(step, inputs) -> dict:
    """GPU busy µs and work items of one call (medians over PROFILED calls, each profiled as zoo_measure.py
    profiles a step), and one call's peak allocated bytes with what was allocated before it."""
    import torch
    from zoo_measure import _profile

    calls = [_profile(step, inputs, module_ranges=False) for _ in range(PROFILED)]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step(*inputs)
    torch.cuda.synchronize()
    return {"gpu_busy_us": statistics.median(c["work_item_us"] for c in calls),
            "kernels": statistics.median(c["work_items"] for c in calls), "mem_before_bytes": before,
            "mem_peak_bytes": torch.cuda.max_memory_allocated()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--trials", type=int, default=TRIALS)
    parser.add_argument("--only", nargs="*", default=[], help="programs whose name contains one of these")
    parser.add_argument("--dir", help="a folder of KernelBench-format programs instead of levels 1-2")
    parser.add_argument("--profiled", action="store_true", help="also GPU busy time, kernels and peak memory")
    args = parser.parse_args()

    import torch
    from kernelbench_validate import programs

    listed = ([(f"{Path(args.dir).name}/{p.name}", p) for p in sorted(Path(args.dir).glob("*.py"))] if args.dir
              else programs())

    out = {"env": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "trials": args.trials,
                   "date": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)}, "problems": {}}
    start = time.perf_counter()
    for name, path in listed:
        if args.only and not any(s in name for s in args.only):
            continue
        try:
            out["problems"][name] = time_program(path, args.trials, args.profiled)
        except Exception as exc:  # noqa: BLE001 - one program's failure is listed, the rest still run
            out["problems"][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        torch.cuda.empty_cache()
    out["env"]["seconds"] = round(time.perf_counter() - start, 1)
    Path(args.out).write_text(json.dumps(out, indent=0))
    print(f"wrote {args.out}: {len(out['problems'])} programs in {out['env']['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
