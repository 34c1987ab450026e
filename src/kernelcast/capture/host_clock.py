"""The model's own Python time between aten ops, as the capture machine spends it.

A real run spends host time in three places: the model's Python (its own code, transformers, module
calls), torch's calls into C++ (binding, dispatch, launch), and waiting. The host model prices the second
from calibrated per-op costs; this clock measures the first during the recorded step. It counts time on
the main thread outside every torch call: each call that reaches our TorchFunctionMode is timed as the
capture's (under a capture a call costs far more Python than in a real run, and by an amount that varies by
call), and so are our module-tracking hooks. What remains is model code, plus two shares the capture adds:
the hand-over from C++ into our mode and back around each torch call, and nn.Module's call machinery, which
a capture runs on its slow, hooked path. Both are measured per call on loops of bare calls under the same
session and taken out; the host model charges each module call the calibrated real cost instead.
"""

from __future__ import annotations

import contextlib
import statistics
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Iterator

BASELINE_CALLS = 60  # bare calls per baseline loop
BASELINE_LOOPS = 5  # loops; the fastest loop's mean is kept (the least disturbed by other processes)


class HostClock:
    """Accumulates time outside our own work (torch calls, hooks) between two recorded ops."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self._last_ns = 0  # when the current stretch of model time began (0: not running)
        self._model_ns = 0
        self._depth = 0  # nesting of our own work
        self.module_calls = 0
        self.torch_calls = 0

    def ours_begin(self) -> None:
        if self._depth == 0 and self._last_ns:
            self._model_ns += perf_counter_ns() - self._last_ns
        self._depth += 1

    def ours_end(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._last_ns = perf_counter_ns()

    @contextlib.contextmanager
    def ours(self) -> Iterator[None]:
        """The time inside is the capture's own work."""
        self.ours_begin()
        try:
            yield
        finally:
            self.ours_end()

    def take(self) -> tuple[float, int, int]:
        """(µs of model time since the last recorded op, torch calls and module calls since then); then
        starts over. Called inside our own work (dispatch), so the running stretch was closed by ours_begin."""
        out = (self._model_ns / 1000.0, self.torch_calls, self.module_calls)
        self._model_ns = self.module_calls = self.torch_calls = 0
        return out


@dataclass(frozen=True)
class GapBaselines:
    """What the capture itself adds to the time outside torch calls, µs on the capture machine."""

    per_torch_call_us: float = 0.0
    per_module_call_us: float = 0.0

    def model_us(self, raw_us: float, torch_calls: int, module_calls: int) -> float:
        return max(raw_us - torch_calls * self.per_torch_call_us - module_calls * self.per_module_call_us, 0.0)


def fastest_mean(loops: list[list[float]]) -> float:
    return min((statistics.fmean(loop[1:]) for loop in loops if len(loop) > 1), default=0.0)
