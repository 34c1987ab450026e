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

Two things keep the figure a property of the step, not of the capture machine's load at that moment:
- the clock is the CPU time of the capturing thread (cpu_speed.thread_cpu_ns), so time spent waiting for a
  core while other processes run is not in it (a wall clock put a loaded machine's waits in the model's
  Python: the same MLP step read 1.2-3.4 ms between runs, issue 11);
- the step is recorded TIMING_STEPS times and each op keeps the fastest of its readings (min_over_steps): what
  noise CPU time still has (interrupts, page faults, caches another process evicted) only ever adds time.

Timed, the reading still moved by 12-24% between idle fresh processes (issue 33): three quarters of the time read
outside torch calls is the capture's own hand-over into its modes (about 4.8 µs per torch call on the
development machine), taken out by the gap baselines, so the model's quarter carries the noise of the whole (a
GPT-2 forward: 5.35-6.34 ms read, 1.32-1.98 ms left). So the clock also counts the Python lines the model runs
(LineCounter), over the first recorded step: a count does not move with the machine's load, and the host model
prices it per line as fitted to the device's measured steps (calibrate/python_lines.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import statistics
import sys
import sysconfig
from dataclasses import dataclass
import threading
from threading import get_ident
from typing import Iterator

from .cpu_speed import thread_cpu_ns

BASELINE_CALLS = 60  # bare calls per baseline loop
PLAIN_CALLS = 4  # calls that record no op, before each op of their baseline loop
BASELINE_LOOPS = 3  # loops (as many as the fewest timed steps); per call the fastest loop's reading
# Recorded steps the model's Python is read over (the first one's ops are the capture). With one, the predicted
# step of the same workload moved by 2-78% between idle captures (an interrupt or a page fault in a long
# stretch); with three, by 1-2% on the GPT-2 steps (benchmarks/host_determinism.py, modes cpu1 and shipped).
# A cheap step is read more often, up to TIMING_STEPS_MAX, while the extra steps take at most TIMING_BUDGET_S of
# CPU time: the MLP step's readings still moved by 12% over three steps when another process held a core for a
# while (and a repeat of a 25 ms step costs little).
TIMING_STEPS = 3
TIMING_STEPS_MAX = 8
TIMING_BUDGET_S = 0.25
# The repeats up to TIMING_STEPS stop where they would take more process CPU than this (every thread's: a
# backward runs on autograd's device thread): read three times, a Llama-7B
# training step took 13 s to capture instead of 5 (benchmarks/capture_speed.py; issue 9's target is 10 s with
# imports). Steps under about 0.75 s of capture, the GPT-2 and example steps of host_determinism.py, keep all three.
TIMING_REPEAT_BUDGET_S = 1.5


_KERNELCAST_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_EXAMPLES_DIR = os.path.join(_KERNELCAST_DIR, "examples") + os.sep  # the built-in examples are model code
# nn.Module's call machinery runs its slow, hooked path under a capture (our module tracking's hooks): its lines
# are not counted (the host model prices each module call at the calibrated cost of a real one), but the forward
# it calls is the model's.
_MODULE_CALL_FUNCTIONS = frozenset({"_call_impl", "_wrapped_call_impl", "inner"})
_MODULE_FILE = os.path.join("torch", "nn", "modules", "module.py")
# Python that only a capture runs: FakeTensor's and the dispatcher's, torch-function handling for our modes. Not
# counted, nor anything it calls.
_CAPTURE_ONLY = tuple(os.path.join("torch", *parts) for parts in (
    ("_subclasses", ""), ("_library", ""), ("utils", "_python_dispatch.py"), ("overrides.py",), ("_ops.py",),
    ("utils", "module_tracker.py")))
