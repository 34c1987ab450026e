"""Stage 4: the prediction for people (terminal tables, HTML, figures) and for tools (JSON).

Everything here reads the serialized prediction (records.PredictionRecord), never the predict stage's objects,
so a saved prediction (`--json`) renders on a machine without torch. A function given something else with a
`.record()` method (a predict.Prediction) asks it for its record first.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterable

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from kernelcast.records import TORCH_SAVE_OP, PredictedOp, PredictionRecord, stream_name

from .format import module_pattern, plural, short_op, short_source, si, tail, time_text

__all__ = ["as_record", "print_prediction", "summary_line", "prediction_json", "ops_table", "group_ops",
           "module_pattern", "short_op", "time_text", "console_for_output", "output_width", "wrap_lines"]

DEFAULT_TOP = 15


def as_record(pred) -> PredictionRecord:
    """The record itself, or the record of a predict.Prediction (duck-typed: report/ does not import predict/)."""
    if isinstance(pred, PredictionRecord):
        return pred
    if hasattr(pred, "record"):
        return pred.record()
    raise TypeError(f"expected a PredictionRecord or a Prediction, not {type(pred).__name__}")


@dataclass(frozen=True)
class OpGroup:
    """Ops of one kind issued from one source line (e.g. the attention matmul of every layer)."""

    op: str
    phase: str
    module: str
    source: str
    count: int
    flops: float
    bytes: float
    kernels: int
    time_us: float
    bound: str

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


def group_ops(ops: Iterable[PredictedOp]) -> list[OpGroup]:
    buckets: dict[tuple, list[PredictedOp]] = defaultdict(list)
    for p in ops:
        buckets[(p.op, p.phase, module_pattern(p.module), p.source)].append(p)
    groups = []
    for (op, phase, module, source), members in buckets.items():
        bound_time: Counter = Counter()
        for m in members:
            bound_time[m.bound] += m.time_us or 1e-9
        groups.append(OpGroup(
            op=op, phase=phase, module=module, source=source, count=len(members),
            flops=sum(m.flops for m in members), bytes=sum(m.bytes for m in members),
            kernels=sum(m.kernels for m in members), time_us=sum(m.time_us for m in members),
            bound=bound_time.most_common(1)[0][0],
        ))
    return sorted(groups, key=lambda g: g.time_us, reverse=True)


def verdict_text(rec: PredictionRecord) -> str:
    idle = f"GPU idle {rec.gpu_idle_fraction:.0%}"
    if rec.bound == "mixed":
        return f"mixed ({idle}: the CPU and the GPU are both near the step; speeding up either one helps)"
    return f"{rec.bound}-bound ({idle})"


# Leads the summary of a step that runs torch.compile'd code (capture/compiled.py).
CUDAGRAPH_REPLAY_OP = "host.cudagraph_replay"  # capture/inductor.py (the report does not import torch)
USER_GRAPH_REPLAY_OP = "host.user_graph_replay"  # a user's CUDAGraph.replay() (capture/recorder.py)
COMPILED_AS_EAGER = "compiled step predicted as eager PyTorch (Inductor could not run here): "
COMPILED_BY_INDUCTOR = "compiled step, Inductor's kernels (what is fitted and what is a stand-in: see notes): "


def _compiled_lead(rec: PredictionRecord) -> str:
    if not rec.compiled:
        return ""
    return COMPILED_BY_INDUCTOR if rec.compiled_as == "inductor" else COMPILED_AS_EAGER


def step_range_text(rec: PredictionRecord) -> str:
    """" (range 4.1-6.3 ms)" after the step where the host's uncertainty moves it (PredictionRecord.step_range_us:
    the model Python's spread and the target host's run-to-run speed at once); "" where the GPU holds the step."""
    low, high = rec.step_range_us
    if high <= 0 or time_text(low) == time_text(high):
        return ""
    return f" (range {_range(low, high)})"


def summary_line(pred) -> str:
    rec = as_record(pred)
    return (
        f"{_compiled_lead(rec)}"
        f"step {time_text(rec.step_time_us)}{step_range_text(rec)} on {rec.gpu_name}: GPU {time_text(rec.gpu_time_us)}, "
        f"host {time_text(rec.host_time_us)}, {plural(rec.kernels, 'kernel')}, {plural(rec.sync_points, 'sync')} -> "
        f"{verdict_text(rec)}; a host timer without synchronize would "
        f"read {time_text(rec.naive_host_timer_us)}; kernel times: {rec.kernel_model}"
    )


def _launch_bound_fix(rec: PredictionRecord) -> str:
    """What would take launches off the host, given what the step already does: eager code can be compiled;
    compiled code (Inductor's kernels) can replay as CUDA graphs (mode="reduce-overhead") unless it does."""
    if any(op.op == USER_GRAPH_REPLAY_OP for op in rec.ops):
        return "they run outside the step's CUDA graph: capture them into it, or fuse them with torch.compile"
    if rec.compiled_as != "inductor":
        return "fuse them with torch.compile, or replay the step as a CUDA graph"
    if any(op.op == CUDAGRAPH_REPLAY_OP for op in rec.ops):
        return "the compiled graphs already replay as CUDA graphs; the rest runs outside them"
    return "the step is compiled already: torch.compile(mode=\"reduce-overhead\") replays it as CUDA graphs"


def _range(low: float, high: float) -> str:
    return f"{time_text(low)}-{time_text(high)}"


def _step_over(step_range_us: tuple[float, float]) -> str:
    """Where the step goes over a range of CPU speeds: its range, or that the GPU holds it."""
    low, high = step_range_us
    if time_text(low) == time_text(high):
        return "the step does not move: the GPU sets it"
    return f"step {_range(low, high)}"


def host_line(pred) -> str:
    """Which CPUs the host side is for and was captured on, what it is made of, where it is uncertain (as
    ranges), and how much another CPU would change the step: a heading and one short item a line."""
    rec = as_record(pred)
    steps = f"fastest of {rec.python_timing_steps} step{'s' if rec.python_timing_steps > 1 else ''}"
    if rec.python_lines:
        how = (f"{rec.python_lines:,} lines counted in the capture, at {rec.python_line_us:.2f} µs each as fitted "
               f"to steps measured on the target host")
        spread = "the per-line fit's held-out spread"
    else:
        how = f"its CPU time on the capture machine, {steps}, carried to the target"
        spread = "the CPU benchmarks' ratios between the two machines, the capture's readings"
    lines = [f"host: {rec.host}",
             f"  - CPUs: target {rec.target_cpu or 'not recorded'}; captured on "
             f"{rec.capture_cpu or 'a CPU not recorded'}",
             f"  - CPU per step: {time_text(rec.host_time_us)}, of which model Python "
             f"{time_text(rec.python_time_us)} ({how})"]
    serializing_us = sum(op.host_us - op.python_us for op in rec.ops if op.op == TORCH_SAVE_OP)
    if serializing_us > 0:
        lines.append(f"  - torch.save's serialization: {time_text(serializing_us)} (pickling and writing each storage, "
                     "about 1 ms per MB on an H100 host; a slow disk's write time not included)")
    if rec.python_time_range_us[1] > 0:
        lines.append(f"  - model Python's range: {_range(*rec.python_time_range_us)} ({spread}) -> "
                     f"{_step_over(rec.step_time_range_us)}")
    slow, fast = rec.host_run_speed_range
    if rec.step_time_run_range_us[1] > 0 and (slow, fast) != (1.0, 1.0):
        lines.append(f"  - the target host from one process to the next: CPU work x{slow:.2f}-x{fast:.2f} "
                     f"(10th-90th percentile of its calibration runs) -> {_step_over(rec.step_time_run_range_us)}")
    if rec.step_range_us[1] > 0 and rec.step_range_us != rec.step_time_range_us:
        lines.append(f"  - both at once (the step's range): {_step_over(rec.step_range_us)}")
    what_if = ", ".join(f"{time_text(step)} with CPU work x{factor:g}" for factor, step in rec.step_time_by_host_speed)
    if what_if:
        lines.append(f"  - another CPU: step {what_if}")
    ops_are = "op is" if rec.launch_bound_ops == 1 else "ops are"
    if rec.launch_bound_ops and rec.bound == "gpu":  # the GPU has queued work throughout: they cost nothing
        lines.append(f"  - {rec.launch_bound_ops} {ops_are} launch-bound on their own, hidden here: the GPU stays "
                     f"busy with queued work")
    elif rec.launch_bound_ops:
        lines.append(f"  - {rec.launch_bound_ops} {ops_are} launch-bound (their kernels finish before the next "
                     f"launch): {_launch_bound_fix(rec)}")
    return "\n".join(lines)


def comm_line(pred) -> str | None:
    """Compute, communication (exposed and hidden) and step time of a step with collectives."""
    rec = as_record(pred)
    c = rec.comm
    if c is None:
        return None
    return (
        f"{c.world_size} ranks over {c.interconnect_name or c.interconnect}: compute {time_text(c.compute_us)}, "
        f"communication {time_text(c.comm_us)} in {c.collectives} collectives ({time_text(c.exposed_comm_us)} "
        f"exposed, {time_text(c.hidden_comm_us)} hidden behind compute) -> step {time_text(rec.step_time_us)} "
        f"({time_text(c.step_without_comm_us)} if communication were free)"
    )


# A host-bound or mixed step: what makes the CPU's share smaller.
HOST_BOUND_ADVICE = ("the GPU waits for the CPU: fewer, larger launches help (torch.compile, a CUDA graph of the "
                     "step, a larger batch per step)")


def advice(pred) -> list[str]:
    """What to change, most saving first: each sync point's fix, launch-bound ops, a host-bound step."""
    rec = as_record(pred)
    out = [f"{g.kind} at {g.source or '?'} ({g.count}x per step, saves {time_text(g.saving_us)}): {g.advice}"
           for g in rec.sync_groups]
    if rec.bound in ("host", "mixed"):
        out.append(f"GPU idle {rec.gpu_idle_fraction:.0%} of the step: {HOST_BOUND_ADVICE}")
    if rec.launch_bound_ops and rec.bound != "gpu":  # on a GPU-bound step their launches are hidden
        out.append(f"{rec.launch_bound_ops} ops finish on the GPU before the CPU launches the next: "
                   f"{_launch_bound_fix(rec)}")
    if rec.comm is not None and rec.comm.exposed_comm_us > 0:
        out.append(f"{time_text(rec.comm.exposed_comm_us)} of communication is exposed (not hidden behind "
                   "compute): larger buckets or overlap (DDP bucket_cap_mb, FSDP2 prefetch) hide more")
    return out


def sync_table(pred, width: int | None = None) -> Table | None:
    """Sync points with their source line, stall, saving and fix; below SOURCE_COLUMN_FROM_WIDTH the source goes
    under its kind."""
    rec = as_record(pred)
    if not rec.sync_groups:
        return None
    source_column = width is None or width >= SOURCE_COLUMN_FROM_WIDTH
    table = Table(title="Sync points (the host waits for the GPU)", title_justify="left", box=box.SIMPLE_HEAD)
    table.pad_edge = source_column
    headers = ((("kind", "left"), ("source", "left"), ("× per step", "right"), ("stall", "right"),
                ("saving with the fix", "right"), ("fix", "left")) if source_column else
               (("kind", "left"), ("×", "right"), ("stall", "right"), ("fix saves", "right"), ("fix", "left")))
    kind_width = min(max([SYNC_KIND_WIDTH] + [len(short_source(g.source)) + 2 for g in rec.sync_groups]),
                     OP_MAX_WIDTH)
    for name, justify in headers:
        table.add_column(name, justify=justify, overflow="fold", no_wrap=justify == "right",
                         min_width=kind_width if name == "kind" and not source_column else None)
    for g in rec.sync_groups:
        numbers = (str(g.count), time_text(g.stall_us), time_text(g.saving_us), g.advice)
        if source_column:
            table.add_row(g.kind, g.source or "-", *numbers)
        else:
            table.add_row(Text(g.kind).append("\n  " + short_source(g.source or "-"), style="dim"), *numbers)
    return table


MIN_FIX_CHANGE_US = 0.5  # a re-predicted step within this of the step's own: the wait costs nothing


def _op_name(op: str) -> str:
    return op.removeprefix("aten.").removesuffix(".default")


def hazard_lines(pred, width: int = 100) -> list[str]:
    """The step's stream-ordering hazards (predict/hazards.py), one entry each: what, where, the fix; [] when
    there are none."""
    rec = as_record(pred)
    if not rec.hazards:
        return []
    out = ["Stream hazards (accesses on two streams with nothing ordering them; predict/hazards.py):"]
    for h in rec.hazards:
        what = f"a {'x'.join(map(str, h.shape)) or '?'} {h.dtype} tensor".strip()
        first = f"{_op_name(h.first_op)} on the {stream_name(h.first_stream)} at {h.first_source or '?'}"
        second = f"{_op_name(h.second_op)} on the {stream_name(h.second_stream)} at {h.second_source or '?'}"
        if h.kind == "freed-while-in-use":
            body = (f"{what} made on the {stream_name(h.second_stream)} and used by {first} is freed with no "
                    f"record_stream, and {second} takes a new block from that stream's pool (perhaps this one) "
                    "before anything orders it after that use")
        elif h.kind == "unordered-read":
            body = f"{what} written by {first} is read by {second} with nothing ordering the two"
        else:
            body = f"{what} used by {first} is written by {second} with nothing ordering the two"
        text = f"{h.kind}: {body}. Fix: {h.fix}"
        if h.step_with_fix_us is not None:
            change = h.step_with_fix_us - rec.step_time_us
            text += (f"; with the wait the step takes {time_text(h.step_with_fix_us)} "
                     + (f"(+{time_text(change)}: the overlap the wait serializes)" if change >= MIN_FIX_CHANGE_US
                        else "(the same: the wait costs no overlap)"))
        out.append(textwrap.fill(text, width, initial_indent="  ", subsequent_indent="    ",
                                 break_long_words=False, break_on_hyphens=False))
    return out


@dataclass(frozen=True)
class Column:
    """A column of the ops table: kept while the table fits, dropped in order of `priority` (highest first)."""

    name: str
    justify: str
    priority: int  # 0: never dropped
    cell: object  # (OpGroup, share of the step) -> str


MODULE_WIDTH = 24  # longer module paths keep their end ("…h.*.attn.c_attn")
# The op column (op, and its source under it) keeps its rows' width up to OP_MAX_WIDTH before a column is dropped;
# longer names wrap. It never gets narrower than OP_MIN_WIDTH.
OP_MIN_WIDTH = 22
OP_MAX_WIDTH = 30
SYNC_KIND_WIDTH = 22  # the sync table's first column, when the source goes under the kind
# From this width up, the source line has its own column; below it, it is printed under its op.
SOURCE_COLUMN_FROM_WIDTH = 150

OPS_COLUMNS = (
    Column("time", "right", 1, lambda g, share: time_text(g.time_us)),
    Column("% step", "right", 2, lambda g, share: f"{share:.1%}"),
    Column("bound", "left", 3, lambda g, share: g.bound),
    Column("module", "left", 4, lambda g, share: tail(g.module, MODULE_WIDTH) if g.module else "-"),
    # calls: how many ops the group holds; kernels: the GPU work items they launch in all (launch-bound ops show
    # many kernels for little time)
    Column("calls", "right", 5, lambda g, share: str(g.count)),
    Column("kernels", "right", 6, lambda g, share: str(g.kernels)),
    Column("phase", "left", 7, lambda g, share: g.phase),
    Column("FLOP/B", "right", 8, lambda g, share: f"{g.intensity:.1f}"),
    Column("FLOPs", "right", 9, lambda g, share: si(g.flops)),
    Column("bytes", "right", 10, lambda g, share: si(g.bytes, "B")),
)
# The order columns appear in, left to right (op first, then these).
COLUMN_ORDER = ("phase", "module", "source", "calls", "kernels", "FLOPs", "bytes", "FLOP/B", "bound", "time",
                "% step")


def _op_width(rows: list[tuple[OpGroup, float]], source_column: bool) -> int:
    """What the op column needs to show its rows unwrapped (the source under the op, indented), capped."""
    need = [len(short_op(g.op)) for g, _ in rows]
    if not source_column:
        need += [len(short_source(g.source)) + 2 for g, _ in rows]
    return max(OP_MIN_WIDTH, min(max(need, default=0), OP_MAX_WIDTH))


def _table(title: str, columns: list[Column], rows: list[tuple[OpGroup, float]], source_column: bool,
           op_max: int | None = None, op_min: int = OP_MIN_WIDTH) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=source_column)
    # a name longer than the column ends in an ellipsis: never split over two lines
    table.add_column("op", justify="left", overflow="ellipsis", no_wrap=True, max_width=op_max, min_width=op_min)
    by_name = {c.name: c for c in columns}
    order = [n for n in COLUMN_ORDER if n in by_name or (n == "source" and source_column)]
    for name in order:
        if name == "source":
            table.add_column("source", justify="left", overflow="fold")
        else:
            table.add_column(name, justify=by_name[name].justify, no_wrap=True)
    # Under the op goes its source line; where that line does not tell two rows of one op apart (a model called
    # once from the step: every op's source is that call) and the module column was dropped, its module does.
    # Where even the module leaves two rows alike (one layer's forward and backward matmul) and the phase column
    # was dropped, the phase follows it.
    pairs = Counter((short_op(g.op), short_source(g.source)) for g, _ in rows)
    unders = [_under_op(g, pairs, by_name, op_max or OP_MAX_WIDTH) for g, _ in rows]
    alike = Counter((short_op(g.op), under) for (g, _), under in zip(rows, unders))
    for (g, share), under in zip(rows, unders):
        op_cell = Text(short_op(g.op))
        if "phase" not in by_name and alike[(short_op(g.op), under)] > 1 and g.phase:
            under = f"{g.phase}: {under}" if under else g.phase  # a line too long for the column ends in "…"
        if not source_column and under:
            op_cell.append("\n  " + under, style="dim")
        cells = [(g.source or "-") if n == "source" else by_name[n].cell(g, share) for n in order]
        table.add_row(op_cell, *cells)
    return table


