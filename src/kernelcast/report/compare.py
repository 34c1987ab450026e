"""`kernelcast compare a.json b.json`: what changed between two predictions (two GPUs, two versions of a
model, a fix tried): the summary side by side, then the ops whose predicted time moved most.

Ops are matched by (op, phase, module pattern), not by source line, so an edit that moves lines still matches.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rich import box
from rich.table import Table
from rich.text import Text

from kernelcast.records import PredictionRecord

from . import natural_width, widened_op_column
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


def summary_table(a: PredictionRecord, b: PredictionRecord, names: tuple[str, str], width: int | None = None) -> Table:
    """Both predictions' summaries side by side, at most `width` columns wide where it is given: below that,
    each GPU by its kernelcast id rather than its full name."""
    table = _summary(a, b, names, (a.gpu_name, b.gpu_name))
    if width is not None and natural_width(table) > width:
        table = _summary(a, b, names, (a.gpu, b.gpu))
    return table


def _summary(a: PredictionRecord, b: PredictionRecord, names: tuple[str, str], gpus: tuple[str, str]) -> Table:
    table = Table(title="Summary", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("", justify="left", no_wrap=True)  # the row names stay whole: the values fold first
    for col, justify in ((names[0], "right"), (names[1], "right"), ("change", "right")):
        table.add_column(col, justify=justify, overflow="fold")
    table.add_row("GPU", *gpus, "" if a.gpu == b.gpu else "other GPU")
    for name, value, text in SUMMARY_ROWS:
        va, vb = value(a), value(b)
        table.add_row(name, text(va), text(vb), _ratio(va, vb))
    table.add_row("verdict (GPU idle)", f"{a.bound}, {a.gpu_idle_fraction:.0%}",
                  f"{b.bound}, {b.gpu_idle_fraction:.0%}", "" if a.bound == b.bound else "changed")
    table.add_row("uncosted ops", str(len(a.uncosted)), str(len(b.uncosted)), "")
    return table


@dataclass(frozen=True)
class ChangeColumn:
    """A column of the changes table: kept while the table fits, dropped in order of `priority` (highest first)."""

    name: str  # its header; "{a}" / "{b}" stand for the two predictions' names
    justify: str
    priority: int  # 0: never dropped
    cell: object  # OpChange -> str


HEADER_WIDTH = 12  # a prediction's name in a header keeps its end ("…a100_batch8")
CHANGE_COLUMNS = (
    ChangeColumn("phase", "left", 5, lambda c: c.phase),
    ChangeColumn("module", "left", 4, lambda c: tail(c.module, MODULE_WIDTH) or "-"),
    ChangeColumn("× {a}", "right", 7, lambda c: str(c.a_count)),
    ChangeColumn("× {b}", "right", 6, lambda c: str(c.b_count)),
    # an op one prediction does not run reads "-" there, not a time of 0
    ChangeColumn("{a}", "right", 0, lambda c: time_text(c.a_us) if c.a_count else "-"),
    ChangeColumn("{b}", "right", 0, lambda c: time_text(c.b_us) if c.b_count else "-"),
    ChangeColumn("Δ", "right", 2, lambda c: ("+" if c.delta_us > 0 else "") + time_text(c.delta_us)),
    ChangeColumn("change", "right", 1, lambda c: _ratio(c.a_us, c.b_us)),
)
OP_MIN_WIDTH = 16  # the op column keeps this much of its names (short_op) at any width
OP_MAX_WIDTH = 42


def changes_table(a: PredictionRecord, b: PredictionRecord, names: tuple[str, str], top: int = DEFAULT_TOP,
                  width: int | None = None) -> Table:
    """The `top` ops whose predicted time moved most, with as many columns as fit `width` (all where it is
    None): columns drop by priority (the op counts first, the two times never); names end in an ellipsis rather
    than split over lines."""
    changes = [c for c in op_changes(a, b) if c.delta_us][:top]
    title = f"Ops whose predicted time changed most (top {top})"
    headers = {"a": tail(names[0], HEADER_WIDTH), "b": tail(names[1], HEADER_WIDTH)}
    op_width = max(OP_MIN_WIDTH, min(max((len(short_op(c.op)) for c in changes), default=0), OP_MAX_WIDTH))
    columns = list(CHANGE_COLUMNS)
    if width is not None:
        by_priority = sorted(columns, key=lambda c: c.priority)
        while by_priority[-1].priority and natural_width(_changes(title, by_priority, changes, headers,
                                                                   op_width)) > width:
            by_priority.pop()
        columns = [c for c in CHANGE_COLUMNS if c in by_priority]
        # the width the dropped columns left goes to the op names that were cut
        op_width = widened_op_column(op_width, natural_width(_changes(title, columns, changes, headers, op_width)),
                                     width, [short_op(c.op) for c in changes])
    return _changes(title, columns, changes, headers, op_width)


def _changes(title: str, columns: list[ChangeColumn], changes: list[OpChange], headers: dict[str, str],
             op_width: int) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("op", justify="left", no_wrap=True, overflow="ellipsis", min_width=op_width, max_width=op_width)
    for column in columns:
        table.add_column(column.name.format(**headers), justify=column.justify, no_wrap=True)
    # Where the module or phase column was dropped, they go under the op, so that two rows of one op still read apart.
    names = {c.name for c in columns}
    for c in changes:
        phase = c.phase if "phase" not in names else ""
        module = tail(c.module, op_width - 2 - len(phase) - 2) if "module" not in names else ""
        under = f"{phase}: {module}" if phase and module else phase or module  # as predict's ops table says it
        op_cell = Text(short_op(c.op))
        if under:
            op_cell.append("\n  " + under, style="dim")
        table.add_row(op_cell, *(column.cell(c) for column in columns))
    return table



def sync_changes(a: PredictionRecord, b: PredictionRecord) -> list[str]:
    """Sync points (kind at source) one prediction has and the other has not."""
    left = {(g.kind, g.source) for g in a.sync_groups}
    right = {(g.kind, g.source) for g in b.sync_groups}
    return ([f"gone: {kind} at {source}" for kind, source in sorted(left - right)]
            + [f"new: {kind} at {source}" for kind, source in sorted(right - left)])