# torch.compile's machinery: its Python on the target host is priced by the profile's compiled-call units (the
# profile's `host.compiled`, fitted to a device probe: scripts/fit/fit_compiled_host.py), not per line.
# - Dynamo's (torch/_dynamo: eval_frame's wrapper, its stance and callback checks, graph_break(), a frame it
#   declines): not counted, but the model's code it calls is (the compiled function itself, a graph-broken
#   frame's eager code between graphs). On an H100 host (validation/probes/h100_compiled_host_more/), a compiled
#   function whose graph breaks left no graph ran 5-6 µs a call over its eager twin; counted, its 262 lines of
#   Dynamo's Python priced it at 118 µs over (probe case graph_breaks 1).
#   What Dynamo's Python calls in torch or the standard library (torch.accelerator's stream queries, the
#   torch._disable_dynamo wrapper its resume functions go through, contextlib) is its machinery too.
# - AOTAutograd's runtime wrappers and Inductor's (torch/_functorch, torch/_inductor) and the generated wrapper
#   they call: neither counted nor anything they call.
_COMPILE_PASS = (os.path.join("torch", "_dynamo", ""), os.path.join("torch", "compiler", ""),
                 os.path.join("torch", "_compile.py"))
_COMPILE_ONLY = tuple(os.path.join("torch", part, "") for part in ("_functorch", "_inductor"))
# The wrapper torch.compile puts around a compiled function (eval_frame.py's compile_wrapper, `_fn` in older
# torch): while it runs, Dynamo's frame callback is set, so every frame the function's eager parts enter (a graph
# break's `loss.backward()`, a resume function) goes through Dynamo first. Python that runs inside one is read
# as timed (the compiled host fit was made against such readings: scripts/fit/fit_compiled_host.py); Python
# outside every one (the loop of transformers' generate() around a compiled forward) is the model's, priced by
# its counted lines as in an eager step.
_EVAL_FRAME_FILE = os.path.join("torch", "_dynamo", "eval_frame.py")
_WRAPPER_NAMES = frozenset({"compile_wrapper", "_fn"})
_TORCH_DIR = os.path.dirname(os.path.abspath(importlib.util.find_spec("torch").origin)) + os.sep
_STDLIB_DIR = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def _wrapped_by(wrapper, code) -> bool:
    """Whether a Dynamo wrapper frame is calling the function it wraps (the `fn` of eval_frame's compile and
    disable wrappers, e.g. an optimizer's zero_grad under torch._disable_dynamo): that function is the model's
    work, counted, where the wrapper's own helpers are not."""
    try:
        fn = wrapper.f_locals.get("fn")
        fn = getattr(fn, "__func__", fn)
        return getattr(inspect.unwrap(fn) if callable(fn) else fn, "__code__", None) is code
    except Exception:  # an object whose attributes raise, an unwrap cycle: not the wrapped function
        return False


def _compiled_function_wrapper(frame) -> bool:
    """Whether a frame is the wrapper torch.compile put around a compiled function or module (its context is a
    _TorchDynamoContext that compiles; torch._dynamo.disable's wrapper has the same file and a DisableContext)."""
    if frame.f_code.co_name not in _WRAPPER_NAMES or not frame.f_code.co_filename.endswith(_EVAL_FRAME_FILE):
        return False
    try:
        context = frame.f_locals.get("self")
    except Exception:  # a frame whose locals cannot be read: not one of Dynamo's wrappers
        return False
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return eval_frame is not None and isinstance(context, eval_frame._TorchDynamoContext) \
        and not isinstance(context, eval_frame.DisableContext) and callable(getattr(context, "callback", None))


def _library_code(name: str) -> bool:
    """torch's own Python or the standard library's (not a third-party package installed beside it)."""
    return name.startswith(_TORCH_DIR) or (name.startswith(_STDLIB_DIR) and "site-packages" not in name) \
        or name.startswith("<frozen")


# Functions of ours that call the model's code (the step): what they call is counted (model_entry).
_MODEL_ENTRIES: set = set()


def model_entry(fn):
    """Mark a kernelcast function whose callees are the model's code (the function that calls the user's step):
    LineCounter counts what it calls, as it does not for the rest of kernelcast."""
    _MODEL_ENTRIES.add(fn.__code__)
    return fn


