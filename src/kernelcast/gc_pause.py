"""Pausing Python's cyclic garbage collector over kernelcast's allocation-heavy stages.

A capture makes many short-lived objects (fake tensors, autograd nodes, op records) and a prediction ~10 per op
(costs, estimates, launches, spans); the JSON profile is ~400k objects. Each of these stages triggers full
collections that walk every object the process holds, torch's and the user's model's included, for cycles that
the stages do not make. Measured on the 2-core development machine (out of benchmarks/capture_speed.py's Llama-7B
step): a capture ~20% faster, the first prediction of a 9490-op capture 2.2-2.5 s -> 1.5-1.7 s.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Collector off inside (a context manager or a decorator); back to its earlier state after, even on error.
    Reference counting still frees everything that is not in a cycle."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# A one-shot command (the CLI's predict, capture, fit, advise, sweep, report) makes its objects once and exits
# without tearing them down (cli.run). Python's automatic collections over that process walk everything it holds
# each time it has grown by a quarter: over the imports of torch and the model's library, and after each paused
# stage. Measured on the 2-core development machine, `kernelcast predict` of benchmarks/capture_speed.py's
# Llama-7B step, three runs each interleaved: 7.26-7.37 s with them, 6.64-6.88 s without, 14 MB more peak RSS.
_one_shot = False
_captures_started = 0


def one_shot_process() -> None:
    """No automatic cyclic collection for the rest of this process: what a capture leaves in cycles is collected
    only when the next capture starts (collect_before_capture), so commands that capture several times (advise,
    fit, the memory fixes' re-captures) hold at most one capture's garbage. For the CLI only: a notebook or a
    test process keeps its collector."""
    global _one_shot
    _one_shot = True
    gc.disable()


def collect_before_capture() -> None:
    """Called as a capture starts: in a one-shot process, collect the cycles the captures before it left."""
    global _captures_started
    if _one_shot and _captures_started:
        gc.collect()
    _captures_started += 1
