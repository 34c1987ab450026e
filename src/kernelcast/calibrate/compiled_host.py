"""Fit the host cost of torch.compile'd code per unit from a device probe of compiled calls (issue 32).

scripts/device/probe_compiled_host.py measures, on a GPU's host, the CPU time per call of small compiled functions
(eager, default, reduce-overhead) whose kernels never fill the GPU queue; scripts/fit/fit_compiled_host.py captures
the same cases here and calls `fit`. Each case's compiled units are counted from its capture (units_of): graph
calls, their tensor inputs and whether Dynamo traced an nn.Module into them (host.compiled_graph), Triton
launches, allocations and reinterpretations in Inductor's wrapper, CUDA graph replays and their inputs
(host.cudagraph_replay). The rest of each call's host
time (extern kernels such as cuBLAS, the static-input copies, the caller's Python timed in the capture) is priced by
the profile's eager host model (rest_us), corrected by that model's miss on the same case run eagerly where
the extern kernels are GEMMs (the eager model prices a 64x64 mm's launch at 13 µs, the probe's eager rows
measured about 25: that miss is not the compiled code's). What the measurement leaves is fitted as units x
per-unit costs, non-negative, by least squares on relative error (scipy's NNLS), default and reduce-overhead
apart. The result goes into the profile's host section as `compiled`, which predict/host.py's HostModel reads.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm")
DEFAULT_UNITS = ("compiled_call_us", "compiled_graph_us", "compiled_input_us", "generated_launch_us",
                 "compiled_view_us", "compiled_module_us", "compiled_backward_us")
REPLAY_UNITS = ("cudagraph_replay_us", "replay_input_us", "replay_module_us", "replay_backward_us")
# Fitted on the default-mode calls and priced as fitted in the reduce-overhead ones, which pay them too.
SHARED_UNITS = ("compiled_call_us",)


def units_of(capture) -> dict[str, float]:
    """The compiled units of one captured call (the module docstring lists them), as the host model counts them
    (predict/host.py compiled_units)."""
    from kernelcast.costs import cost_of
    from kernelcast.predict.host import compiled_units

    units = dict.fromkeys(DEFAULT_UNITS + REPLAY_UNITS, 0.0)
    for op in capture.ops:
        for unit, count in compiled_units(op, cost_of(op)).items():
            units[unit] += count
    return units


def gemm_launches(capture) -> int:
    """GEMM launches the host makes (none for those a CUDA graph replays)."""
    from kernelcast.predict.host import GRAPHED_TAG

    return sum(1 for op in capture.ops if op.name in GEMM_OPS and GRAPHED_TAG not in op.tags)


def rest_us(capture, gpu: str = "h200") -> float:
    """The call's host time on the profiled host with every compiled unit at zero: the caller's Python timed in
    the capture (carried by the Python benchmarks' ratio as in a prediction) and the extern kernels' calls;
    Inductor's wrapper and the compiled call's way in and out are the units' (predict/host.py)."""
    from kernelcast.devices import get_gpu
    from kernelcast.predict import host_model_for, predict_capture

    host = host_model_for(get_gpu(gpu), capture)
    zero = dataclasses.replace(host, **dict.fromkeys(DEFAULT_UNITS + REPLAY_UNITS, 0.0))
    return predict_capture(capture, gpu, host_model=zero).host_time_us


def merged_runs(runs: list[dict], reference: dict | None = None, host_runs: tuple[dict, ...] = ()) -> dict:
    """One probe document from runs of the probe in separate processes (the host's speed moves from one process to
    the next): per case and mode the median of their CPU µs (and wall µs where they have it); with `reference`, a
    run on the profiled GPU's host, scaled to that host by the median ratio over the rows both measured (the probe
    run on another machine when the profiled GPU did not come). `host_runs`, runs on the profiled GPU's host
    itself, are merged apart, unscaled, and add the rows the others lack (a case, size and mode they did not
    measure: the H100 runs' reduce-overhead backward rows failed); where both measured a row, the runs' row stays,
    so that a fit made on them moves only by what they lack. Raises ValueError where the runs and the reference
    share no row."""
    import statistics

    def key(row: dict) -> tuple:
        return row["case"], row["size"], row["mode"]

    def medians(of: list[dict]) -> dict[tuple, dict[str, float]]:
        measured: dict[tuple, dict[str, list[float]]] = {}
        for run in of:
            for row in run["rows"]:
                if "error" not in row:
                    for field in ("cpu_us", "wall_us"):
                        if field in row:
                            measured.setdefault(key(row), {}).setdefault(field, []).append(row[field])
        return {k: {f: statistics.median(v) for f, v in fields.items()} for k, fields in measured.items()}

    merged = medians(runs) if runs else {}
    scale = 1.0
    if reference is not None:
        theirs = {key(r): r["cpu_us"] for r in reference["rows"] if "error" not in r}
        shared = [merged[k]["cpu_us"] / theirs[k] for k in merged if k in theirs]
        if not shared:
            raise ValueError("the probe runs and the reference run measured no case in common")
        scale = statistics.median(shared)
    rows = {k: {"case": k[0], "size": k[1], "mode": k[2], **{f: round(v / scale, 3) for f, v in fields.items()}}
            for k, fields in merged.items()}
    for k, fields in medians(list(host_runs)).items():
        if k not in rows:
            rows[k] = {"case": k[0], "size": k[1], "mode": k[2], **{f: round(v, 3) for f, v in fields.items()},
                       "on_profiled_host": True}
    return {"command": " + ".join(r.get("command", "?") for r in [*runs, *host_runs]),
            "runs": len(runs) + len(host_runs), "host_ratio_to_reference": round(scale, 4),
            "rows": list(rows.values())}


def nonnegative_relative_fit(rows: list[list[float]], targets: list[float], measured: list[float]) -> list[float]:
    """Per-unit costs >= 0 minimizing sum(((rows . c) - target) / measured)^2 (scipy's NNLS): the error
    relative to each call's measured time, so that 30 µs and 1 ms calls count alike."""
    import numpy as np
    from scipy.optimize import nnls

    weights = 1.0 / np.array(measured, dtype=float)
    coef, _ = nnls(np.array(rows, dtype=float) * weights[:, None], np.array(targets, dtype=float) * weights)
    return [float(c) for c in coef]


def has_backward(capture) -> bool:
    """Whether the captured call runs a backward (autograd's engine thread runs it while the caller waits)."""
    return any(op.phase == "backward" for op in capture.ops)


def fit(doc: dict, capture: Callable[[str, int, str | None], object],
        wall_modes: tuple[str, ...] = ()) -> tuple[dict, list[dict]]:
    """(per-unit µs, the probe's rows with their units, rest and fitted µs) from a probe document (its `rows`:
    case, size, mode, cpu_us and maybe wall_us) and `capture(case, size, mode)`, the case captured here (mode None:
    eager). A row's target (`host_us`) is its calling thread's CPU time, except for a call with a backward in
    `wall_modes` (modes, "eager" included) where the row has a wall time: autograd runs the backward on its own
    thread while the caller waits, so the caller's CPU time leaves the backward out and the call's wall time is
    its host time (the probe's kernels are too small to hold the host up)."""
    def target(row: dict, cap) -> float:
        if row["mode"] in wall_modes and "wall_us" in row and has_backward(cap):
            return row["wall_us"]
        return row["cpu_us"]

    eager_miss = {}  # (case, size) -> µs per GEMM the eager model misses on this host
    for row in doc["rows"]:
        if "error" not in row and row["mode"] == "eager":
            cap = capture(row["case"], row["size"], None)
            if gemm_launches(cap):
                eager_miss[(row["case"], row["size"])] = (target(row, cap) - rest_us(cap)) / gemm_launches(cap)
    rows = []
    for row in doc["rows"]:
        if "error" in row or row["mode"] == "eager":
            continue
        cap = capture(row["case"], row["size"], row["mode"])
        rest = rest_us(cap) + eager_miss.get((row["case"], row["size"]), 0.0) * gemm_launches(cap)
        rows.append({**row, "host_us": target(row, cap), "units": units_of(cap), "rest_us": round(rest, 2)})
    out = {}
    for names, mode in ((DEFAULT_UNITS, "default"), (REPLAY_UNITS, "reduce-overhead")):
        picked = [r for r in rows if r["mode"] == mode]
        known = [sum(out.get(n, 0.0) * r["units"][n] for n in SHARED_UNITS if n not in names) for r in picked]
        coef = nonnegative_relative_fit([[r["units"][n] for n in names] for r in picked],
                                        [r["host_us"] - r["rest_us"] - k for r, k in zip(picked, known)],
                                        [r["host_us"] for r in picked])
        for name, c in zip(names, coef):
            out[name] = round(c, 3)
    for r in rows:
        names = DEFAULT_UNITS if r["mode"] == "default" else (*REPLAY_UNITS, *SHARED_UNITS)
        r["fitted_us"] = round(r["rest_us"] + sum(out[n] * r["units"][n] for n in names), 2)
    return out, rows