# The capture's own Python that autograd's thread enters, through a wrapper of torch's holding it as the free
# variable `fn`: the module tracker's backward hooks (capture/session.py; torch's ModuleTracker tells a
# module's backward apart by a hook over its tensors' gradients, torch.autograd.graph.register_multi_grad_hook,
# whose inner function holds it) and the recorder's dispatch entry (torch._disable_dynamo's wrapper, in
# torch/_compile.py). None of it runs without the capture: counted, it was 4100 lines on a 10-layer MLP's backward.
# Left in the starting thread's count, where the per-line cost was fitted with it (scripts/fit/fit_python_lines.py):
# taken out there too, the optimizers' steps lost half their lines and the fit's held-out error went 15.4% -> 18.4%
# (signed -2.8% -> -8.8%; 2026-12-08): what those lines stood for, on the optimizers' foreach calls, is a host cost
# the model does not price otherwise.
# Also the capture's: torch.utils.weak's callbacks as fake tensors die (FakeTensor's memo is a WeakIdKeyDictionary;
# eager CUDA tensors are in none).
_TRACKER_FILE = os.path.join("torch", "utils", "module_tracker.py")
_WEAK_FILE = os.path.join("torch", "utils", "weak.py")


def _capture_hook(frame) -> bool:
    """Whether a frame is the capture's own Python: it wraps a function of the capture's (the module tracker's or
    kernelcast's own) as its free variable `fn`, or it is torch.utils.weak's."""
    if frame.f_code.co_filename.endswith(_WEAK_FILE):
        return True
    if "fn" not in frame.f_code.co_freevars:
        return False
    fn = inspect.unwrap(frame.f_locals.get("fn"))
    origin = getattr(getattr(fn, "__code__", None), "co_filename", "")
    return origin.endswith(_TRACKER_FILE) or origin.startswith(_KERNELCAST_DIR)


# Torch's Python between a caller and the capture's dispatch: an op whose stack holds nothing else was called by
# C++ (autograd's engine running a backward formula), not by Python.
_DISPATCH_MACHINERY = (*_CAPTURE_ONLY, os.path.join("torch", "_compile.py"), _EVAL_FRAME_FILE)


_MACHINERY_FILES: dict[str, bool] = {}  # file name -> whether it is the capture's or the dispatch's (a cache)


def _machinery(name: str) -> bool:
    known = _MACHINERY_FILES.get(name)
    if known is None:
        known = _MACHINERY_FILES[name] = (name.startswith(_KERNELCAST_DIR) and not name.startswith(_EXAMPLES_DIR)) \
            or any(part in name for part in _DISPATCH_MACHINERY)
    return known


def called_from_python(frame) -> bool:
    """Whether Python other than the capture's own and torch's dispatch machinery is on the stack from `frame` down
    (the model's, or torch's own module code, a hook, a custom Function's backward)."""
    while frame is not None:
        if not _machinery(frame.f_code.co_filename):
            return True
        frame = frame.f_back
    return False


