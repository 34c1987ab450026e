"""One self-contained HTML file per report: the summary and verdict, the roofline and the timeline (inline PNG),
the top ops, the sync points with their source lines, advice, uncosted ops and notes; several GPUs side by side.

The page loads nothing: figures are data: URIs, the style is inline, there is no script, and its
Content-Security-Policy forbids any other source, so it opens offline and leaks nothing when shared.
"""

from __future__ import annotations

import base64
import html
import io
from string import Template
from typing import Mapping, Sequence

from matplotlib.figure import Figure

from kernelcast.records import PredictionRecord

from . import DEFAULT_TOP, advice, as_record, comm_line, group_ops, step_range_text, verdict_text
from .format import short_op, si, time_text
from .memory_text import memory_lines, oom_verdict_lines
from .roofline import BOUND_COLOURS, plot_roofline
from .timeline_plot import plot_timeline

FIGURE_DPI = 110
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="$csp">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="kernelcast $version">
<title>$title</title>
<style>
$style
</style>
</head>
<body>
<h1>$title</h1>
<p class="lede">Predicted by kernelcast $version without a GPU: every kernel of one step, its time on the GPU, and
the step's wall time with the CPU's launch queue simulated. Figures are inline; this file needs nothing else.</p>
$comparison
<div class="gpus" style="grid-template-columns: repeat(auto-fit, minmax(min($column_min, 100%), 1fr));">
$sections
</div>
</body>
</html>
""")

# A GPU's column is at least this wide; as many sit side by side as the window holds (two at 1280 px), the rest
# wrap below: three fixed columns had made a 1280 px window scroll sideways.
GPU_COLUMN_MIN = "36rem"

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem; color: #222; max-width: none; }
h1 { font-size: 1.4rem; margin-bottom: .3rem; }
h2 { font-size: 1.15rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
h3 { font-size: 1rem; margin-top: 1.2rem; }
.lede { color: #555; max-width: 60rem; }
.gpus { display: grid; gap: 2rem; }
section.gpu { min-width: 0; } .scroll { overflow-x: auto; }
.verdict { font-size: 1.05rem; font-weight: 600; }
.verdict.gpu { color: #1a7f37; } .verdict.host { color: #b35900; } .verdict.mixed { color: #8a6d00; }
dl.summary { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: .5rem 0; }
dl.summary dt { color: #555; } dl.summary dd { margin: 0; }
table { border-collapse: collapse; font-size: .85rem; margin: .4rem 0; }
th, td { padding: .2rem .5rem; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f6f6f6; } td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.src, .src { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .8rem; color: #555; }
figure { margin: .8rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .8rem; color: #555; }
td.boundcell { white-space: nowrap; }
.bound { display: inline-block; width: .7rem; height: .7rem; border-radius: 50%; margin-right: .3rem; }
ul.advice li, ul.notes li { margin: .2rem 0; }
.muted { color: #777; }
"""


