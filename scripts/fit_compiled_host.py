"""Fit the host cost of torch.compile'd code per unit, from the device probe of compiled calls.

    PYTHONPATH=src python3 scripts/fit_compiled_host.py validation/probes/compiled_host.json \
        [--out validation/probes/compiled_host_fit.json]

scripts/probe_compiled_host.py measured, on the H200's host, the CPU time per call of small compiled functions
(eager, default, reduce-overhead) whose kernels never fill the GPU queue. Each case is captured here as
`kernelcast predict --compile MODE` does and its compiled units counted from the capture: graph calls and their
tensor inputs (host.compiled_graph), Triton launches, allocations and reinterpretations in Inductor's wrapper,
CUDA graph replays and their inputs (host.cudagraph_replay). The rest of each call's host time (extern kernels
such as cuBLAS, the static-input copies) is priced by the profile's eager host model, corrected by that model's
miss on the same case run eagerly where the extern kernels are GEMMs (the eager model prices a 64x64 mm's
launch at 13 µs, the probe's eager rows measured about 25: that miss is not the compiled code's); what the
measurement leaves is fitted as units x per-unit costs, non-negative, by least squares on relative error
(scipy's NNLS), default and reduce-overhead apart. The fit goes into the profile's host section as `compiled`
(scripts/build_h200_profile.py), which predict/host.py's HostModel reads.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

import kernelcast  # noqa: F401  (before torch)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm")
DEFAULT_UNITS = ("compiled_graph_us", "compiled_input_us", "generated_launch_us", "compiled_view_us")
REPLAY_UNITS = ("cudagraph_replay_us", "replay_input_us")


def units_of(capture) -> dict[str, float]:
    """The compiled units of one captured call (see the module docstring)."""
    from kernelcast.costs import cost_of
    from kernelcast.predict.host import (COMPILED_GRAPH_OP, CUDAGRAPH_REPLAY_OP, GRAPHED_TAG, TRITON_OP_PREFIX,
                                         is_compiled_view)

    units = dict.fromkeys(DEFAULT_UNITS + REPLAY_UNITS, 0.0)
    for op in capture.ops:
        if GRAPHED_TAG in op.tags:
            continue
        if op.op == COMPILED_GRAPH_OP:
            units["compiled_graph_us"] += 1
            units["compiled_input_us"] += op.args.get("inputs", 0)
        elif op.op == CUDAGRAPH_REPLAY_OP:
            units["cudagraph_replay_us"] += 1
            units["replay_input_us"] += op.args.get("inputs", 0)
        elif op.op.startswith(TRITON_OP_PREFIX):
            units["generated_launch_us"] += 1
        elif is_compiled_view(op, cost_of(op)):
            units["compiled_view_us"] += 1
    return units


def _capture(name: str, size: int, mode: str):
    import torch

    from kernelcast.capture import capture_workload
    from probe_compiled_host import case

    def build():
        fn, args = case(name, size)

        def step(*a):
            with torch.no_grad():
                return fn(*a)

        return step, args

    return capture_workload(build, "h200", workload=f"{name} {size}", compile_mode=mode)


def _gemms(capture) -> int:
    """GEMM launches the host makes (none for those a CUDA graph replays)."""
    from kernelcast.predict.host import GRAPHED_TAG

    return sum(1 for op in capture.ops if op.name in GEMM_OPS and GRAPHED_TAG not in op.tags)


def _rest_us(capture) -> float:
    """The call's host time on the profiled host with every compiled unit at zero (the Python timed here,
    Inductor's wrapper's included, carried by the Python benchmarks' ratio as in a prediction)."""
    from kernelcast.devices import get_gpu
    from kernelcast.predict import host_model_for, predict_capture

    host = host_model_for(get_gpu("h200"), capture)
    zero = dataclasses.replace(host, **dict.fromkeys(DEFAULT_UNITS + REPLAY_UNITS, 0.0))
    return predict_capture(capture, "h200", host_model=zero).host_time_us


def _nonnegative_relative_fit(rows: list[list[float]], targets: list[float], measured: list[float]) -> list[float]:
    """Per-unit costs >= 0 minimizing sum(((rows . c) - target) / measured)^2 (scipy's NNLS): the error
    relative to each call's measured time, so that 30 µs and 1 ms calls count alike."""
    import numpy as np
    from scipy.optimize import nnls

    weights = 1.0 / np.array(measured, dtype=float)
    coef, _ = nnls(np.array(rows, dtype=float) * weights[:, None], np.array(targets, dtype=float) * weights)
    return [float(c) for c in coef]


def fit(doc: dict) -> tuple[dict, list[dict]]:
    eager_miss = {}  # (case, size) -> µs per GEMM the eager model misses on this host
    for row in doc["rows"]:
        if "error" not in row and row["mode"] == "eager":
            cap = _capture(row["case"], row["size"], None)
            if _gemms(cap):
                eager_miss[(row["case"], row["size"])] = (row["cpu_us"] - _rest_us(cap)) / _gemms(cap)
    rows = []
    for row in doc["rows"]:
        if "error" in row or row["mode"] == "eager":
            continue
        cap = _capture(row["case"], row["size"], row["mode"])
        rest_us = _rest_us(cap) + eager_miss.get((row["case"], row["size"]), 0.0) * _gemms(cap)
        rows.append({**row, "units": units_of(cap), "rest_us": round(rest_us, 2)})
    out = {}
    for names, mode in ((DEFAULT_UNITS, "default"), (REPLAY_UNITS, "reduce-overhead")):
        picked = [r for r in rows if r["mode"] == mode]
        coef = _nonnegative_relative_fit([[r["units"][n] for n in names] for r in picked],
                                         [r["cpu_us"] - r["rest_us"] for r in picked], [r["cpu_us"] for r in picked])
        for name, c in zip(names, coef):
            out[name] = round(c, 3)
    for r in rows:
        names = DEFAULT_UNITS if r["mode"] == "default" else REPLAY_UNITS
        r["fitted_us"] = round(r["rest_us"] + sum(out[n] * r["units"][n] for n in names), 2)
    return out, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe")
    parser.add_argument("--out", default=str(ROOT / "validation/probes/compiled_host_fit.json"))
    args = parser.parse_args()
    doc = json.loads(Path(args.probe).read_text())
    units, rows = fit(doc)
    errors = {}
    for r in rows:
        e = r["fitted_us"] / r["cpu_us"] - 1
        errors.setdefault(r["mode"], []).append(abs(e))
        print(f"{r['case']:14s} {r['size']:4d} {r['mode']:16s} measured {r['cpu_us']:8.1f} fitted {r['fitted_us']:8.1f} "
              f"({e:+.0%})")
    print("per-unit µs:", units)
    for mode, e in errors.items():
        print(f"{mode}: median |error| {statistics.median(e):.1%}, worst {max(e):.1%} over {len(e)} cases")
    Path(args.out).write_text(json.dumps({
        "command": "python3 scripts/fit_compiled_host.py " + args.probe, "probe": doc["command"],
        "units_us": units, "median_error": {m: round(statistics.median(e), 4) for m, e in errors.items()},
        "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
