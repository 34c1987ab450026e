"""The timeline of one predicted step from an idle CPU and GPU: what the CPU does (the model's Python, then each
op's dispatch and launch, and waits at sync points) over what each GPU stream runs, so the gaps where the GPU
waits for the CPU show. The time a host timer without torch.cuda.synchronize() would read is marked, and a
panel of device memory over the step is added when the prediction carries one (`memory_timeline`).

Returns a matplotlib Figure; no global state.
"""

from __future__ import annotations

import textwrap

from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kernelcast.records import COMM_STREAM, PredictionRecord

from . import as_record
from .format import short_op, short_source, time_text
from .memory import memory_series

PYTHON_COLOUR = "#9467bd"  # the model's own Python
LAUNCH_COLOUR = "#f0a30a"  # amber: dispatch and launch
SYNC_COLOUR = "#d62728"  # the CPU waits for the GPU
KERNEL_COLOUR = "#2ca02c"  # green: kernels
COMM_COLOUR = "#17becf"  # collectives on NCCL's stream
IDLE_COLOUR = "#fbe3e3"  # the GPU runs nothing
HOST_TIMER_COLOUR = "#b35900"
BAR_HEIGHT = 0.7
PHASE_Y = 0.95  # the phases' brackets, above the CPU lane and its sync labels
# a phase run centred this close to either end of the step (a share of it) is labelled from that end
PHASE_LABEL_EDGE = 0.1
IDLE_LABEL_FRACTION = 0.04  # label an idle gap of at least this share of the step with its length ...
IDLE_LABELS = 3  # ... the longest few of them
SYNC_LABELS = 3  # name the first few sync points; the rest are marked only
BYTES_PER_GB = 1e9
SHOW_CAPACITY_FROM = 0.25  # draw the GPU's memory capacity when the peak reaches this share of it
# One unit for the whole axis, picked by the step's length.
TIME_UNITS = ((2e6, "s", 1e6), (2e3, "ms", 1e3), (0.0, "µs", 1.0))


@dataclass(frozen=True)
class Lanes:
    python: list[tuple[float, float]]  # (start, width) in µs
    launch: list[tuple[float, float]]
    sync: list[tuple[float, float]]
    sync_ops: list[int]  # op index of each sync wait
    gpu: dict[int, list[tuple[float, float]]]  # stream -> kernels


def lanes(rec: PredictionRecord) -> Lanes:
    """The bars of each lane, from the record's spans (µs from the step's start)."""
    out = Lanes([], [], [], [], {})
    for op, span in zip(rec.ops, rec.spans):
        host = min(op.host_us, span.cpu_end_us - span.cpu_start_us)
        python = min(op.python_us, host)
        if python > 0:
            out.python.append((span.cpu_start_us, python))
        if host - python > 0:
            out.launch.append((span.cpu_start_us + python, host - python))
        if span.sync_wait_us > 0:
            out.sync.append((span.cpu_start_us + host, span.sync_wait_us))
            out.sync_ops.append(op.index)
        if span.gpu_start_us is not None and span.gpu_end_us is not None:
            out.gpu.setdefault(span.stream, []).append((span.gpu_start_us, span.gpu_end_us - span.gpu_start_us))
    return out


def idle_gaps(busy: list[tuple[float, float]], end_us: float) -> list[tuple[float, float]]:
    """(start, width) of every stretch in [0, end_us] with no bar of `busy` (on any stream)."""
    gaps, at = [], 0.0
    for start, width in sorted(busy):
        if start > at:
            gaps.append((at, start - at))
        at = max(at, start + width)
    if end_us > at:
        gaps.append((at, end_us - at))
    return gaps


def phase_runs(rec: PredictionRecord) -> list[tuple[float, float, str]]:
    """(CPU start, CPU end, phase) of each run of consecutive ops in one phase (records.PHASES)."""
    runs: list[tuple[float, float, str]] = []
    for op, span in zip(rec.ops, rec.spans):
        if runs and runs[-1][2] == op.phase:
            runs[-1] = (runs[-1][0], span.cpu_end_us, op.phase)
        else:
            runs.append((span.cpu_start_us, span.cpu_end_us, op.phase))
    return runs


def _unit(end_us: float) -> tuple[str, float]:
    return next((name, scale) for limit, name, scale in TIME_UNITS if end_us >= limit)