def figure_data_uri(fig: Figure, fmt: str = "png") -> str:
    """A figure as a data: URI (PNG, or SVG with fmt="svg")."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=FIGURE_DPI)
    mime = "image/svg+xml" if fmt == "svg" else f"image/{fmt}"
    return f"data:{mime};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _figure(kind: str, gpu: str, fig: Figure, alt: str, caption: str) -> str:
    return (f'<figure class="{kind}" id="{kind}-{_slug(gpu)}"><img src="{figure_data_uri(fig)}" alt="{_e(alt)}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _summary(rec: PredictionRecord) -> str:
    rows = [("step time", f"{time_text(rec.step_time_us)}{step_range_text(rec)} (back-to-back steps; one step from an idle GPU "
                          f"{time_text(rec.first_step_us)})"),
            ("GPU time", f"{time_text(rec.gpu_time_us)} in {rec.kernels} kernels"),
            ("host time", f"{time_text(rec.host_time_us)}, of which model Python {time_text(rec.python_time_us)}"),
            ("host timer without synchronize", time_text(rec.naive_host_timer_us)),
            ("sync points", str(rec.sync_points)),
            ("kernel times", rec.kernel_model), ("host", rec.host)]
    slow, fast = rec.host_run_speed_range
    if rec.step_time_run_range_us[1] > 0 and (slow, fast) != (1.0, 1.0):
        low, high = rec.step_time_run_range_us
        rows.append((f"step over the calibrating host's runs (CPU work x{slow:.2f}-x{fast:.2f})",
                     # as the terminal says it (report._step_over): a range that does not move is the GPU's
                     "the step does not move: the GPU sets it" if time_text(low) == time_text(high)
                     else f"{time_text(low)}-{time_text(high)}"))
    for factor, step in rec.step_time_by_host_speed:
        rows.append((f"step with CPU work x{factor:g}", time_text(step)))
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows)
    comm = comm_line(rec)
    return (f'<p class="verdict {_e(rec.bound)}">{_e(verdict_text(rec))}</p><dl class="summary">{items}</dl>'
            + (f"<p>{_e(comm)}</p>" if comm else ""))


def _ops_table(rec: PredictionRecord, top: int) -> str:
    # the numbers a reader wants first, next to the op (with its source line under it): a narrow column scrolls
    # only the detail on the right (issue 34: at 1280 px the time and % columns had been off screen)
    head = ("op", "time", "% step", "bound", "phase", "module", "calls", "kernels", "FLOPs", "bytes", "FLOP/B")
    rows = []
    for g in group_ops(rec.ops)[:top]:
        share = g.time_us / rec.step_time_us if rec.step_time_us else 0.0
        dot = f'<span class="bound" style="background:{BOUND_COLOURS.get(g.bound, "#bbb")}"></span>'
        rows.append(
            f'<tr><td>{_e(short_op(g.op))}<div class="src">{_e(g.source or "-")}</div></td>'
            f'<td class="num">{_e(time_text(g.time_us))}</td><td class="num">{share:.1%}</td>'
            f'<td class="boundcell">{dot}{_e(g.bound)}</td><td>{_e(g.phase)}</td><td>{_e(g.module or "-")}</td>'
            f'<td class="num">{g.count}</td><td class="num">{g.kernels}</td>'
            f'<td class="num">{_e(si(g.flops))}</td><td class="num">{_e(si(g.bytes, "B"))}</td>'
            f'<td class="num">{g.intensity:.1f}</td></tr>')
    return _table("ops", head, rows)


def _table(cls: str, head: Sequence[str], rows: Sequence[str]) -> str:
    """A table of class `cls` in a box that scrolls sideways where it is wider than its column: the header
    cells escaped, the rows (`<tr>...</tr>`, built by the caller) as they are."""
    header = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (f'<div class="scroll"><table class="{cls}"><thead><tr>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _sync_table(rec: PredictionRecord) -> str:
    if not rec.sync_groups:
        return '<p class="muted">No sync points: the CPU never waits for the GPU inside the step.</p>'
    rows = [
        f'<tr><td>{_e(g.kind)}</td><td class="src">{_e(g.source or "-")}</td><td class="num">{g.count}</td>'
        f'<td class="num">{_e(time_text(g.stall_us))}</td><td class="num">{_e(time_text(g.saving_us))}</td>'
        f"<td>{_e(g.advice)}</td></tr>" for g in rec.sync_groups]
    return _table("syncs", ("kind", "source", "× per step", "stall", "saving with the fix", "fix"), rows)


def _hazard_table(rec: PredictionRecord) -> str:
    if not rec.hazards:
        return '<p class="muted">None: every access on two streams is ordered (or the step uses one stream).</p>'
    rows = [
        f"<tr><td>{_e(h.kind)}</td><td>{_e('x'.join(map(str, h.shape)))} {_e(h.dtype)}</td>"
        f'<td class="src">{_e(h.first_op)} ({h.first_stream}) {_e(h.first_source or "-")}</td>'
        f'<td class="src">{_e(h.second_op)} ({h.second_stream}) {_e(h.second_source or "-")}</td>'
        f"<td>{_e(h.fix)}</td><td class=\"num\">"
        f"{_e(time_text(h.step_with_fix_us)) if h.step_with_fix_us is not None else '-'}</td></tr>" for h in rec.hazards]
    return _table("syncs", ("kind", "tensor", "first (stream)", "then (stream)", "fix", "step with the fix"), rows)


def _list(items: Sequence[str], cls: str, empty: str) -> str:
    if not items:
        return f'<p class="muted">{_e(empty)}</p>'
    return f'<ul class="{cls}">' + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def gpu_section(rec: PredictionRecord, top: int = DEFAULT_TOP, measured: Mapping[int, float] | None = None,
                measured_caption: str = "") -> str:
    """Everything about one prediction: summary, both figures, tables, advice, uncosted ops, notes."""
    roof_caption = (f"Each point is one op (identical ops of every layer together), placed by its arithmetic "
                    f"intensity and the FLOP/s it achieves in its predicted time; area grows with that time. Roofs "
                    f"from the {rec.gpu_name}'s datasheet.")
    if measured is not None:
        roof_caption += " Hollow points: measured. " + measured_caption
    roofline = plot_roofline(rec, measured=measured, caption=measured_caption or None)
    timeline = plot_timeline(rec) if rec.spans else None
    figures = _figure("roofline", rec.gpu, roofline, f"roofline of the step on {rec.gpu_name}", roof_caption)
    if timeline is not None:
        figures += _figure("timeline", rec.gpu, timeline, f"timeline of one step on {rec.gpu_name}",
                           "One step from an idle GPU: the CPU's model Python (purple) and launches (amber) over the "
                           "kernels of each GPU stream (green); pink where the GPU runs nothing; hatched red where the "
                           "CPU waits at a sync point; the dashed line is what a host timer without "
                           "torch.cuda.synchronize() would read.")
    else:
        figures += '<p class="muted">This prediction was saved without its timeline.</p>'
    uncosted = [f"{op}: time unknown, not zero" for op in rec.uncosted]
    oom = oom_verdict_lines(rec)  # a step that does not fit: that first, as the CLI prints it
    verdict = f'<pre class="oom">{_e(chr(10).join(oom))}</pre>' if oom else ""
    return (f'<section class="gpu" id="gpu-{_slug(rec.gpu)}"><h2>{_e(rec.gpu_name)}</h2>{verdict}{_summary(rec)}'
            f"{figures}"
            f"<h3>Top ops by predicted time</h3>{_ops_table(rec, top)}"
            f"<h3>Memory</h3>{_list(memory_lines(rec), 'memory', 'Not predicted.')}"
            f"<h3>Sync points</h3>{_sync_table(rec)}"
            f"<h3>Stream hazards</h3>{_hazard_table(rec)}"
            f"<h3>Advice</h3>{_list(advice(rec), 'advice', 'Nothing stands out: the GPU is busy and never waited on.')}"
            f"<h3>Uncosted ops</h3>{_list(uncosted, 'uncosted', 'None: every op has a formula.')}"
            f"<h3>Notes</h3>{_list(list(rec.notes), 'notes', 'None.')}</section>")


COMPARISON_ROWS = (
    ("step time", lambda r: time_text(r.step_time_us)),
    ("GPU time", lambda r: time_text(r.gpu_time_us)),
    ("host time", lambda r: time_text(r.host_time_us)),
    ("verdict", lambda r: f"{r.bound}-bound, GPU idle {r.gpu_idle_fraction:.0%}"),
    ("kernels", lambda r: str(r.kernels)),
    ("sync points", lambda r: str(r.sync_points)),
    ("host timer without synchronize", lambda r: time_text(r.naive_host_timer_us)),
    ("kernel times", lambda r: r.kernel_model),
)


def comparison_table(records: Sequence[PredictionRecord]) -> str:
    head = "".join(f"<th>{_e(r.gpu_name)}</th>" for r in records)
    rows = "".join(f"<tr><th>{_e(name)}</th>" + "".join(f"<td>{_e(cell(r))}</td>" for r in records) + "</tr>"
                   for name, cell in COMPARISON_ROWS)
    return (f'<h2>Side by side</h2><table class="comparison"><thead><tr><th></th>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def render_report(preds: Sequence, top: int = DEFAULT_TOP, title: str | None = None,
                  measured: Mapping[int, float] | None = None, measured_caption: str = "") -> str:
    """The whole page for one or more predictions of the same step (one per GPU, side by side).
    `measured` (op index -> µs) adds measured points to the first prediction's roofline."""
    from kernelcast import __version__

    records = [as_record(p) for p in preds]
    if not records:
        raise ValueError("nothing to report")
    workload = records[0].workload or "step"
    title = title or f"kernelcast: {workload} on {', '.join(r.gpu_name for r in records)}"
    sections = "\n".join(gpu_section(r, top, measured if i == 0 else None, measured_caption)
                         for i, r in enumerate(records))
    return PAGE.substitute(csp=CSP, version=_e(__version__), title=_e(title), style=STYLE,
                           comparison=comparison_table(records) if len(records) > 1 else "",
                           column_min=GPU_COLUMN_MIN, sections=sections)


NOTEBOOK_SCOPE = ".kernelcast"


def scoped_style(style: str, scope: str = NOTEBOOK_SCOPE) -> str:
    """STYLE with every selector under `scope`, so a notebook's own styles are left alone ("body" is the scope)."""
    lines = []
    for line in style.strip().splitlines():
        rules = []
        for rule in line.split("}"):
            if "{" not in rule:
                continue
            selectors, body = rule.split("{", 1)
            scoped = ", ".join(scope if s.strip() == "body" else f"{scope} {s.strip()}" for s in selectors.split(","))
            rules.append(f"{scoped} {{{body}}}")
        lines.append(" ".join(rules))
    return "\n".join(lines)


def notebook_html(pred, top: int = 10) -> str:
    """A fragment for Jupyter: everything the report shows for one GPU, styled only inside its own element."""
    rec = as_record(pred)
    return f'<div class="kernelcast"><style>{scoped_style(STYLE)}</style>{gpu_section(rec, top)}</div>'