class LineCounter:
    """Counts the Python lines the model runs, on the thread that started it (sys.settrace over the counted step,
    off inside the capture's own work: pause/resume), and on each thread a recorded op runs on meanwhile (adopt:
    autograd's device thread runs a custom Function's backward, tensor and module hooks, and activation
    checkpointing's recomputed forward, all Python). A frame counts its lines when it starts outside the capture's own work (the clock's depth 0)
    and is called by a counted frame (or by a model_entry of ours, or was running when counting began), and is
    not kernelcast's or capture-only Python (_CAPTURE_ONLY); nn.Module's call machinery passes the count on to
    the forward it calls without counting its own lines, and so, in a step that runs compiled code, does
    torch.compile's (_COMPILE_PASS). Lines count only while the clock is outside our work."""

    def __init__(self, clock: "HostClock") -> None:
        self._clock = clock
        self.lines = 0
        self._thread = 0
        self._previous = None
        self._count = self._count_line  # the bound methods, kept: a frame's f_trace is compared by identity
        self._pass = self._pass_line
        self._compile_pass = self._compile_pass_line  # torch.compile's machinery (_COMPILE_PASS)
        self._compile_entry = self._compile_entry_line  # a compiled function's wrapper (_EVAL_FRAME_FILE)
        self._inside_compiled = 0  # compiled functions' wrappers running now (nested: more than one)
        self.stretch_inside_compiled = False  # the current stretch ran Python inside one (take_inside_compiled)
        self._touched: list = []  # (frame, its f_trace before) for the frames start() found running
        self._paused = False  # pause() took our tracer off (resume() puts it back, and nothing else)
        # Threads other than the starting one that run our tracer (adopt: only threads that had none), and those
        # of them whose tracer pause() took off. A thread's own sys.settrace is the only way to set its tracer,
        # so an adopted thread takes ours off itself, at its first call after stop() (_call).
        self._adopted: set[int] = set()
        self._adopted_paused: set[int] = set()
        # The step runs torch.compile'd code: Dynamo's, AOTAutograd's and Inductor's Python are priced by the
        # compiled-call units, not per line (_COMPILE_PASS). In an eager step the same files' Python (an
        # optimizer's torch._disable_dynamo wrapper, torch.compiler.is_compiling()) is the model's, as fitted.
        self.compiled_code = False
        # The step ran compiled graphs: the Python inside compiled functions' wrappers is read as timed (a step
        # whose compiled function made no graph, all of it run eagerly under Dynamo's frame handling, is priced
        # by its lines: on an H100 host the probe's graph_breaks case ran 5-6 µs a call over its eager twin).
        self.time_inside_compiled = False

    def start(self) -> None:
        self._thread = get_ident()
        self._inside_compiled, self.stretch_inside_compiled = 0, False
        self._previous = sys.gettrace()  # a debugger's or coverage's, given back at stop()
        self._touched = []
        frame = sys._getframe(1)
        while frame is not None:  # frames already running (a `with kernelcast.capture()` block) count from here
            self._touched.append((frame, frame.f_trace))
            frame.f_trace = self._tracer(frame.f_code)
            frame = frame.f_back
        sys.settrace(self._call)

    def stop(self) -> None:
        self._paused = False
        if self._thread == get_ident():
            sys.settrace(self._previous)
        for frame, trace in self._touched:
            frame.f_trace = trace
        self._touched = []
        self._thread = 0  # a tracer left on another thread stops counting (_call, _count_line)

    def _tracer(self, code):
        name = code.co_filename
        if name.startswith(_KERNELCAST_DIR) and not name.startswith(_EXAMPLES_DIR) \
                or any(part in name for part in _CAPTURE_ONLY) \
                or self.compiled_code and any(part in name for part in _COMPILE_ONLY):
            return None
        if self.compiled_code and any(part in name for part in _COMPILE_PASS):
            return self._compile_pass
        if code.co_name in _MODULE_CALL_FUNCTIONS and name.endswith(_MODULE_FILE):
            return self._pass
        return self._count

    def _call(self, frame, event, arg):
        if not self._thread and get_ident() in self._adopted:  # counting stopped: take this thread's tracer off
            self._adopted.discard(get_ident())
            sys.settrace(None)
            return None
        if self._clock._local.depth or not self._thread:
            return None
        caller = frame.f_back
        if get_ident() != self._thread and _capture_hook(frame):  # autograd's thread: the capture's own Python
            return None
        compile_tracers = (self._compile_pass, self._compile_entry)
        if caller is not None and caller.f_trace is not self._count and caller.f_trace is not self._pass \
                and caller.f_trace not in compile_tracers and caller.f_code not in _MODEL_ENTRIES:
            return None
        if self.time_inside_compiled and _compiled_function_wrapper(frame):
            # The stretch running now is the caller's Python: it ends at the compiled call's marker, which the
            # wrapper records as it starts (capture/compiled.py CompileWatch); the stretches after it are inside.
            self._inside_compiled += 1
            return self._compile_entry
        if caller is not None and caller.f_trace in compile_tracers and _library_code(frame.f_code.co_filename) \
                and not _wrapped_by(caller, frame.f_code):
            return self._tracer(frame.f_code) and self._compile_pass
        return self._tracer(frame.f_code)

    def _count_line(self, frame, event, arg):
        if event == "line" and self._clock._local.depth == 0 and self._thread:
            self.lines += 1
        return self._count

    def _pass_line(self, frame, event, arg):
        return self._pass

    def _compile_pass_line(self, frame, event, arg):
        return self._compile_pass

    def _compile_entry_line(self, frame, event, arg):
        if event == "return":  # (also when the frame ends by an exception)
            self._inside_compiled = max(self._inside_compiled - 1, 0)
        return self._compile_entry

    def take_inside_compiled(self) -> bool:
        """Whether the stretch since the last call ran inside a compiled function's wrapper; the next stretch
        starts inside one if one is still running."""
        inside, self.stretch_inside_compiled = self.stretch_inside_compiled, self._inside_compiled > 0
        return inside

    def pause(self) -> None:
        """The capture's own work begins on this thread: no tracer at all until resume(). Nothing in our work
        is counted (_call returns None there), but a global tracer is still called for each of its frames,
        FakeTensor's and the dispatcher's: the Llama-7B step of benchmarks/capture_speed.py recorded in 2.27 s
        with it, 1.73 s without (0.75 s of line counting in all before). Frames that already count keep their
        f_trace and count again from resume(): CPython calls a frame's f_trace for line events whenever a
        global tracer is set."""
        if self._thread == get_ident() and sys.gettrace() == self._call:  # a bound method: equal, not the same
            sys.settrace(None)
            self._paused = True
        elif get_ident() in self._adopted and sys.gettrace() == self._call:
            sys.settrace(None)
            self._adopted_paused.add(get_ident())

    def resume(self) -> None:
        """Put back the tracer pause() took off: only ours (a debugger or coverage started inside the step keeps
        its own)."""
        if self._paused and self._thread == get_ident():
            sys.settrace(self._call)
            self._paused = False
        elif get_ident() in self._adopted_paused:
            self._adopted_paused.discard(get_ident())
            if self._thread:
                sys.settrace(self._call)
            else:  # counting stopped while this thread's work ran: no tracer, as before adopt()
                self._adopted.discard(get_ident())

    def adopt(self) -> None:
        """Count on the calling thread too, while counting runs (called as the capture's work begins on a thread
        other than the starting one; the backward that thread runs began in a counted frame). A thread with a
        tracer of its own (a debugger's) is left to it."""
        ident = get_ident()
        if not self._thread or ident == self._thread or ident in self._adopted or sys.gettrace() is not None:
            return
        self._adopted.add(ident)
        sys.settrace(self._call)


