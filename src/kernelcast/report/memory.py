"""Device memory in the report: the out-of-memory verdict (printed first), the memory lines of the summary,
the --json keys, and the memory counter track of the Perfetto trace."""

from __future__ import annotations

from kernelcast.predict import Prediction
from kernelcast.predict.memory import MemoryFix, MemoryPrediction

GIB, MIB = 2**30, 2**20
TRACE_MEMORY_PID = 3  # the trace's process for counters (1: host, 2: GPU; see trace.py)


def human_bytes(n: float) -> str:
    if abs(n) >= GIB:
        return f"{n / GIB:.2f} GiB"
    if abs(n) >= MIB:
        return f"{n / MIB:.1f} MiB"
    return f"{n / 1024:.1f} KiB"


def _short(op: str) -> str:
    return op.removeprefix("aten.").removesuffix(".default")


def peak_op_text(mem: MemoryPrediction) -> str:
    p = mem.peak_op
    if p is None:
        return "before the step's first op"
    return f"{_short(p.op)} ({p.phase}{', ' + p.module if p.module else ''}) at {p.source or '?'}"


def fix_line(fix: MemoryFix) -> str:
    if fix.peak_bytes is None:
        return f"  - {fix.name}: not re-predicted ({fix.note})"
    verdict = "fits" if fix.fits else "still out of memory"
    time = f", step {fix.step_time_us / 1000:.2f} ms" if fix.step_time_us else ""
    note = f" ({fix.note})" if fix.note else ""
    return (f"  - {fix.name}: peak {human_bytes(fix.peak_bytes)} allocated, {human_bytes(fix.reserved_bytes)} "
            f"reserved at most -> {verdict}{time}{note}")


def oom_verdict_lines(pred: Prediction) -> list[str]:
    """Leads the report when the step does not fit: the numbers, where it fails, what would make it fit."""
    mem = pred.memory
    if mem is None or mem.fit is None or mem.fit.fits:
        return []
    fit = mem.fit
    lines = [f"OUT OF MEMORY on {pred.gpu.name}: the step's peak is {human_bytes(mem.peak_bytes)} allocated "
             f"({human_bytes(mem.resident_bytes)} resident before it; the allocator would reserve "
             f"{human_bytes(mem.peak_reserved_bytes)} with no limit) where {human_bytes(fit.usable_bytes)} is usable "
             f"({human_bytes(fit.capacity_bytes)} less the CUDA context's {human_bytes(fit.context_bytes)}, assumed)."]
    if fit.oom is not None:
        where = (f"{_short(fit.oom.op.op)} at {fit.oom.op.source or '?'}" if fit.oom.op is not None
                 else f"the {fit.oom.stage}")
        lines.append(f"  It fails in {where}, asking for {human_bytes(fit.oom.segment_bytes)} with "
                     f"{human_bytes(fit.oom.allocated_bytes)} allocated and {human_bytes(fit.oom.reserved_bytes)} "
                     "reserved (after releasing the allocator's cache).")
    if mem.fixes:
        lines.append("What would make it fit (each re-predicted by capturing the step again):")
        lines += [fix_line(f) for f in mem.fixes]
    else:
        lines.append("  (re-predicted fixes need the workload file: run `kernelcast predict FILE.py:build`)")
    return lines


def memory_lines(pred: Prediction) -> list[str]:
    """The summary's memory lines: peak, resident, reserved; what is live at the peak; whether it fits."""
    mem = pred.memory
    if mem is None:
        return ["memory: not predicted (a capture saved without its memory trace; capture it again)"]
    cats = ", ".join(f"{name} {human_bytes(n)}" for name, n in mem.by_category.items() if n)
    lines = [f"memory: peak {human_bytes(mem.peak_bytes)} (max_memory_allocated over the step), "
             f"resident {human_bytes(mem.resident_bytes)} before it, reserved {human_bytes(mem.reserved_bytes)} "
             f"after it{' (expandable segments)' if mem.expandable_segments else ''}; peak at "
             f"{peak_op_text(mem)}",
             f"at the peak: {cats}"]
    if mem.by_module:
        lines.append("made by: " + ", ".join(f"{m} {human_bytes(n)}" for m, n in mem.by_module[:5]))
    fit = mem.fit
    if fit is not None and fit.fits:
        lines.append(f"fits on {pred.gpu.name}: {human_bytes(fit.peak_reserved_bytes)} reserved at most, "
                     f"{human_bytes(fit.headroom_bytes)} to spare of {human_bytes(fit.usable_bytes)} usable "
                     f"({human_bytes(fit.capacity_bytes)} less the CUDA context's {human_bytes(fit.context_bytes)}, "
                     "assumed)")
    lines += [f"memory note: {n}" for n in mem.notes]
    return lines


