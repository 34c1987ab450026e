"""Say so when a captured step runs torch.compile'd code: it is predicted as eager PyTorch.

Under the capture's FakeTensorMode and dispatch modes, Dynamo skips every frame, so a compiled function or
module runs its eager ops and the capture records those, where a GPU would run Inductor's fused (Triton)
kernels: zoo compiled_mean, eager `mean` predicted where the H200 ran two Triton kernels. Until kernelcast
models compiled steps, such a prediction must not pass for a compiled one. Two checks:

- before the step: the step, what it wraps and closes over, and its arguments (modules with their
  submodules) are searched for torch.compile's marks: an OptimizedModule, a module compiled in place
  (`module.compile()` sets `_compiled_call_impl`), a function wrapped by torch.compile
  (`_torchdynamo_orig_callable`);
- while recording: Dynamo being asked to run a frame. Every compiled callable passes its compile callback
  through `torch._dynamo.eval_frame._callback_from_stance` on each call (torch 2.6-2.13; where a torch lacks
  it, only the first check runs); disabled regions (`torch._dynamo.disable`, which FakeTensorMode's own
  internals use) pass None or False and are not counted.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from typing import Any, Callable, Iterator
from unittest import mock

import torch

COMPILED_NOTE = ("the step runs torch.compile'd code ({what}): it is predicted as eager PyTorch, op by op; "
                 "kernelcast has no model of Inductor's fused kernels without triton ({why})")
INDUCTOR_NOTE = ("the step runs torch.compile'd code ({what}): {graphs} graph{s} compiled by Dynamo, AOTAutograd and "
                 "Inductor on fake CUDA for the target GPU; the kernels are Inductor's own ({triton} Triton kernels "
                 "written, extern kernels as their aten ops)")
GENERATED_TIMES_NOTE = ("Inductor's Triton kernels are timed from Inductor's own byte counts at the achieved rate of "
                        "eager pointwise kernels of the same size (templates by their FLOPs): a stand-in until the "
                        "rates of generated kernels (pointwise, reductions, persistent reductions) are calibrated "
                        "on the device")
COMPILE_HOST_NOTE = ("host side of compiled code: Dynamo's guards, AOTAutograd's and Inductor's wrappers, each Triton "
                     "launch and each CUDA graph replay are priced by per-unit costs (the profile's fit to a device "
                     "probe of compiled calls; stand-ins without it), not by their time here on fake tensors")
CUDAGRAPH_SKIP_NOTE = "CUDA graphs not used for a compiled graph (Inductor's reason): {reason}"
MAX_AUTOTUNE_NOTE = ("max-autotune: Inductor's GEMM/conv template choices need benchmarks on the device; they are "
                     "predicted as the extern (cuBLAS/cuDNN) kernels, which Inductor also times, and pointwise "
                     "configs as in default mode")
MAX_SKIP_REASON_CHARS = 200
RECOMPILE_NOTE = ("the recorded step compiled {n} graph{s} again after {warm} warm-up steps (Dynamo recompiled, "
                  "e.g. on a shape or value that changes each step): its compile time is not in the host time; a "
                  "real run pays it each step it recompiles")
DYNAMO_STEADY_NOTE = ("Dynamo traced a frame again in each of {steps} warm-up steps (a guard that fails each step, "
                      "e.g. on a list the step appends to or a Python value that changes) until "
                      "torch._dynamo.config.recompile_limit ({limit}) made it run eagerly: a real run pays that "
                      "compile time in its first steps; the predicted step is the steady state after them")
# Dynamo traced frames again in the recorded step though Inductor compiled no new graph: a guard that fails every
# step (a list the step appends to, a Python number that changes). torch._dynamo.config.recompile_limit (8 by
# default) stops it: from then on the frame runs eagerly.
DYNAMO_RECOMPILE_NOTE = ("Dynamo compiled {n} frame{s} again in the recorded step after the warm-up steps (a guard "
                         "that fails each step, e.g. on a list the step appends to or a Python value that changes): "
                         "a real run pays that compile time each step until torch._dynamo.config.recompile_limit "
                         "({limit}) recompiles, then runs those frames eagerly; the predicted step is that steady "
                         "state (this machine's compile time is left out)")
COMPILE_TIME_NOTE = ("compile: Dynamo, AOTAutograd and Inductor took {seconds:.1f} s on the capture machine (before "
                     "the first step; not in the step time); on the device's host, add the Triton compiler's time "
                     "for {kernels} kernels, which did not run here")
GRAPH_BREAK_NOTE = "graph break (Dynamo) at {source}: {reason}; the code around it runs eager"
ORIGINAL_CALLABLE_ATTR = "_torchdynamo_orig_callable"  # set by torch.compile on the function it returns
MAX_CLOSURE_DEPTH = 2  # a step's closure, and the closures of functions in it


def is_compiled_callable(fn: Any) -> bool:
    """Whether `fn` itself is what torch.compile returned (a compiled function, or an nn.Module it wrapped)."""
    optimized = _optimized_module_type()
    return getattr(fn, ORIGINAL_CALLABLE_ATTR, None) is not None or (
        optimized is not None and isinstance(fn, optimized))


def _optimized_module_type() -> type | None:
    try:
        from torch._dynamo.eval_frame import OptimizedModule
    except ImportError:  # a torch without Dynamo
        return None
    return OptimizedModule


def _name(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or type(obj).__name__


def _compiled_modules(module: torch.nn.Module, optimized: type | None) -> list[str]:
    found = []
    for name, sub in module.named_modules():
        if optimized is not None and isinstance(sub, optimized):
            found.append(f"torch.compile({type(sub._orig_mod).__name__})")
        elif getattr(sub, "_compiled_call_impl", None) is not None:
            found.append(f"{type(sub).__name__}.compile()" if not name else f"{name}.compile()")
    return found


def compiled_in(step: Callable, args: tuple) -> list[str]:
    """What in the step and its arguments torch.compile has wrapped (empty when nothing)."""
    optimized = _optimized_module_type()
    found: list[str] = []
    seen: set[int] = set()

    def visit(obj: Any, depth: int) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, torch.nn.Module):
            found.extend(_compiled_modules(obj, optimized))
            return
        if isinstance(obj, (list, tuple)):
            for item in obj:
                visit(item, depth)
            return
        if isinstance(obj, dict):
            for item in obj.values():
                visit(item, depth)
            return
        if not callable(obj):
            return
        original = getattr(obj, ORIGINAL_CALLABLE_ATTR, None)
        if original is not None:
            found.append(f"torch.compile({_name(original)})")
            return
        wrapped = getattr(obj, "__wrapped__", None)
        if wrapped is not None:
            visit(wrapped, depth)
        bound_self = getattr(obj, "__self__", None)
        if isinstance(bound_self, torch.nn.Module):
            visit(bound_self, depth)
        if depth < MAX_CLOSURE_DEPTH and inspect.isfunction(obj):
            for cell in obj.__closure__ or ():
                try:
                    visit(cell.cell_contents, depth + 1)
                except ValueError:  # an empty cell
                    continue

    visit(step, 0)
    for arg in args:
        visit(arg, 0)
    return sorted(set(found))


class CompileWatch:
    """Counts calls of compiled callables while `recording` is on (see the module docstring); `on_call` is told
    of every call (recorded or not) with the frame of the compiled callable's wrapper."""

    def __init__(self, on_call: Callable[[Any], None] | None = None) -> None:
        self.recording = False
        self.compiled_calls = 0
        self.on_call = on_call

    @contextlib.contextmanager
    def watching(self) -> Iterator["CompileWatch"]:
        try:
            import torch._dynamo.eval_frame as eval_frame
        except ImportError:
            yield self
            return
        original = getattr(eval_frame, "_callback_from_stance", None)
        if original is None:
            yield self
            return

        def callback_from_stance(callback):
            if callback not in (None, False):
                if self.recording:
                    self.compiled_calls += 1
                if self.on_call is not None:
                    self.on_call(sys._getframe(1))
            return original(callback)

        with mock.patch.object(eval_frame, "_callback_from_stance", callback_from_stance):
            yield self


