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
from typing import Any, Callable, Iterator
from unittest import mock

import torch

COMPILED_NOTE = ("the step runs torch.compile'd code ({what}): it is predicted as eager PyTorch, op by op; "
                 "kernelcast has no model of Inductor's fused kernels yet")
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
    """Counts calls of compiled callables while `recording` is on (see the module docstring)."""

    def __init__(self) -> None:
        self.recording = False
        self.compiled_calls = 0

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
            if self.recording and callback not in (None, False):
                self.compiled_calls += 1
            return original(callback)

        with mock.patch.object(eval_frame, "_callback_from_stance", callback_from_stance):
            yield self


def compiled_note(found: list[str], compiled_calls: int) -> str | None:
    """The capture's note for a compiled step, or None when nothing compiled ran or was found."""
    if found:
        return COMPILED_NOTE.format(what=", ".join(found))
    if compiled_calls:
        return COMPILED_NOTE.format(what=f"{compiled_calls} call{'s' if compiled_calls > 1 else ''} of compiled "
                                         "code")
    return None
