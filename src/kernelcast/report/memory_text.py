"""Device memory in the report, from the prediction record's memory keys (predict/memory.py memory_json): the
out-of-memory verdict (printed first), the memory lines of the summary, and the Perfetto trace's counter track."""

from __future__ import annotations

from kernelcast.records.memory import MIB, human_bytes
from kernelcast.records import PredictionRecord

from .format import short_paths, short_source, time_text

TRACE_MEMORY_PID = 3  # the trace's process for counters (1: host, 2: GPU; see trace.py)


def _short(op: str) -> str:
    return op.removeprefix("aten.").removesuffix(".default")


def peak_op_text(mem: dict) -> str:
    p = mem.get("peak_op")
    if not p:
        return "before the step's first op"
    return (f"{_short(p['op'])} ({p['phase']}{', ' + p['module'] if p.get('module') else ''}) at "
            f"{short_source(p.get('source') or '') or '?'}")


def fix_line(fix: dict) -> str:
    if fix.get("peak_memory_bytes") is None:
        return f"  - {fix['name']}: not re-predicted ({fix.get('note', '')})"
    time = f", step {time_text(fix['step_time_us'])}" if fix.get("step_time_us") else ""
    note = f" ({short_paths(fix['note'])})" if fix.get("note") else ""
    if fix.get("fits"):
        return (f"  - {fix['name']}: peak {human_bytes(fix['peak_memory_bytes'])} allocated, "
                f"{human_bytes(fix['reserved_memory_bytes'])} reserved at most -> fits{time}{note}")
    # the allocator's simulation stops where a request fails: what it had reserved then, not what the step needs
    return (f"  - {fix['name']}: peak {human_bytes(fix['peak_memory_bytes'])} allocated -> still out of memory "
            f"(the next block does not fit beside the {human_bytes(fix['reserved_memory_bytes'])} reserved)"
            f"{time}{note}")


def oom_verdict_lines(rec: PredictionRecord) -> list[str]:
    """Leads the report when the step does not fit: the numbers, where it fails, what would make it fit."""
    mem = rec.memory
    fit = (mem or {}).get("fits")
    if not mem or not fit or fit.get("fits"):
        return []
    usable = (f"{human_bytes(fit['usable_bytes'])} usable ({human_bytes(fit['capacity_bytes'])} less the CUDA "
              f"context's {human_bytes(fit['cuda_context_bytes'])}, assumed)")
    oom = fit.get("oom")
    if mem["peak_reserved_memory_bytes"] <= fit["usable_bytes"] and oom:
        # both figures fit, yet a request failed: the cached segments' free space is split where the block cannot go
        lines = [f"OUT OF MEMORY on {rec.gpu_name}, though the step's peak, {human_bytes(mem['peak_memory_bytes'])} "
                 f"allocated ({human_bytes(mem['peak_reserved_memory_bytes'])} reserved with no limit), is under the "
                 f"{usable}: a block of {human_bytes(oom['segment_bytes'])} finds no room among the caching "
                 "allocator's segments (fragmentation; --expandable-segments predicts "
                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which grows one segment instead)."]
    else:
        lines = [f"OUT OF MEMORY on {rec.gpu_name}: the step's peak is {human_bytes(mem['peak_memory_bytes'])} "
                 f"allocated ({human_bytes(mem['resident_memory_bytes'])} resident before it; the allocator would "
                 f"reserve {human_bytes(mem['peak_reserved_memory_bytes'])} with no limit) with only {usable}."]
    if oom:
        where = (f"{_short(oom['op'])} at {short_source(oom.get('source') or '') or '?'}" if oom.get("op")
                 else f"the {oom['stage']}")
        lines.append(f"  It fails in {where}, asking for {human_bytes(oom['segment_bytes'])} with "
                     f"{human_bytes(oom['allocated_bytes'])} allocated and {human_bytes(oom['reserved_bytes'])} "
                     "reserved (after releasing the allocator's cache).")
    if fit.get("fixes"):
        lines.append("What would make it fit (each re-predicted by capturing the step again):")
        lines += [fix_line(f) for f in fit["fixes"]]
    elif fit.get("fixes_skipped"):
        lines.append(f"  (fixes not re-predicted: {fit['fixes_skipped']}; without it each fix is captured again, "
                     "about a minute)")
    else:
        lines.append("  (re-predicted fixes need the workload file: run `kernelcast predict FILE.py:build`)")
    return lines


def memory_lines(rec: PredictionRecord) -> list[str]:
    """The summary's memory lines: peak, resident, reserved; what is live at the peak; whether it fits."""
    mem = rec.memory
    if not mem or mem.get("peak_memory_bytes") is None:
        return ["memory: not predicted (a capture saved without its memory trace; capture it again)"]
    cats = ", ".join(f"{name} {human_bytes(n)}" for name, n in (mem.get("memory_by_category") or {}).items() if n)
    lines = [f"memory: peak {human_bytes(mem['peak_memory_bytes'])} (max_memory_allocated over the step), "
             f"resident {human_bytes(mem['resident_memory_bytes'])} before it, reserved "
             f"{human_bytes(mem['reserved_memory_bytes'])} after it"
             f"{' (expandable segments)' if mem.get('expandable_segments') else ''}; peak at {peak_op_text(mem)}",
             f"at the peak: {cats}"]
    by_module = mem.get("memory_by_module") or []
    if by_module:
        lines.append("made by: " + ", ".join(f"{m['module']} {human_bytes(m['bytes'])}" for m in by_module[:5]))
    fit = mem.get("fits")
    if fit and fit.get("fits"):
        lines.append(f"fits on {rec.gpu_name}: {human_bytes(fit['peak_reserved_bytes'])} reserved at most, "
                     f"{human_bytes(fit['headroom_bytes'])} to spare of {human_bytes(fit['usable_bytes'])} usable "
                     f"({human_bytes(fit['capacity_bytes'])} less the CUDA context's "
                     f"{human_bytes(fit['cuda_context_bytes'])}, assumed)")
    lines += [f"memory note: {n}" for n in mem.get("memory_notes") or ()]
    return lines


def memory_counter_events(rec: PredictionRecord) -> list[dict]:
    """Perfetto counter tracks of memory_allocated() and memory_reserved() (MiB) over the step, at the time the
    host issues each op (the caching allocator works in host order)."""
    mem, rows = rec.memory, rec.memory_timeline
    if not mem or not rows or not rec.spans:
        return []
    events = [{"ph": "M", "pid": TRACE_MEMORY_PID, "name": "process_name",
               "args": {"name": "device memory (predicted)"}},
              {"ph": "C", "pid": TRACE_MEMORY_PID, "name": "memory (MiB)", "ts": 0.0,
               "args": {"allocated": round(mem["resident_memory_bytes"] / MIB, 3)}}]
    for i, row in enumerate(rows):
        index = row["op_index"]
        if 0 <= index < len(rec.spans):
            # an op's high-water mark (its temporaries) at its start, what it leaves at its end
            ends_op = i > 0 and rows[i - 1]["op_index"] == index
            span = rec.spans[index]
            events.append({"ph": "C", "pid": TRACE_MEMORY_PID, "name": "memory (MiB)",
                           "ts": span.cpu_end_us if ends_op else span.cpu_start_us,
                           "args": {"allocated": round(row["allocated_bytes"] / MIB, 3),
                                    "reserved": round(row["reserved_bytes"] / MIB, 3)}})
    return events