class DynamoCompiles:
    """Counts Dynamo's compilations (torch._dynamo.callback: one start and one end per outermost compile) and
    tells `on_start` / `on_end` of each, so that the capture's clock leaves them out of the model's Python: a
    frame that recompiles in the recorded step (a graph break's resume function guarding on a list the step
    appends to) had put 45 ms of this machine's tracing on the `.item()` after it, and advise called compile
    7x slower for it (issue 32)."""

    def __init__(self, on_start: Callable[[], None], on_end: Callable[[], None]) -> None:
        self.count = 0
        self._on_start, self._on_end = on_start, on_end
        self._open = 0

    def _start(self, *_args: Any) -> None:
        self.count += 1
        self._open += 1
        self._on_start()

    def _end(self, *_args: Any) -> None:
        if self._open:  # an end whose start came before we watched is not ours to close
            self._open -= 1
            self._on_end()

    @contextlib.contextmanager
    def watching(self) -> Iterator["DynamoCompiles"]:
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError:  # a torch without Dynamo's compile callbacks
            yield self
            return
        callback_handler.register_start_callback(self._start)
        callback_handler.register_end_callback(self._end)
        try:
            yield self
        finally:  # torch._dynamo.reset() clears the handler's callbacks: ours may be gone already
            if self._start in callback_handler.start_callbacks:
                callback_handler.remove_start_callback(self._start)
            if self._end in callback_handler.end_callbacks:
                callback_handler.remove_end_callback(self._end)