class _ThreadDepth(threading.local):
    """Nesting of our own work, per thread: while the Python thread waits in the capture's own work for a
    backward, autograd's device thread runs the backward's ops, and the Python between them (a custom Function's
    backward, hooks, checkpointing's recomputed forward) is the model's."""

    depth = 0


class HostClock:
    """Accumulates time outside our own work (torch calls, hooks) between two recorded ops, and the model's
    Python lines while counting (count_lines)."""

    def __init__(self) -> None:
        self._lines = LineCounter(self)
        self._local = _ThreadDepth()
        self.restart()

    def restart(self) -> None:
        self._last_ns = 0  # when the current stretch of model time began (0: not running)
        self._last_thread = 0  # the thread whose CPU clock _last_ns was read from
        # The thread whose stretches are timed: the one recording. Autograd's thread runs backward ops, whose
        # readings are dropped (session.py _model_us): reading its clock twice per torch call there cost a GPT-2
        # training capture 8% of its time.
        self._timed_thread = get_ident()
        self._model_ns = 0
        self._local.depth = 0  # nesting of our own work, on this thread
        self.module_calls = 0
        self.torch_calls = 0
        self._timing = True
        self._lines.lines = 0
        self._lines.stretch_inside_compiled = self._lines._inside_compiled > 0

    @property
    def counting(self) -> bool:
        return bool(self._lines._thread)

    def count_compiled_code_as_units(self, on: bool) -> None:
        """Whether torch.compile's own Python is left out of the count (LineCounter.compiled_code)."""
        self._lines.compiled_code = on

    def time_inside_compiled_functions(self, on: bool) -> None:
        """Whether the Python inside compiled functions' wrappers is marked as read timed
        (LineCounter.time_inside_compiled)."""
        self._lines.time_inside_compiled = on

    def count_lines(self, on: bool) -> None:
        """Start or stop counting the model's Python lines (LineCounter) on this thread."""
        if on and not self.counting:
            self._lines.start()
        elif not on and self.counting:
            self._lines.stop()

    def stop(self) -> None:
        """Read no clock until restart(): an unrecorded step (the warm-up) keeps none of its readings, and two
        thread-CPU clock reads per torch call were 7% of a Llama-7B warm-up step's capture time (py-spy)."""
        self._timing = False
        self._last_ns = 0

    def ours_begin(self) -> None:
        # A stretch that began on another thread (the autograd engine's device thread runs backward ops; the
        # optimizer's follow on the Python thread) cannot be timed by this thread's CPU clock: the two clocks
        # differ by all the CPU each thread has used (a compiled step's zero_grad read 6 s). It is dropped.
        local = self._local  # (read once: this runs per torch call)
        if local.depth == 0:
            # _last_ns is set on the timed thread only (ours_end)
            if self._timing and self._last_ns and get_ident() == self._last_thread:
                self._model_ns += thread_cpu_ns() - self._last_ns
            if self._lines._thread:
                self._lines.adopt()
                self._lines.pause()
        local.depth += 1

    def ours_end(self) -> None:
        local = self._local
        local.depth -= 1
        if local.depth == 0:
            if self._lines._thread:
                self._lines.resume()
            if self._timing:
                ident = get_ident()
                self._last_ns = thread_cpu_ns() if ident == self._timed_thread else 0
                self._last_thread = ident

    @contextlib.contextmanager
    def ours(self) -> Iterator[None]:
        """The time inside is the capture's own work."""
        self.ours_begin()
        try:
            yield
        finally:
            self.ours_end()

    def take_inside_compiled(self) -> bool:
        """Whether the Python since the last recorded op ran inside a compiled function's wrapper (as the line
        count last saw it: the step's end is recorded after counting stops); call right after take()."""
        return self._lines.take_inside_compiled()

    def take(self) -> tuple[float, int, int, int]:
        """(µs of model time since the last recorded op, torch calls, module calls and counted Python lines since
        then); then starts over. Called inside our own work (dispatch), so the running stretch was closed by
        ours_begin."""
        out = (self._model_ns / 1000.0, self.torch_calls, self.module_calls, self._lines.lines)
        self._model_ns = self.module_calls = self.torch_calls = self._lines.lines = 0
        return out


