"""A progress display for the long commands (capture, calibrate, measure, validate): on stderr, only when stderr is
a terminal (a pipe, a file or CI gets nothing), and gone when the command ends.

The command line opens one display (`with progress_display():`); library code marks where it is with
`stage(text, total)` and `advance()`, which do nothing when no display is open, so the library stays usable
(and silent) from notebooks and scripts. The open display is held in a context variable, so it is scoped to the
`with` block that opened it.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

_current: contextvars.ContextVar["_Display | None"] = contextvars.ContextVar("kernelcast_progress", default=None)
REFRESHES_PER_SECOND = 8


class _Display:
    """One line: a spinner, what is running, a bar when the stage has a known size, elapsed time."""

    def __init__(self, progress: Progress, title: str) -> None:
        self._progress = progress
        self._title = title
        self._task = progress.add_task(title, total=None)

    def stage(self, text: str, total: float | None = None) -> None:
        self._progress.reset(self._task, total=total, description=f"{self._title}: {text}")

    def advance(self, steps: float = 1.0) -> None:
        self._progress.advance(self._task, steps)


@contextlib.contextmanager
def progress_display(title: str, console: Console | None = None) -> Iterator[None]:
    """Show progress for the block when `console` (stderr by default) is a terminal; otherwise do nothing."""
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, refresh_per_second=REFRESHES_PER_SECOND) as progress:
        token = _current.set(_Display(progress, title))
        try:
            yield
        finally:
            _current.reset(token)


def stage(text: str, total: float | None = None) -> None:
    """Start a stage of the running command (with `total` steps to `advance`, or open-ended)."""
    display = _current.get()
    if display is not None:
        display.stage(text, total)


def advance(steps: float = 1.0) -> None:
    display = _current.get()
    if display is not None:
        display.advance(steps)


def active() -> bool:
    return _current.get() is not None
