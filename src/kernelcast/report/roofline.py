"""The roofline: every op's kernels as a point of arithmetic intensity against achieved FLOP/s, under the GPU's
bandwidth slope and its compute roof per precision (tensor-core and not), from its datasheet entry.

    fig = plot_roofline(record)                      # predicted points
    fig = plot_roofline(record, measured={12: 80.5})  # and measured ones beside them (op index -> µs)

Ops that are identical (same op, phase, module pattern, source line, FLOPs and bytes: one per layer, say) are
one point; a point's area grows with its predicted time. Ops with no FLOPs (copies, fills) have no place on a
log-log roofline and are counted under the plot instead. Returns a matplotlib Figure; no global state.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from kernelcast.records import GPUSpec, PredictionRecord

from . import as_record
from .measured import measured_times
from .format import module_pattern, time_text

# Colour per bound (the table's "bound" column); the same colours in the timeline and the HTML report.
BOUND_COLOURS = {"compute": "#d62728", "memory": "#1f77b4", "latency": "#8c8c8c"}
OTHER_BOUND_COLOUR = "#bcbd22"  # host link, none, ...
BOUND_ORDER = ("compute", "memory", "latency")

# Roofs always drawn where the GPU has them: the precisions deep-learning steps run in. Others (fp64, ...) only
# when an op of the step ran under them.
USUAL_ROOFS = ("fp32", "tf32_tensor", "fp16_tensor", "bf16_tensor", "fp8_tensor", "fp16", "bf16")
ROOF_NAMES = {"fp64": "FP64", "fp64_tensor": "FP64 tensor", "fp32": "FP32", "tf32_tensor": "TF32 tensor",
              "fp16_tensor": "FP16 tensor", "bf16_tensor": "BF16 tensor", "fp8_tensor": "FP8 tensor",
              "fp16": "FP16", "bf16": "BF16", "int8_tensor": "INT8 tensor", "fp4_tensor": "FP4 tensor"}

POINT_AREA_MIN = 12.0  # pt², the smallest op's marker
POINT_AREA_MAX = 700.0  # pt², the op group with the most predicted time
FLOPS_PER_TFLOPS = 1e12
AXIS_MARGIN = 3.0  # the axes reach this factor beyond the outermost point or ridge
FIGSIZE = (10.0, 6.0)  # inches
# Characters per line of the title at fontsize 11 over the figure's width.
ROOFLINE_TITLE_CHARS = 90
NOTE_WIDTH_CHARS = 150  # the notes under the plot wrap at this many characters (7 pt text across 10 inches)


@dataclass(frozen=True)
class Roof:
    label: str  # "BF16/FP16 tensor"
    flops_per_s: float
    tensor_core: bool

    def ridge(self, bw_bytes_per_s: float) -> float:
        """FLOP/byte where the bandwidth slope meets this roof."""
        return self.flops_per_s / bw_bytes_per_s


@dataclass(frozen=True)
class RooflinePoint:
    """Identical ops of the step as one point."""

    label: str  # op, for a legend or tooltip
    count: int
    intensity: float  # FLOP/byte
    flops: float  # all ops of the point together
    time_us: float  # predicted, all together
    bound: str
    measured_us: float | None = None  # measured, all together (None: no measurement for these ops)

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.time_us * 1e6 if self.time_us else 0.0

    @property
    def measured_flops_per_s(self) -> float | None:
        return self.flops / self.measured_us * 1e6 if self.measured_us else None


def gpu_spec(rec: PredictionRecord) -> GPUSpec:
    """The record's datasheet entry; a prediction saved before it carried one takes the catalogue's."""
    if rec.gpu_spec is not None:
        return rec.gpu_spec
    from kernelcast.devices import get_gpu

    gpu = get_gpu(rec.gpu)
    return GPUSpec(dict(gpu.peak_flops), gpu.mem_bw_bytes_per_s, gpu.memory_bytes)


def roofs(spec: GPUSpec, used: set[str] = frozenset()) -> list[Roof]:
    """One roof per distinct peak (FP16 and BF16 tensor share one where equal), highest first."""
    by_value: dict[tuple[float, bool], list[str]] = defaultdict(list)
    for key, value in spec.peak_flops.items():
        if key in USUAL_ROOFS or key in used:
            by_value[(value, key.endswith("_tensor"))].append(ROOF_NAMES.get(key, key))
    out = [Roof(_joined(names), value, tensor) for (value, tensor), names in by_value.items()]
    return sorted(out, key=lambda r: -r.flops_per_s)


def _joined(names: list[str]) -> str:
    """["BF16 tensor", "FP16 tensor"] -> "BF16/FP16 tensor"."""
    suffix = " tensor" if all(n.endswith(" tensor") for n in names) else ""
    return "/".join(sorted(n.removesuffix(suffix) for n in names)) + suffix


def roofline_points(rec: PredictionRecord, measured: Mapping[int, float] | None = None) -> tuple[list[RooflinePoint],
                                                                                                  list]:
    """(points of ops with FLOPs and time, ops left out: no FLOPs or no time)."""
    groups: dict[tuple, list] = defaultdict(list)
    left_out = []
    for op in rec.ops:
        if not op.kernels or op.time_us <= 0:
            continue
        if op.flops <= 0 or op.bytes <= 0:
            left_out.append(op)
            continue
        groups[(op.op, op.phase, module_pattern(op.module), op.source, op.flops, op.bytes)].append(op)
    points = []
    for (name, *_), ops in groups.items():
        times = [measured.get(op.index) for op in ops] if measured is not None else []
        measured_us = sum(times) if times and all(t for t in times) else None
        points.append(RooflinePoint(
            label=name, count=len(ops), intensity=ops[0].flops / ops[0].bytes, flops=sum(o.flops for o in ops),
            time_us=sum(o.time_us for o in ops), bound=_bound_by_time(ops), measured_us=measured_us))
    return sorted(points, key=lambda p: -p.time_us), left_out


def _bound_by_time(ops) -> str:
    time: dict[str, float] = defaultdict(float)
    for op in ops:
        time[op.bound] += op.time_us
    return max(time, key=time.get)


def _area(time_us: float, longest_us: float) -> float:
    return POINT_AREA_MIN + (POINT_AREA_MAX - POINT_AREA_MIN) * (time_us / longest_us if longest_us else 0.0)


def plot_roofline(pred, measured=None, title: str | None = None, measured_label: str = "measured",
                  caption: str | None = None) -> Figure:
    """The roofline of one prediction. `measured` adds measured points beside the predicted ones, joined by a
    line: op index -> measured µs of its kernels, or a measurement to match to the ops (a `measure`/`validate`
    JSON, a Measurement or Validation: report/measured.py). `caption` is printed under the plot (how the
    measured points were made; by default, how they were matched)."""
    rec = as_record(pred)
    measured, how = measured_times(rec, measured)
    caption = caption or how or None
    spec = gpu_spec(rec)
    bw = spec.mem_bw_bytes_per_s
    points, left_out = roofline_points(rec, measured)
    drawn_roofs = roofs(spec, {op.roof for op in rec.ops})

    fig = Figure(figsize=FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved compute (TFLOP/s)")
    ax.grid(True, which="major", alpha=0.25)

    ridges = [r.ridge(bw) for r in drawn_roofs]
    xs = [p.intensity for p in points] + ridges
    ys = [p.flops_per_s for p in points] + [p.measured_flops_per_s or 0 for p in points]
    ys = [y for y in ys if y > 0] + [r.flops_per_s for r in drawn_roofs]
    x_lo, x_hi = min(xs) / AXIS_MARGIN, max(xs) * AXIS_MARGIN
    y_lo, y_hi = min(ys) / AXIS_MARGIN / FLOPS_PER_TFLOPS, max(ys) * 2 / FLOPS_PER_TFLOPS
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)

    top = drawn_roofs[0]
    ax.plot([x_lo, top.ridge(bw)], [bw * x_lo / FLOPS_PER_TFLOPS, top.flops_per_s / FLOPS_PER_TFLOPS],
            color="black", lw=1.6)
    ax.text(x_lo * 1.15, bw * x_lo * 1.3 / FLOPS_PER_TFLOPS, f"HBM {bw / 1e12:.2f} TB/s",
            rotation_mode="anchor", transform_rotates_text=True, rotation=45, fontsize=8, va="bottom")
    for roof in drawn_roofs:
        ridge, peak = roof.ridge(bw), roof.flops_per_s / FLOPS_PER_TFLOPS
        style = {"color": "black", "lw": 1.4 if roof.tensor_core else 1.0, "ls": "-" if roof.tensor_core else "--"}
        ax.plot([ridge, x_hi], [peak, peak], **style)
        ax.plot([x_lo, ridge], [peak, peak], color="black", lw=0.6, ls=":", alpha=0.5)  # the roof, extended
        ax.text(x_lo * 1.1, peak * 1.04, f"{roof.label} {peak:,.0f} TFLOP/s" if peak >= 10 else
                f"{roof.label} {peak:.1f} TFLOP/s", ha="left", va="bottom", fontsize=8)
        ax.plot([ridge], [peak], marker="o", color="black", ms=3.5)
        ax.plot([ridge, ridge], [y_lo, peak], color="#777777", lw=0.6, ls=":")  # down to the ridge's intensity
        ax.text(ridge * 1.04, y_lo * 1.15, f"ridge {ridge:.0f} FLOP/B ({roof.label})", rotation=90, ha="left",
                va="bottom", fontsize=7, color="#444444")

    longest = max((p.time_us for p in points), default=0.0)
    bound_handles: list[Line2D] = []
    for bound in BOUND_ORDER + tuple(sorted({p.bound for p in points} - set(BOUND_ORDER))):
        mine = [p for p in points if p.bound == bound]
        if not mine:
            continue
        colour = BOUND_COLOURS.get(bound, OTHER_BOUND_COLOUR)
        ax.scatter([p.intensity for p in mine], [p.flops_per_s / FLOPS_PER_TFLOPS for p in mine],
                   s=[_area(p.time_us, longest) for p in mine], color=colour, alpha=0.55, edgecolors="white",
                   linewidths=0.5, zorder=3)
        bound_handles.append(Line2D([], [], marker="o", ls="", ms=8, color=colour, alpha=0.7,
                                    label=f"{bound}-bound"))
        with_measured = [p for p in mine if p.measured_flops_per_s]
        if with_measured:
            for p in with_measured:
                ax.plot([p.intensity, p.intensity], [p.flops_per_s / FLOPS_PER_TFLOPS,
                                                     p.measured_flops_per_s / FLOPS_PER_TFLOPS],
                        color=colour, lw=0.6, alpha=0.6, zorder=2)
            ax.scatter([p.intensity for p in with_measured],
                       [p.measured_flops_per_s / FLOPS_PER_TFLOPS for p in with_measured],
                       s=[_area(p.measured_us, longest) for p in with_measured], facecolors="none",
                       edgecolors=colour, linewidths=1.2, zorder=4)

    handles = bound_handles + [Line2D([], [], color="black", lw=1.4, label="tensor-core roof"),
                Line2D([], [], color="black", lw=1.0, ls="--", label="CUDA-core roof")]
    if measured is not None:
        handles += [Line2D([], [], marker="o", ls="", ms=8, color="#555555", alpha=0.55, label="predicted"),
                    Line2D([], [], marker="o", ls="", ms=8, mfc="none", mec="#555555", label=measured_label)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)

    what = "predicted" + (" and measured" if measured is not None else "")
    ax.set_title(textwrap.fill(title or f"{rec.workload or 'step'} on {rec.gpu_name}: roofline, {what}",
                               ROOFLINE_TITLE_CHARS, break_long_words=True), fontsize=11)
    notes = [f"marker area grows with predicted time; kernel times: {rec.kernel_model}"]
    if left_out:
        notes.append(f"not drawn: {len(left_out)} ops with no FLOPs (copies, fills, ...), "
                     f"{time_text(sum(o.time_us for o in left_out))} of {time_text(rec.gpu_time_us)} GPU time")
    if caption:
        notes.append(caption)
    # Under the x label, inside the axes' layout box (constrained layout makes room for it).
    ax.annotate("\n".join(line for note in notes for line in textwrap.wrap(note, NOTE_WIDTH_CHARS)),
                (0, 0), xycoords="axes fraction", xytext=(-40, -34), textcoords="offset points", va="top",
                fontsize=7, color="#444444", annotation_clip=False)
    return fig
