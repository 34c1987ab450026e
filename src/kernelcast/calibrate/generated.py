"""Measured points for Inductor's generated Triton kernels, read from a device run of compiled steps.

scripts/compile_measure.py profiles compiled zoo workloads on the GPU: every kernel of one step with its name and
duration, and Inductor's own byte count per generated kernel (`triton_bytes`: the `kernel_num_gb` its codegen
writes into each kernel, the figure the capture also costs them by, costs/generated.py). A kernel's class is in
its name, as Inductor names them (torch/_inductor/codegen/triton.py: `triton_` + `poi` / `red` / `per` ...), so
each profiled launch of a generated kernel whose bytes are known without doubt is one point of its class's
size curve, in the profile's memory-point format: [bytes moved, work items, time µs, innermost dim, item size].

A kernel name that several compiled graphs define with different bytes (`triton_bytes` lists each) is left out:
the profile does not say which one ran. Item size and row length are not in the measurement; the points carry
1 and 4. The profile keeps, per class, a launch floor and a sustained bandwidth fitted to them
(fit_launch_and_bandwidth), which predict/calibrated.py reads for the triton_* kinds.
"""

from __future__ import annotations

import statistics
from typing import Iterable

# Inductor's kernel-name prefix -> kernelcast's cost kind (costs/generated.py GENERATED_KINDS, by class).
NAME_PREFIX_KINDS = {
    "triton_poi_": "triton_pointwise",
    "triton_red_": "triton_reduction",
    "triton_per_": "triton_persistent_reduction",
}
UNKNOWN_INNER = 1
UNKNOWN_ITEMSIZE = 4


def kind_of(kernel_name: str) -> str | None:
    """The cost kind of a generated kernel by its name; None for anything else (cuBLAS, templates, eager)."""
    return next((kind for prefix, kind in NAME_PREFIX_KINDS.items() if kernel_name.startswith(prefix)), None)


def generated_points(workload: dict) -> Iterable[tuple[str, list]]:
    """(kind, [bytes, 1, time_us, inner, itemsize]) for every profiled launch of a generated kernel of one
    workload of compile_measure's JSON, over its compiled variants."""
    for variant, result in sorted(workload.get("variants", {}).items()):
        if variant == "eager":
            continue
        known = {name: values[0] for name, values in (result.get("triton_bytes") or {}).items()
                 if values and len(set(values)) == 1}
        for _chain, _module, name, time_us in result.get("kernels", ()):
            kind = kind_of(name)
            if kind is not None and name in known and known[name] > 0 and time_us > 0:
                yield kind, [float(known[name]), 1, round(float(time_us), 3), UNKNOWN_INNER, UNKNOWN_ITEMSIZE]


def generated_memory_points(measured: dict, leave_out: str | None = None) -> dict[str, list]:
    """Per cost kind, the sorted points of every workload in compile_measure's JSON (but `leave_out`, a
    workload name: for held-out checks)."""
    points: dict[str, list] = {}
    for workload in measured.get("workloads", ()):
        if workload.get("name") == leave_out:
            continue
        for kind, row in generated_points(workload):
            points.setdefault(kind, []).append(row)
    return {kind: sorted(rows) for kind, rows in points.items()}


# Launch floors tried for a class's fit, µs (the H200's work-item floor is ~1.3 µs; generated kernels that
# read a few bytes measured 1.1-3 µs).
LAUNCH_GRID_US = tuple(x / 4 for x in range(4, 41))
MIN_FIT_POINTS = 6
# Points within this much of the floor say nothing of the bandwidth: they are left out of its median.
FLOOR_MARGIN_US = 0.3


def fit_launch_and_bandwidth(rows: list) -> tuple[float, float, float]:
    """(launch_us, bytes_per_us, median relative error) of time = launch_us + bytes / bytes_per_us over a
    class's points ([bytes, 1, time_us, ...]): for each floor on LAUNCH_GRID_US the bandwidth is the median of
    bytes / (time - floor) over the points above the floor, and the floor whose line has the smallest median
    relative error is kept. Two parameters a class, not a curve through every point: Inductor's byte count
    differs from what a kernel moves by its broadcasts and reuse, so neighbouring points scatter, and a curve
    through them generalised worse to held-out workloads (scripts/triton_rates_eval.py).
    Raises ValueError with fewer than MIN_FIT_POINTS points."""
    if len(rows) < MIN_FIT_POINTS:
        raise ValueError(f"a fit needs {MIN_FIT_POINTS} points, got {len(rows)}")
    best: tuple[float, float, float] | None = None
    for launch_us in LAUNCH_GRID_US:
        rates = [r[0] / (r[2] - launch_us) for r in rows if r[2] > launch_us + FLOOR_MARGIN_US]
        if len(rates) < MIN_FIT_POINTS // 2:
            continue
        rate = statistics.median(rates)
        error = statistics.median(abs(launch_us + r[0] / rate - r[2]) / r[2] for r in rows)
        if best is None or error < best[2]:
            best = (launch_us, rate, error)
    if best is None:
        raise ValueError("no launch floor leaves enough points above it")
    return best


def generated_fits(measured: dict, leave_out: str | None = None) -> dict[str, dict]:
    """The profile's `timings.generated` section: per cost kind with enough points, its launch floor, its
    sustained bandwidth and the fit's own median error, with the number of points (see
    fit_launch_and_bandwidth). `leave_out`: a workload name kept out (held-out checks)."""
    fits = {}
    for kind, rows in generated_memory_points(measured, leave_out).items():
        if len(rows) < MIN_FIT_POINTS:
            continue
        launch_us, bytes_per_us, error = fit_launch_and_bandwidth(rows)
        fits[kind] = {"launch_us": launch_us, "bytes_per_us": round(bytes_per_us, 1),
                      "fit_median_error": round(error, 4), "points": len(rows)}
    return fits