def _fix_json(fix: MemoryFix) -> dict:
    return {"name": fix.name, "peak_memory_bytes": fix.peak_bytes, "reserved_memory_bytes": fix.reserved_bytes,
            "fits": fix.fits, "step_time_us": fix.step_time_us, "note": fix.note}


def memory_json(pred: Prediction) -> dict:
    """The --json memory keys (peak_memory_bytes, resident_memory_bytes, reserved_memory_bytes,
    memory_by_category, peak_op, fits and details); all None for a capture without a memory trace."""
    mem = pred.memory
    if mem is None:
        return {"peak_memory_bytes": None, "resident_memory_bytes": None, "reserved_memory_bytes": None,
                "memory_by_category": None, "peak_op": None, "fits": None}
    fit = mem.fit
    return {
        "peak_memory_bytes": mem.peak_bytes, "resident_memory_bytes": mem.resident_bytes,
        "reserved_memory_bytes": mem.reserved_bytes, "peak_reserved_memory_bytes": mem.peak_reserved_bytes,
        "memory_by_category": dict(mem.by_category),
        "memory_by_module": [{"module": m, "bytes": n} for m, n in mem.by_module],
        "peak_op": None if mem.peak_op is None else {
            "index": mem.peak_op.index, "op": mem.peak_op.op, "phase": mem.peak_op.phase,
            "module": mem.peak_op.module, "source": mem.peak_op.source},
        "fits": None if fit is None else {
            "fits": fit.fits, "gpu": fit.gpu, "capacity_bytes": fit.capacity_bytes,
            "cuda_context_bytes": fit.context_bytes, "usable_bytes": fit.usable_bytes,
            "peak_reserved_bytes": fit.peak_reserved_bytes, "headroom_bytes": fit.headroom_bytes,
            "oom": None if fit.oom is None else {
                "stage": fit.oom.stage, "op": None if fit.oom.op is None else fit.oom.op.op,
                "source": None if fit.oom.op is None else fit.oom.op.source,
                "requested_bytes": fit.oom.requested_bytes, "segment_bytes": fit.oom.segment_bytes,
                "allocated_bytes": fit.oom.allocated_bytes, "reserved_bytes": fit.oom.reserved_bytes},
            "notes": list(fit.notes), "fixes": [_fix_json(f) for f in mem.fixes]},
        "memory_workspaces": [{"kind": w.kind, "thread": w.thread, "stream": w.stream, "bytes": w.nbytes}
                              for w in mem.workspaces],
        "memory_notes": list(mem.notes), "expandable_segments": mem.expandable_segments,
    }


def memory_counter_events(pred: Prediction) -> list[dict]:
    """Perfetto counter tracks of memory_allocated() and memory_reserved() (MiB) over the step, at the time the
    host issues each op (the caching allocator works in host order)."""
    mem, timeline = pred.memory, pred.timeline
    if mem is None or timeline is None:
        return []
    events = [{"ph": "M", "pid": TRACE_MEMORY_PID, "name": "process_name",
               "args": {"name": "device memory (predicted)"}}]
    spans = timeline.spans
    start = {"ph": "C", "pid": TRACE_MEMORY_PID, "name": "memory (MiB)", "ts": 0.0,
             "args": {"allocated": round(mem.resident_bytes / MIB, 3)}}
    events.append(start)
    for index, allocated, reserved in mem.timeline:
        if 0 <= index < len(spans):
            events.append({"ph": "C", "pid": TRACE_MEMORY_PID, "name": "memory (MiB)", "ts": spans[index].cpu_start_us,
                           "args": {"allocated": round(allocated / MIB, 3), "reserved": round(reserved / MIB, 3)}})
    return events
