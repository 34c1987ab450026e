"""The figures as files: roofline_<gpu> and timeline_<gpu>, each as PNG and SVG (`kernelcast report --figures`)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from kernelcast.outputs import replaced_atomically
from kernelcast.records import PredictionRecord

from .roofline import plot_roofline
from .timeline_plot import plot_timeline

FIGURE_DPI = 130
FORMATS = ("png", "svg")


def write_figures(records: Sequence[PredictionRecord], folder: str | Path,
                  measured: Mapping[int, float] | None = None, measured_caption: str = "") -> list[Path]:
    """Both figures of each prediction into `folder`; `measured` (op index -> µs) goes on the first roofline.
    Each file is written whole or not at all."""
    written = []
    for i, record in enumerate(records):
        mine = measured if i == 0 else None
        figures = {"roofline": plot_roofline(record, measured=mine, caption=measured_caption if mine else None)}
        if record.spans:
            figures["timeline"] = plot_timeline(record)
        for name, fig in figures.items():
            for fmt in FORMATS:
                path = Path(folder) / f"{name}_{record.gpu}.{fmt}"
                with replaced_atomically(path) as tmp:
                    fig.savefig(tmp, format=fmt, dpi=FIGURE_DPI)
                written.append(path)
    return written