def _recompile_limit() -> int | str:
    """torch._dynamo.config's recompile limit (cache_size_limit before torch 2.6), or "?" where neither exists."""
    try:
        from torch._dynamo import config
    except ImportError:
        return "?"
    return getattr(config, "recompile_limit", getattr(config, "cache_size_limit", "?"))


def _what(found: list[str], compiled_calls: int) -> str:
    if found:
        return ", ".join(found)
    return f"{compiled_calls} call{'s' if compiled_calls > 1 else ''} of compiled code"


def _ran_inductor(ops) -> bool:
    return any("compiled" in op.tags for op in ops)


def compiled_model(found: list[str], compiled_calls: int, ops) -> str:
    """How the capture recorded compiled code: "inductor" (Inductor's kernels), "eager" (op by op), or ""
    when the step runs no compiled code."""
    if _ran_inductor(ops):
        return "inductor"
    return "eager" if found or compiled_calls else ""


def compiled_note(found: list[str], compiled_calls: int, regions=None, missing: str | None = None,
                  ops=(), breaks=(), recorded_frames: int = 0, recompiling_steps: int = 0) -> list[str]:
    """The capture's notes for a compiled step (none when nothing compiled ran or was found). recorded_frames:
    the frames Dynamo compiled during the recorded step (DynamoCompiles); recompiling_steps: warm-up steps in
    which Dynamo traced frames again with no new Inductor graph (capture/api.py)."""
    if not found and not compiled_calls and not _ran_inductor(ops):
        return []
    what = _what(found, compiled_calls)
    if regions is None or not _ran_inductor(ops):
        why = missing or "Dynamo compiled nothing for the recorded step"
        return [COMPILED_NOTE.format(what=what, why=why)]
    notes = [INDUCTOR_NOTE.format(what=what, graphs=regions.graphs, s="s" if regions.graphs != 1 else "",
                                  triton=len(regions.kernels)),
             GENERATED_TIMES_NOTE, COMPILE_HOST_NOTE]
    if regions.max_autotune:
        notes.append(MAX_AUTOTUNE_NOTE)
    if regions.compile_s:
        notes.append(COMPILE_TIME_NOTE.format(seconds=regions.compile_s, kernels=len(regions.kernels)))
    for reason in dict.fromkeys(regions.cudagraph_skips):
        notes.append(CUDAGRAPH_SKIP_NOTE.format(reason=" ".join(reason.split())[:MAX_SKIP_REASON_CHARS]))
    if regions.warm_graphs and regions.graphs > regions.warm_graphs:
        n = regions.graphs - regions.warm_graphs
        notes.append(RECOMPILE_NOTE.format(n=n, s="s" if n > 1 else "", warm="the"))
    elif recorded_frames:
        notes.append(DYNAMO_RECOMPILE_NOTE.format(n=recorded_frames, s="s" if recorded_frames > 1 else "",
                                                  limit=_recompile_limit()))
    if recompiling_steps > 1 and not recorded_frames:
        notes.append(DYNAMO_STEADY_NOTE.format(steps=recompiling_steps, limit=_recompile_limit()))
    for found_break in breaks:
        notes.append(GRAPH_BREAK_NOTE.format(source=found_break.source or "?", reason=found_break.reason))
    return notes
