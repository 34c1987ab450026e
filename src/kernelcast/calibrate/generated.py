"""Measured points and fits for Inductor's generated Triton kernels.

The profile's `timings.generated` comes from the designed grid of compiled microbenchmarks (calibrate section
`triton_grid`, calibrate/triton_grid.py): per kernel class a launch floor and a sustained bandwidth
(grid_fits), and for kernels that add atomically a time per element added and per index (atomics_fit). The
compiled zoo steps are the held-out check (scripts/eval/triton_rates_eval.py), read by the functions below.

scripts/device/compile_measure.py profiles compiled zoo workloads on the GPU: every kernel of one step with its name and
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

from kernelcast.costs.generated import atomics_features

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
    through them generalised worse to held-out workloads (scripts/eval/triton_rates_eval.py).
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


def _fit_entry(rows: list) -> dict:
    launch_us, bytes_per_us, error = fit_launch_and_bandwidth(rows)
    return {"launch_us": launch_us, "bytes_per_us": round(bytes_per_us, 1), "fit_median_error": round(error, 4),
            "points": len(rows)}


def grid_points(raw: dict) -> dict[str, list]:
    """Per cost kind, the points ([bytes, 1, time µs, 1, 4]) of the triton_grid section's generated kernels
    that do not add atomically (their time follows the atomics: atomics_fit)."""
    points: dict[str, list] = {}
    for case in raw.get("cases", ()):
        if case.get("kind") != "triton_grid" or "error" in case:
            continue
        atomic = set(case.get("atomic_kernels", ()))
        for name, time_us, num_bytes, _all in case.get("kernels", ()):
            kind = kind_of(name)
            if kind is not None and name not in atomic and num_bytes and time_us > 0:
                points.setdefault(kind, []).append([float(num_bytes), 1, float(time_us), UNKNOWN_INNER,
                                                    UNKNOWN_ITEMSIZE])
    return {kind: sorted(rows) for kind, rows in points.items()}


def atomic_points(raw: dict) -> list[tuple[int, int, float, float]]:
    """(elements added, indices, destination bytes, time µs) of each atomic kernel of the grid's scatter-add
    cases, whose shape is [indices, row width, destination rows] (triton_grid.ATOMIC_CASES)."""
    out = []
    for case in raw.get("cases", ()):
        if case.get("kind") != "triton_grid" or "error" in case or not case.get("atomic_kernels"):
            continue
        indices, width, rows = case["shape"][:3]
        itemsize = 4 if case["dtype"] == "float32" else 2
        for name, time_us, _bytes, _all in case.get("kernels", ()):
            if name in case["atomic_kernels"] and time_us > 0:
                out.append((indices * width, indices, float(rows * width * itemsize), float(time_us)))
    return out


# The L2 capacity an atomic scatter's destination can stay resident in, as shares of the L2 size, tried by
# atomics_fit: the H100/H200 L2 is two partitions (NVIDIA H100 whitepaper), and on the H200's grid the fit held
# best at half of it (median error 2.8% vs 7.3% at the whole).
L2_SHARES_TRIED = (0.25, 0.5, 0.75, 1.0)


def _atomics_fit_at(points: list[tuple[int, int, float, float]], l2_bytes: float) -> dict:
    from .time_model import relative_least_squares

    rows = [atomics_features(e, i, d, l2_bytes) for e, i, d, _ in points]
    times = [t for *_, t in points]
    coef = relative_least_squares(rows, times)
    errors = [abs(sum(c * x for c, x in zip(coef, row)) / t - 1) for row, t in zip(rows, times)]
    return {"floor_us": round(coef[0], 4), "us_per_element_l2": coef[1], "us_per_element_dram": coef[2],
            "us_per_index": coef[3], "l2_bytes": l2_bytes, "points": len(points),
            "median_error": round(statistics.median(errors), 4), "worst_error": round(max(errors), 4)}


def atomics_fit(points: list[tuple[int, int, float, float]], l2_bytes: float) -> dict | None:
    """time = floor_us + us_per_element_l2 x elements (L2 share) + us_per_element_dram x elements (the rest)
    + us_per_index x indices (costs/generated.py atomics_features), least squares on relative error over the
    grid's atomic scatter-adds, with the resident capacity (`l2_bytes` in the fit) the share of the GPU's
    `l2_bytes` on L2_SHARES_TRIED that fits best. None with fewer than MIN_FIT_POINTS points."""
    if len(points) < MIN_FIT_POINTS:
        return None
    fits = [_atomics_fit_at(points, share * l2_bytes) for share in L2_SHARES_TRIED]
    return min(fits, key=lambda fit: fit["median_error"])


def grid_fits(raw: dict, l2_bytes: float) -> dict[str, dict]:
    """The profile's `timings.generated` from a triton_grid run: per cost kind with enough points its launch
    floor, sustained bandwidth and the fit's own median error (fit_launch_and_bandwidth), and "atomics"
    (atomics_fit; `l2_bytes`: the profiled GPU's L2) where the run had scatter-add cases."""
    fits = {kind: _fit_entry(rows) for kind, rows in grid_points(raw).items() if len(rows) >= MIN_FIT_POINTS}
    atomics = atomics_fit(atomic_points(raw), l2_bytes)
    if atomics:
        fits["atomics"] = atomics
    return fits


def generated_fits(measured: dict, leave_out: str | None = None) -> dict[str, dict]:
    """The profile's `timings.generated` section: per cost kind with enough points, its launch floor, its
    sustained bandwidth and the fit's own median error, with the number of points (see
    fit_launch_and_bandwidth). `leave_out`: a workload name kept out (held-out checks)."""
    return {kind: _fit_entry(rows) for kind, rows in generated_memory_points(measured, leave_out).items()
            if len(rows) >= MIN_FIT_POINTS}
