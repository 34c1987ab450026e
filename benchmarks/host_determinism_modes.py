"""The capture modes benchmarks/host_determinism.py compares, applied inside its child process.

- shipped: nothing changed;
- wall: the clock kernelcast used before issue 11 (wall clock) and one recorded step;
- cpu1: CPU time, but one recorded step (what the repeated steps add);
- counted: the model's Python priced from what it executed (lines and calls, counted by a tracer while the
  model's code runs), at per-unit costs fitted on microbenchmarks here (fit_unit_costs).
"""

from __future__ import annotations

import importlib
import sys
import time

COUNTS: dict = {}  # what the counted mode counted and the costs it fitted, for the benchmark's JSON


def apply(mode: str) -> None:
    if mode == "wall":
        host_clock = importlib.import_module("kernelcast.capture.host_clock")
        cpu_speed = importlib.import_module("kernelcast.capture.cpu_speed")
        api = importlib.import_module("kernelcast.capture.api")
        host_clock.thread_cpu_ns = time.perf_counter_ns
        cpu_speed.thread_cpu_ns = time.perf_counter_ns
        api.TIMING_STEPS = 1
    elif mode == "cpu1":
        importlib.import_module("kernelcast.capture.api").TIMING_STEPS = 1
    elif mode == "counted":
        _count_model_python()


# -- counted --------------------------------------------------------------------------------------------------
class _Counter:
    """Counts Python lines executed and Python functions called while switched on (sys.settrace)."""

    def __init__(self) -> None:
        self.lines = 0
        self.calls = 0

    def local(self, frame, event, arg):
        if event == "line":
            self.lines += 1
        return self.local

    def global_(self, frame, event, arg):
        if event == "call":
            self.calls += 1
            return self.local
        return None

    def on(self) -> None:
        frame = sys._getframe(2)
        while frame is not None:  # frames already running (the model's forward) trace their lines from here on
            if "/kernelcast/" not in frame.f_code.co_filename:
                frame.f_trace = self.local
            frame = frame.f_back
        sys.settrace(self.global_)

    def off(self) -> None:
        sys.settrace(None)


def _microbenchmarks():
    """Python the way model code and the optimizer's Python run it, none of them a workload of the benchmark."""
    import torch

    cpu_speed = importlib.import_module("kernelcast.capture.cpu_speed")
    identity, x = torch.nn.Identity(), torch.ones(4)

    class State:
        def __init__(self, i):
            self.step, self.grad, self.name = i, i % 3 != 0, f"p{i}"

    params = [State(i) for i in range(64)]

    def modules():
        for _ in range(200):
            identity(x)

    def optimizer_like():
        for _ in range(20):
            grads, steps = [], []
            for p in params:
                if p.grad and isinstance(p.name, str):
                    grads.append(p)
                    steps.append(p.step + 1)
            {k: v for k, v in zip(range(len(steps)), steps) if v % 2}

    return {"python bench": lambda: cpu_speed._workload(200), "module calls": modules,
            "optimizer-like": optimizer_like}


def fit_unit_costs() -> tuple[float, float]:
    """ns per line and per call, least squares over the microbenchmarks: counted once, timed (CPU time, the
    fastest of 5 runs) without the tracer."""
    cpu_speed = importlib.import_module("kernelcast.capture.cpu_speed")
    rows = []
    for name, fn in _microbenchmarks().items():
        counter = _Counter()
        fn()
        sys.settrace(counter.global_)
        fn()
        sys.settrace(None)
        ns = cpu_speed.fastest_us(fn) * 1e3
        rows.append((counter.lines, counter.calls, ns))
        COUNTS.setdefault("microbenchmarks", {})[name] = {"lines": counter.lines, "calls": counter.calls,
                                                          "cpu_us": ns / 1e3}
    # normal equations for ns = a * lines + b * calls
    sll = sum(r[0] * r[0] for r in rows)
    scc = sum(r[1] * r[1] for r in rows)
    slc = sum(r[0] * r[1] for r in rows)
    sly = sum(r[0] * r[2] for r in rows)
    scy = sum(r[1] * r[2] for r in rows)
    det = sll * scc - slc * slc
    a, b = (sly * scc - scy * slc) / det, (scy * sll - sly * slc) / det
    if a < 0 or b < 0:  # one unit alone
        a, b = sum(r[2] for r in rows) / sum(r[0] for r in rows), 0.0
    COUNTS["ns_per_line"], COUNTS["ns_per_call"] = a, b
    return a, b


def _count_model_python() -> None:
    """HostClock's stretches of model time become priced counts: the tracer runs only while no torch call or
    capture hook is running (depth 0), and each stretch adds lines x a + calls x b nanoseconds."""
    host_clock = importlib.import_module("kernelcast.capture.host_clock")
    per_line, per_call = fit_unit_costs()
    counter = _Counter()
    COUNTS["lines"] = COUNTS["calls"] = 0

    def ours_begin(self) -> None:
        if self._depth == 0:
            counter.off()
            if self._last_ns:
                self._model_ns += counter.lines * per_line + counter.calls * per_call
                COUNTS["lines"] += counter.lines
                COUNTS["calls"] += counter.calls
            counter.lines = counter.calls = 0
        self._depth += 1

    def ours_end(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._last_ns = 1
            counter.lines = counter.calls = 0
            counter.on()

    def restart(self) -> None:
        counter.off()
        self._last_ns = 0
        self._model_ns = 0
        self._depth = 0
        self.module_calls = 0
        self.torch_calls = 0

    host_clock.HostClock.ours_begin = ours_begin
    host_clock.HostClock.ours_end = ours_end
    host_clock.HostClock.restart = restart


def priced(cap):
    """The capture as it is: its python_us are already the priced counts (kept for symmetry)."""
    return cap