@dataclass(frozen=True)
class GapBaselines:
    """What the capture itself adds to the time outside torch calls, µs on the capture machine.

    Two kinds of torch call hand over differently: one that runs an op (`x + 1`: the one each recorded op's
    stretch ends with) and one that records nothing (a property such as `p.grad`, `torch.is_complex(p)`:
    the optimizer's bookkeeping makes hundreds). Measured on the capture machine, 2026-11-30: 4.0 and 1.8 µs
    per call. Taking the first off every call made the optimizer's Python the small difference of two large
    numbers (an AdamW step of 14 parameters: 160 calls, 900 µs read, 175 µs left) and moved it by 40% between
    processes."""

    per_torch_call_us: float = 0.0  # a call that runs an op
    per_module_call_us: float = 0.0
    per_plain_call_us: float | None = None  # a call that records no op (None: as per_torch_call_us)

    def model_us(self, raw_us: float, torch_calls: int, module_calls: int) -> float:
        """A stretch of `torch_calls` calls ends with the call that ran the op it is read for; the others ran
        none (each one that did would have ended a stretch of its own)."""
        plain = self.per_torch_call_us if self.per_plain_call_us is None else self.per_plain_call_us
        calls_us = self.per_torch_call_us + (torch_calls - 1) * plain if torch_calls else 0.0
        return max(raw_us - calls_us - module_calls * self.per_module_call_us, 0.0)


def min_over_steps(readings: list[list[float]]) -> list[float]:
    """Per op, the fastest of its readings over repeated steps (each list one step, ops in the same order)."""
    return [min(values) for values in zip(*readings, strict=True)]


def median_over_steps(readings: list[list[float]]) -> list[float]:
    return [statistics.median(values) for values in zip(*readings, strict=True)]