def _under_op(g: OpGroup, pairs: Counter, by_name: dict, op_max: int) -> str:
    """The line under an op in a narrow table: its source, or its module where the source is shared with another
    row of the op and the module column was dropped."""
    under = short_source(g.source) if g.source else ""
    if "module" not in by_name and g.module and pairs[(short_op(g.op), under)] > 1:
        under = tail(g.module, op_max - 2)
    return under


def natural_width(table: Table) -> int:
    """The width rich lays `table` out in when nothing limits it: what a table that drops columns to fit the
    output compares with the output's width (the ops table, compare's, devices')."""
    console = Console(width=10_000)
    return Measurement.get(console, console.options, table).maximum


def widened_op_column(op_width: int, table_width: int, width: int, names: list[str]) -> int:
    """The op column's width once a table that dropped columns to fit `width` gives the op names it cut the
    columns' room: `table_width` is the table's natural width at `op_width`; at most the longest of `names`."""
    slack = width - table_width
    return max(op_width, min(max(map(len, names), default=0), op_width + max(slack, 0)))


def ops_table(pred, top: int = DEFAULT_TOP, width: int | None = None) -> Table:
    """The top op groups by predicted time, with as many columns as fit `width` (the console's, by default):
    columns drop by priority (bytes first, time last) and the source moves under its op below
    SOURCE_COLUMN_FROM_WIDTH."""
    rec = as_record(pred)
    title = f"Top ops by predicted time on {rec.gpu_name}"
    # groups that launch nothing and take no time (views, detach, an allocation) say nothing about speed
    working = [g for g in group_ops(rec.ops) if g.kernels or g.time_us > 0]
    rows = [(g, g.time_us / rec.step_time_us if rec.step_time_us else 0.0) for g in working[:top]]
    if width is None:
        return _table(title, list(OPS_COLUMNS), rows, source_column=True)
    source_column = width >= SOURCE_COLUMN_FROM_WIDTH
    op_width = _op_width(rows, source_column)
    columns = sorted(OPS_COLUMNS, key=lambda c: c.priority)
    while columns:
        narrow = _table(title, columns, rows, source_column, op_max=op_width, op_min=op_width)
        if natural_width(narrow) <= width:
            break
        columns = columns[:-1]
    if not source_column:
        # the width the dropped columns left goes to the op names that were cut
        op_width = widened_op_column(op_width, natural_width(narrow), width, [short_op(g.op) for g, _ in rows])
    return _table(title, columns, rows, source_column, op_max=None if source_column else op_width, op_min=op_width)


