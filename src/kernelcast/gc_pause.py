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