def _scaled(bars: list[tuple[float, float]], scale: float) -> list[tuple[float, float]]:
    return [(s / scale, w / scale) for s, w in bars]


def stream_label(stream: int) -> str:
    return "GPU: NCCL stream" if stream == COMM_STREAM else f"GPU: stream {stream}"


# Characters per line of the title at fontsize 10 over the axes' width (the figure is 11 in wide, its legend right).
TITLE_CHARS = 120


def plot_timeline(pred, title: str | None = None) -> Figure:
    """CPU lane over one lane per GPU stream (and device memory below, when the prediction has it)."""
    rec = as_record(pred)
    if not rec.spans:
        raise ValueError("this prediction was saved without its timeline (no spans): predict it again")
    bars = lanes(rec)
    memory = memory_series(rec.memory_timeline, rec.spans) if rec.memory_timeline is not None else None
    end_us = max(rec.first_step_us, rec.naive_host_timer_us, max((s.cpu_end_us for s in rec.spans), default=0.0))
    unit, scale = _unit(end_us)
    streams = sorted(bars.gpu) or [0]
    n_lanes = 1 + len(streams)

    fig = Figure(figsize=(11.0, 1.3 + 0.75 * n_lanes + (2.2 if memory else 0.0)), layout="constrained")
    if memory:
        ax, mem_ax = fig.subplots(2, 1, sharex=True, height_ratios=(n_lanes, 2.4))
    else:
        ax, mem_ax = fig.add_subplot(), None
    cpu_y = n_lanes - 1
    y_of = {s: n_lanes - 2 - i for i, s in enumerate(streams)}
    half = BAR_HEIGHT / 2

    all_kernels = [b for s in streams for b in bars.gpu.get(s, [])]
    gaps = idle_gaps(all_kernels, rec.first_step_us)
    gpu_bottom, gpu_top = y_of[streams[-1]] - half, y_of[streams[0]] + half
    ax.broken_barh(_scaled(gaps, scale), (gpu_bottom, gpu_top - gpu_bottom), facecolors=IDLE_COLOUR, zorder=1)
    for s in streams:
        colour = COMM_COLOUR if s == COMM_STREAM else KERNEL_COLOUR
        ax.broken_barh(_scaled(bars.gpu.get(s, []), scale), (y_of[s] - half, BAR_HEIGHT), facecolors=colour,
                       edgecolors=colour, linewidth=0.3, zorder=2)
    for width_bars, colour in ((bars.python, PYTHON_COLOUR), (bars.launch, LAUNCH_COLOUR)):
        ax.broken_barh(_scaled(width_bars, scale), (cpu_y - half, BAR_HEIGHT), facecolors=colour, edgecolors=colour,
                       linewidth=0.3, zorder=2)
    ax.broken_barh(_scaled(bars.sync, scale), (cpu_y - half, BAR_HEIGHT), facecolors="white", edgecolors=SYNC_COLOUR,
                   hatch="////", linewidth=0.8, zorder=2)

    for (start, width) in sorted(gaps, key=lambda g: -g[1])[:IDLE_LABELS]:
        if width >= IDLE_LABEL_FRACTION * rec.first_step_us:
            ax.text((start + width / 2) / scale, gpu_bottom - 0.08, f"idle {time_text(width)}",
                    ha="center", va="top", fontsize=7, color="#a33")
    by_index = {op.index: op for op in rec.ops}
    for i, ((start, width), index) in enumerate(zip(bars.sync, bars.sync_ops)):
        ax.plot([start / scale], [cpu_y + half + 0.05], marker="v", color=SYNC_COLOUR, ms=6, zorder=4,
                clip_on=False)
        if i < SYNC_LABELS:
            op = by_index[index]
            ax.annotate(f"sync: {op.sync or short_op(op.op)} at {short_source(op.source) or '?'} "
                        f"(waits {time_text(width)})", (start / scale, cpu_y + half + 0.05),
                        textcoords="offset points", xytext=(3 if start < end_us / 2 else -3, 4 + 9 * i), fontsize=7,
                        color=SYNC_COLOUR, ha="left" if start < end_us / 2 else "right")

    for x_us, colour, text in ((rec.naive_host_timer_us, HOST_TIMER_COLOUR,
                                f"host timer without synchronize: {time_text(rec.naive_host_timer_us)}"),
                               (rec.first_step_us, "black", f"GPU done: {time_text(rec.first_step_us)}")):
        for a in (ax, mem_ax):
            if a is not None:
                a.axvline(x_us / scale, color=colour, ls="--", lw=1.0, zorder=5)
        ax.text(x_us / scale, -0.75 - (0.3 if colour == "black" else 0.0), text, color=colour, fontsize=7,
                ha="right" if x_us > end_us / 2 else "left", va="top", zorder=5)

    for start_us, end, phase in phase_runs(rec):
        ax.annotate("", (start_us / scale, cpu_y + PHASE_Y), (end / scale, cpu_y + PHASE_Y),
                    arrowprops={"arrowstyle": "|-|", "color": "#777777", "lw": 0.6, "shrinkA": 0, "shrinkB": 0,
                                "mutation_scale": 2})
        # a short run at either end of the step is labelled from that end inward, so that its name stays inside
        # the axes (a post-backward run of a few ops at the end had run past the right edge)
        middle = (start_us + end) / 2
        x_us, ha = ((end, "right") if middle > (1.0 - PHASE_LABEL_EDGE) * end_us else
                    (start_us, "left") if middle < PHASE_LABEL_EDGE * end_us else (middle, "center"))
        ax.text(x_us / scale, cpu_y + PHASE_Y + 0.05, phase, ha=ha, va="bottom", fontsize=7, color="#555555")
    ax.set_yticks([cpu_y] + [y_of[s] for s in streams],
                  ["CPU: Python thread"] + [stream_label(s) for s in streams])
    ax.set_ylim(-1.3, cpu_y + PHASE_Y + 0.35)
    ax.set_xlim(0, end_us * 1.01 / scale)
    ax.grid(True, axis="x", alpha=0.25)
    if mem_ax is None:
        ax.set_xlabel(f"time from the step's start ({unit})")
    idle = sum(w for _, w in gaps)
    # wrapped to the axes' width: a long workload path had run the one-line title past the figure's edge
    ax.set_title(textwrap.fill(title or (
        f"{rec.workload or 'step'} on {rec.gpu_name}: one step from an idle GPU (predicted); GPU idle "
        f"{time_text(idle)} of {time_text(rec.first_step_us)}; back-to-back steps {time_text(rec.step_time_us)} each"),
        TITLE_CHARS, break_long_words=True), fontsize=10)
    handles = [Patch(color=PYTHON_COLOUR, label="model Python"), Patch(color=LAUNCH_COLOUR, label="dispatch + launch"),
               Patch(facecolor="white", edgecolor=SYNC_COLOUR, hatch="////", label="sync: CPU waits for GPU"),
               Patch(color=KERNEL_COLOUR, label="kernels"), Patch(color=IDLE_COLOUR, label="GPU idle")]
    if COMM_STREAM in streams:
        handles.insert(4, Patch(color=COMM_COLOUR, label="collectives"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)

    if rec.memory_timeline is not None and memory is None:
        ax.text(0.0, -0.28, "memory_timeline present but not in a layout this report reads: not drawn",
                transform=ax.transAxes, fontsize=7, color="#a33")
    if memory is not None and mem_ax is not None:
        _memory_panel(mem_ax, memory, rec, scale, unit)
    return fig


def _memory_panel(ax, memory, rec: PredictionRecord, scale: float, unit: str) -> None:
    times = [t / scale for t in memory.times_us]
    peak = 0.0
    for name, values in memory.bytes_by_name.items():
        gb = [v / BYTES_PER_GB for v in values]
        peak = max(peak, max(gb, default=0.0))
        ax.step(times, gb, where="post", lw=1.2, label=name.replace("_", " "))
    capacity = rec.gpu_spec.memory_bytes / BYTES_PER_GB if rec.gpu_spec and rec.gpu_spec.memory_bytes else 0.0
    if capacity and peak >= SHOW_CAPACITY_FROM * capacity:
        ax.axhline(capacity, color="black", lw=1.0, ls=":", label=f"{rec.gpu_name} memory")
    ax.set_ylabel("device memory (GB)")
    ax.set_xlabel(f"time from the step's start ({unit})")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.25)
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