# The width output goes to a file or pipe at when COLUMNS does not say: what the tables are tested at besides 80,
# and what an editor or `less` shows whole (rich would assume 80 and drop most columns).
PIPE_WIDTH = 120


def output_width() -> int:
    """The width output is laid out for: COLUMNS where it is set (a terminal or a pipe alike: `COLUMNS=80
    kernelcast predict ... | less`), else the terminal's, else PIPE_WIDTH in a file or pipe."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    console = Console()
    return console.width if console.is_terminal else PIPE_WIDTH


def console_for_output() -> Console:
    return Console(width=output_width())


# A number and its unit stay on one line when text wraps: a no-break space between them.
_NUMBER_UNIT = re.compile(r"(\d) (µs|ms|s|ns|[KMGT]?i?B|[kMGT]B|%|GB/s|TB/s|TFLOP/s|cores?)(?=[\s,;:)]|$)")


def keep_units(text: str) -> str:
    """text with a no-break space between each number and its unit ("10.0 MiB", "1.03 ms")."""
    return _NUMBER_UNIT.sub("\\1\u00a0\\2", text)


def wrap_lines(text: str, width: int) -> str:
    """Each line of text wrapped at word boundaries to width, continuation lines at the line's own indent
    (a numbered or bulleted item's under its words); words longer than a line are kept whole."""
    out = []
    for line in text.splitlines():
        body = line.lstrip()
        indent = len(line) - len(body)
        marker = re.match(r"(\d+\.|-|\*) ", body)
        hang = " " * (indent + (len(marker.group(0)) if marker else 0))
        out.append(textwrap.fill(line, width, subsequent_indent=hang, break_long_words=False,
                                 break_on_hyphens=False) if len(line) > width else line)
    return "\n".join(out)


def print_prediction(pred, console: Console | None = None, top: int = DEFAULT_TOP) -> None:
    from .memory_text import memory_lines, oom_verdict_lines

    rec = as_record(pred)
    console = console or console_for_output()
    for line in oom_verdict_lines(rec):  # a step that does not fit: that first
        console.print(wrap_lines(keep_units(line), console.width), markup=False)
    console.print(ops_table(rec, top, width=console.width))
    syncs = sync_table(rec, width=console.width)
    if syncs is not None:
        console.print(syncs)
    for line in hazard_lines(rec, console.width):
        console.print(line, markup=False)
    console.print(wrap_lines(keep_units(summary_line(rec)), console.width), markup=False)
    console.print(wrap_lines(keep_units(host_line(rec)), console.width), markup=False)
    comm = comm_line(rec)
    if comm is not None:
        console.print(wrap_lines(keep_units(comm), console.width), markup=False)
    for line in memory_lines(rec):
        console.print(wrap_lines(keep_units(line), console.width), markup=False)
    uncosted = ", ".join(rec.uncosted) if rec.uncosted else "none"
    console.print(wrap_lines(f"uncosted ops (time unknown, not zero): {uncosted}", console.width), markup=False)
    for note in rec.notes:
        console.print(wrap_lines(keep_units(f"note: {note}"), console.width), markup=False)


def prediction_json(pred) -> dict:
    """The --json contract (records.PredictionRecord.to_json): keep these key names (other tools read them)."""
    return as_record(pred).to_json()
