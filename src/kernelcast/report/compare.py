"""`kernelcast compare a.json b.json`: what changed between two predictions (two GPUs, two versions of a
model, a fix tried): the summary side by side, then the ops whose predicted time moved most.

Ops are matched by (op, phase, module pattern), not by source line, so an edit that moves lines still matches.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rich import box
from rich.table import Table

from kernelcast.records import PredictionRecord

from .format import module_pattern, short_op, tail, time_text

DEFAULT_TOP = 15
MODULE_WIDTH = 28


@dataclass(frozen=True)
class OpChange:
    op: str
    phase: str
    module: str
    a_count: int
    b_count: int
    a_us: float
    b_us: float

    @property
    def delta_us(self) -> float:
        return self.b_us - self.a_us


def _ratio(a: float, b: float) -> str:
    if not a:
        return "new" if b else "-"
    return f"{(b - a) / a:+.1%}"


def op_changes(a: PredictionRecord, b: PredictionRecord) -> list[OpChange]:
    """Every (op, phase, module pattern) in either prediction, the largest change in time first."""
    sides: dict[tuple, list] = defaultdict(lambda: [0, 0, 0.0, 0.0])
    for slot, rec in ((0, a), (1, b)):
        for op in rec.ops:
            row = sides[(op.op, op.phase, module_pattern(op.module))]
            row[slot] += 1
            row[2 + slot] += op.time_us
    changes = [OpChange(op, phase, module, *row) for (op, phase, module), row in sides.items()]
    return sorted(changes, key=lambda c: -abs(c.delta_us))


SUMMARY_ROWS = (
    ("step time", lambda r: r.step_time_us, time_text),
    ("GPU time", lambda r: r.gpu_time_us, time_text),
    ("host time", lambda r: r.host_time_us, time_text),
    ("model Python", lambda r: r.python_time_us, time_text),
    ("host timer without synchronize", lambda r: r.naive_host_timer_us, time_text),
    ("kernels", lambda r: r.kernels, str),
    ("sync points", lambda r: r.sync_points, str),
    ("launch-bound ops", lambda r: r.launch_bound_ops, str),
)


def summary_table(a: PredictionRecord, b: PredictionRecord, names: tuple[str, str]) -> Table:
    table = Table(title="Summary", title_justify="left", box=box.SIMPLE_HEAD)
    for col, justify in (("", "left"), (names[0], "right"), (names[1], "right"), ("change", "right")):
        table.add_column(col, justify=justify, overflow="fold")
    table.add_row("GPU", a.gpu_name, b.gpu_name, "" if a.gpu == b.gpu else "other GPU")
    for name, value, text in SUMMARY_ROWS:
        va, vb = value(a), value(b)
        table.add_row(name, text(va), text(vb), _ratio(va, vb))
    table.add_row("verdict", f"{a.bound}, GPU idle {a.gpu_idle_fraction:.0%}",
                  f"{b.bound}, GPU idle {b.gpu_idle_fraction:.0%}", "" if a.bound == b.bound else "changed")
    table.add_row("uncosted ops", str(len(a.uncosted)), str(len(b.uncosted)), "")
    return table


# Below this console width the changes table leaves out the phase and the op counts.
NARROW_WIDTH = 120
OP_MIN_WIDTH = 16  # the op column keeps this much of its names (short_op) at any width


def changes_table(a: PredictionRecord, b: PredictionRecord, names: tuple[str, str], top: int = DEFAULT_TOP,
                  width: int | None = None) -> Table:
    narrow = width is not None and width < NARROW_WIDTH
    table = Table(title=f"Ops whose predicted time changed most (top {top})", title_justify="left",
                  box=box.SIMPLE_HEAD)
    columns = [("op", "left"), ("phase", "left"), ("module", "left"), (f"× {names[0]}", "right"),
               (f"× {names[1]}", "right"), (names[0], "right"), (names[1], "right"), ("Δ", "right"), ("change", "right")]
    keep = [i for i, (name, _) in enumerate(columns) if not (narrow and i in (1, 3, 4))]
    for i in keep:  # names are shortened with an ellipsis where the table must narrow, never split over lines
        table.add_column(columns[i][0], justify=columns[i][1], no_wrap=True, overflow="ellipsis",
                         min_width=OP_MIN_WIDTH if i == 0 else None)
    for c in [c for c in op_changes(a, b) if c.delta_us][:top]:
        cells = (short_op(c.op), c.phase, tail(c.module, MODULE_WIDTH) or "-", str(c.a_count), str(c.b_count),
                 time_text(c.a_us), time_text(c.b_us), ("+" if c.delta_us > 0 else "") + time_text(c.delta_us),
                 _ratio(c.a_us, c.b_us))
        table.add_row(*(cells[i] for i in keep))
    return table


def sync_changes(a: PredictionRecord, b: PredictionRecord) -> list[str]:
    """Sync points (kind at source) one prediction has and the other has not."""
    left = {(g.kind, g.source) for g in a.sync_groups}
    right = {(g.kind, g.source) for g in b.sync_groups}
    return ([f"gone: {kind} at {source}" for kind, source in sorted(left - right)]
            + [f"new: {kind} at {source}" for kind, source in sorted(right - left)])
