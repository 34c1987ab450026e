"""What `kernelcast fit` and `kernelcast sweep` print and write: the search's lines, the sweep's table, their JSON.
They read the what-if results' fields only (whatif/fit.py FitResult and its search, whatif/sweep.py's points), so
this stage imports no what-if code."""

from __future__ import annotations

from typing import Any

from . import prediction_json, summary_line
from .format import short_op, time_text
from .memory_text import human_bytes


def fit_search_line(name: str, low: int, high: int, gpu_name: str, margin_pct: float) -> str:
    return (f"searching {name} in {low}..{high} on {gpu_name} (one capture per value), leaving {margin_pct:g}% of "
            "the usable memory free for what the prediction can miss (--margin) ...")


def fit_progress_line(name: str, value: int, fits: bool, pred: Any, margin_pct: float) -> str:
    """One value tried: whether it fits, its peak and reserved memory, and what the margin allows."""
    mem = pred.memory
    if mem is None or mem.fit is None:
        return f"  - {name}={value}: no memory prediction"
    oom = mem.fit.oom
    if not mem.fit.fits and oom is not None:
        # the allocator's replay stops at the request that fails: its reserved figure is the state there, not the
        # step's need, so the line says which request fails and beside what (as predict's out-of-memory lines)
        where = f"in {short_op(oom.op.op)}" if oom.op is not None else f"in the {oom.stage}"
        return (f"  - {name}={value}: out of memory {where}: asks for {human_bytes(oom.segment_bytes)} with "
                f"{human_bytes(oom.allocated_bytes)} allocated and {human_bytes(oom.reserved_bytes)} reserved of "
                f"{human_bytes(mem.fit.usable_bytes)} usable (step peak {human_bytes(mem.peak_bytes)} allocated)")
    verdict = "fits" if fits else ("out of memory" if not mem.fit.fits else f"inside the {margin_pct:g}% margin")
    allowed = mem.fit.usable_bytes * (1.0 - margin_pct / 100.0)
    return (f"  - {name}={value}: {verdict} (peak {human_bytes(mem.peak_bytes)} allocated, "
            f"{human_bytes(mem.fit.peak_reserved_bytes)} reserved at most; {human_bytes(allowed)} allowed: "
            f"{human_bytes(mem.fit.usable_bytes)} usable less the margin)")


def fit_result_lines(result: Any, name: str, low: int, high: int, gpu_name: str, margin_pct: float,
                     unit: str) -> list[str]:
    """The search's answer: the largest value that fits with the margin, the first that does not, the step there
    and its throughput in `unit` per second; or that the lowest value is already out of memory."""
    search, pred = result.search, result.prediction
    if search.max_fit is None:
        return [f"no {name} in {low}..{high} fits on {gpu_name}: {name}={low} is already out of memory"]
    beyond = (f"{name}={search.first_oom} does not fit with the margin" if search.first_oom is not None
              else f"the whole range fits, up to {high}")
    return [f"largest {name} that fits on {gpu_name} with a {margin_pct:g}% margin: {search.max_fit} ({beyond}); "
            f"step {pred.step_time_us / 1000:.2f} ms, {result.throughput:,.1f} {unit} per second",
            summary_line(pred)]


def fit_json(result: Any, gpu_id: str, name: str, low: int, high: int, margin: float) -> dict:
    search, pred = result.search, result.prediction
    return {"gpu": gpu_id, "argument": name, "range": [low, high], "margin": margin, "max_batch": search.max_fit,
            "first_oom_batch": search.first_oom, "tried": [{"value": v, "fits": ok} for v, ok in search.tried],
            "throughput_per_s": result.throughput, "prediction": None if pred is None else prediction_json(pred)}


def sweep_header(name: str, unit: str) -> str:
    return f"{name:>8s} {'step':>10s} {'GPU':>10s} {unit:>14s}  bound  memory"


def sweep_row(p: Any) -> str:
    """One value of the sweep: its step and GPU time, throughput, verdict and whether it fits."""
    fits = "" if p.fits is None else ("fits" if p.fits else "out of memory")
    return (f"{p.value:8d} {time_text(p.step_us):>10s} {time_text(p.gpu_us):>10s} {p.throughput():14,.1f}  "
            f"{p.bound:5s}  {fits}")


def sweep_verdict(name: str, low: int, high: int, first_gpu_bound: int | None) -> str:
    return (f"GPU-bound from {name}={first_gpu_bound} on" if first_gpu_bound is not None else
            f"not GPU-bound anywhere in {name}={low}..{high}: the host sets the step")


def sweep_json(points: list, gpu_id: str, name: str, first_gpu_bound: int | None) -> dict:
    return {"gpu": gpu_id, "argument": name, "gpu_bound_from": first_gpu_bound,
            "points": [{"value": p.value, "step_time_us": p.step_us, "gpu_time_us": p.gpu_us, "bound": p.bound,
                        "fits": p.fits, "throughput_per_s": p.throughput()} for p in points]}
