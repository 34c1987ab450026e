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
COMPILE_HOST_NOTE = ("host side of compiled code: Inductor's generated wrapper Python is timed on this machine; each "
                     "Triton launch and CUDA graph replay is priced at a stand-in cost until calibrated")
CUDAGRAPH_SKIP_NOTE = "CUDA graphs not used for a compiled graph (Inductor's reason): {reason}"
MAX_AUTOTUNE_NOTE = ("max-autotune: Inductor's GEMM/conv template choices need benchmarks on the device; they are "
                     "predicted as the extern (cuBLAS/cuDNN) kernels, which Inductor also times, and pointwise "
                     "configs as in default mode")
MAX_SKIP_REASON_CHARS = 200
RECOMPILE_NOTE = ("the recorded step compiled {n} graph{s} again after {warm} warm-up steps (Dynamo recompiled, "
                  "e.g. on a shape or value that changes each step): its compile time is in the host time")
COMPILE_TIME_NOTE = ("compile: Dynamo, AOTAutograd and Inductor took {seconds:.1f} s on the capture machine (before "
                     "the first step; not in the step time); on the device's host, add the Triton compiler's time "
                     "for {kernels} kernels, which did not run here")
GRAPH_BREAK_NOTE = "graph break (Dynamo) at {source}: {reason}; the code around it runs eager"
ORIGINAL_CALLABLE_ATTR = "_torchdynamo_orig_callable"  # set by torch.compile on the function it returns
MAX_CLOSURE_DEPTH = 2  # a step's closure, and the closures of functions in it


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
                  ops=(), breaks=()) -> list[str]:
    """The capture's notes for a compiled step (none when nothing compiled ran or was found)."""
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
    for found_break in breaks:
        notes.append(GRAPH_BREAK_NOTE.format(source=found_break.source or "?", reason=found_break.reason))
    return notes
