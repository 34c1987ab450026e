"""A capture session: everything that must be in force while the user's code runs without a GPU.

Layers, outermost first:
- the torch.cuda facade (answers for the target GPU, records synchronize; streams and events as ids);
- module tracking and optimizer-step hooks (for the module path and the phase of each op);
- FakeTensorMode (tensors have shapes, dtypes and a "cuda" device, but no memory);
- the Recorder (TorchDispatchMode, records aten ops) and the Router (TorchFunctionMode, routes attention).
The Recorder's HostClock times the model's own Python between ops; the Router and the module tracker book
their time as the capture's, and measure_gap_baselines takes out the capture's constant shares per call.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import logging
import os
import statistics
import time
import weakref
from typing import Callable, Iterator
from unittest import mock

import torch
import torch._dynamo  # noqa: F401  (FakeTensorMode imports it on first use: ~1.5 s; pay it at import time)
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.autograd.graph import register_multi_grad_hook
from torch.utils._pytree import tree_flatten
from torch.utils.module_tracker import ModuleTracker

from kernelcast import _fake_cuda
from kernelcast.devices import DEFAULT_GPU
from kernelcast.errors import DEBUG_ENV
from kernelcast.records import RECORD_EVENT_OP, WAIT_EVENT_OP, Capture, CaptureSettings, OpRecord

from . import real_backward
from .compat import RealRunPaths
from .attention import sdpa_routed
from .checkpoints import saves_recorded
from .compiled import CompileWatch, DynamoCompiles, compiled_model, compiled_note
from .inductor import (CompiledRegions, InductorHooks, device_time_us, graph_breaks, hide_router,
                       inductor_on_fake_cuda, triton_missing)
from .cpu_speed import BUSY_WAIT_SHARE, CpuBench, cpu_and_wait_ns, wait_share
from .cuda_facade import TargetDevice, cuda_facade
from .cuda_only import cuda_only_fakes
from .cuda_path import CudaOpTable, cuda_kernels_kept_whole, load_op_table
from .lifetimes import StorageTracker, dtensor_propagation_untracked, storage_resizes_tracked
from .host_clock import (BASELINE_CALLS, BASELINE_LOOPS, PLAIN_CALLS, TIMING_BUDGET_S, TIMING_REPEAT_BUDGET_S,
                         TIMING_STEPS, TIMING_STEPS_MAX, GapBaselines, HostClock, median_over_steps, min_over_steps)
from .recorder import Recorder, _storage_id
from .rnn import RnnRoutes, cudnn_rnns_on_fake_cuda
from .torchscript_fusion import with_fusion
from .router import Router, origin_of_current_backward_node

NO_BACKWARD_MESSAGE = (
    "this torch is a CPU build and kernelcast could not make autograd work on fake CUDA tensors ({why}); "
    "import kernelcast before torch (or use the `kernelcast` CLI) to capture backward"
)


class _CaptureFakeMode(FakeTensorMode):
    """FakeTensorMode that never touches a real device, even where torch.cuda.is_available() says True."""

    @property
    def avoid_device_init(self) -> bool:  # type: ignore[override]
        return True

    def __deepcopy__(self, memo: dict) -> "_CaptureFakeMode":
        """One mode for the whole capture. copy.deepcopy of a fake tensor copies its __dict__, and with it its
        `fake_mode`: a deep-copied module (nn.TransformerEncoder clones its layer so; EMA copies of a model)
        would get a second FakeTensorMode whose memo still references the copies, and `.cuda()` then failed
        ("Couldn't swap ...weight": swap_tensors refuses a tensor with weak references)."""
        return self


# torch loggers that log, at ERROR with a full traceback, an exception they then raise to the caller anyway:
# fake_tensor.py logs "failed while attempting to run meta for aten.mm.default" before re-raising a shape error.
# The user's step failing is reported once, by kernelcast, as one line naming their file and line.
RERAISING_TORCH_LOGGERS = ("torch._subclasses.fake_tensor",)


@contextlib.contextmanager
def _reraised_errors_not_logged() -> Iterator[None]:
    """Mute RERAISING_TORCH_LOGGERS for the length of the capture (unless KERNELCAST_DEBUG is set)."""
    if os.environ.get(DEBUG_ENV):
        yield
        return
    loggers = [logging.getLogger(name) for name in RERAISING_TORCH_LOGGERS]
    were_disabled = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, was in zip(loggers, were_disabled):
            logger.disabled = was


def _innermost(parents: set[str]) -> str:
    return max(parents, key=lambda name: (name.count("."), len(name))) if parents else ""


@contextlib.contextmanager
def _foreach_accepts_fake_tensors() -> Iterator[None]:
    """Let optimizers and clip_grad_norm_ take their CUDA default (foreach) path with fake tensors.

    torch checks `type(p) in _foreach_supported_types`; FakeTensor is not in it, so AdamW would silently run
    its per-parameter loop. torch.distributed.tensor extends the same lists for DTensor; we do it only for
    the length of the capture.
    """
    import torch.optim.optimizer as optimizer_mod
    import torch.utils._foreach_utils as foreach_mod

    lists = [optimizer_mod._foreach_supported_types, foreach_mod._foreach_supported_types]
    added = [lst for lst in lists if FakeTensor not in lst]
    for lst in added:
        lst.append(FakeTensor)
    try:
        yield
    finally:
        for lst in added:
            lst.remove(FakeTensor)


@contextlib.contextmanager
def _swappable_fake_tensors(fake_mode: FakeTensorMode,
                            forget: Callable[[torch.Tensor], None] = lambda t: None) -> Iterator[None]:
    """Let `model.to("cuda")` / `.cuda()` / `.to(dtype)` work on modules built under FakeTensorMode.

    Module._apply always swaps FakeTensor parameters (torch.utils.swap_tensors), and swap_tensors refuses a
    tensor that has weak references. FakeTensorMode's converter memo holds one to every op output, so every
    fake parameter has one. Dropping the two memo entries first is safe: the memo is a cache. A fake tensor
    that keeps its real value (one element from `torch.tensor(2.0)`: a 0-d `nn.Parameter` scale) is also
    listed under its source storage in `constant_storage_mapping`, so that writing to that storage forgets the
    value; after the swap the parameter's data is a new tensor, so its entry goes too (KernelBench level 2
    programs 3, 50 and 68, a CLIP-style logit scale: "Couldn't swap Model.scale1"). `forget(t)` drops the
    recorder's own weak references to t (its value hints: a 0-d parameter from `torch.tensor(2.0)` has one).
    """
    original = torch.utils.swap_tensors

    def swap_tensors(t1, t2):
        converter = fake_mode.fake_tensor_converter
        memo = converter.tensor_memo
        for key, value in list(memo.items()):
            if value is t1 or value is t2:
                del memo[key]
        for refs in getattr(converter, "constant_storage_mapping", {}).values():
            refs[:] = [ref for ref in refs if ref() is not t1 and ref() is not t2]
        forget(t1)
        forget(t2)
        try:
            return original(t1, t2)
        except RuntimeError as exc:
            # swap_tensors counts the C++ references to each tensor: a reference cycle not yet collected holds
            # one more (a parametrization registered inside a `with kernelcast.capture()` block: spectral_norm's
            # power iteration left its weight at 3 references, 1 after gc.collect(): "Couldn't swap
            # ParametrizationList.original")
            if "use_count" not in str(exc):
                raise
            gc.collect()
            return original(t1, t2)

    with mock.patch.object(torch.utils, "swap_tensors", swap_tensors):
        yield


@contextlib.contextmanager
def _movable_script_modules() -> Iterator[None]:
    """Let `.to("cuda")` / `.half()` / `.to(dtype)` move a torch.jit.script'ed module built in a capture.

    Module._apply swaps a FakeTensor parameter in place (torch.utils.swap_tensors), which needs the Python
    object to be the tensor's only owner, and a script module's C++ object holds each of its parameters and
    buffers as well ("_apply(): Couldn't swap RecursiveScriptModule.weight"). A fake parameter keeps its object
    here and takes the moved tensor's data (`param.data = moved`, and the fake device with it, which set_data does
    not carry), so the C++ slot and an optimizer built before the move both see it, as on a GPU where Module._apply
    sets `.data` in place. A real one (a torch.jit.load'ed module) is replaced, as Module._apply's last branch does;
    buffers are replaced, as Module._apply always does (on a script module, the C++ slot: torch/jit/_script.py
    OrderedDictWrapper.__setitem__).
    """
    def _apply(self, fn, recurse=True):
        if recurse:
            for module in self.children():
                module._apply(fn)
        for key, param in list(self._parameters.items()):
            if param is None:
                continue
            with torch.no_grad():
                moved = fn(param)
                grad = fn(param.grad) if param.grad is not None else None
            if isinstance(param, FakeTensor) and isinstance(moved, FakeTensor):
                param.data = moved
                param.fake_device = moved.fake_device
            else:
                param = self._parameters[key] = torch.nn.Parameter(moved, requires_grad=param.requires_grad)
            if grad is not None:
                param.grad = grad
        for key, buf in list(self._buffers.items()):
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    # TorchScript's fuser compiles its fusion groups with NVRTC on a CUDA build, which has no GPU here: off for the
    # capture (the ops run one by one, as TORCHSCRIPT_NOTE says)
    fuser_was_on = torch._C._jit_texpr_fuser_enabled()
    torch._C._jit_set_texpr_fuser_enabled(False)
    try:
        with mock.patch.object(torch.jit.RecursiveScriptModule, "_apply", _apply):
            yield
    finally:
        torch._C._jit_set_texpr_fuser_enabled(fuser_was_on)


TRACE_NOTE = ("torch.jit.trace at {where}: the capture runs {what} as its eager Python (a traced graph calls the "
              "same aten ops; tracing fake tensors fails in the meta kernels' shape checks)")
# Modules torch.jit.trace returned in a capture (a shallow copy of the module traced): their calls run a traced graph
# on the GPU, whose elementwise chains TorchScript fuses as a scripted module's (the tracker tags their ops as a
# ScriptModule's).
_TRACED_MODULES: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


def _runs_torchscript(mod) -> bool:
    return isinstance(mod, torch.jit.ScriptModule) or mod in _TRACED_MODULES


@contextlib.contextmanager
def _traced_as_eager(note: Callable[[str], None], where: Callable[[], str]) -> Iterator[None]:
    """torch.jit.trace in a capture returns what it was given. The tracer turns sizes and strides into traced
    values, which FakeTensor's cache and the meta kernels' checks cannot compare ("Expected bool, got Tensor": a
    traced CNN failed every capture); the traced graph would call the same aten ops as the module's forward."""
    def trace(func, example_inputs=None, *args, **kwargs):
        what = type(func).__name__ if isinstance(func, torch.nn.Module) else getattr(func, "__name__", "the function")
        note(TRACE_NOTE.format(where=where(), what=what))
        if isinstance(func, torch.nn.Module):
            # a shallow copy shares the parameters, buffers and submodules as a traced module does, and tells the
            # traced calls from the eager module's own (which a step may still call)
            traced = copy.copy(func)
            _TRACED_MODULES.add(traced)
            return traced
        return func

    def passed_through(original: Callable, name: str) -> Callable:
        """torch.jit.freeze / optimize_for_inference of what trace returned here (not a ScriptModule): itself."""
        def call(module, *args, **kwargs):
            if isinstance(module, torch.jit.ScriptModule):
                return original(module, *args, **kwargs)
            note(f"torch.jit.{name} at {where()}: the module as it is (torch.jit.trace "
                 "returned it in the capture)")
            return module
        return call

    with mock.patch.object(torch.jit, "trace", trace), \
            mock.patch.object(torch.jit, "freeze", passed_through(torch.jit.freeze, "freeze")), \
            mock.patch.object(torch.jit, "optimize_for_inference",
                              passed_through(torch.jit.optimize_for_inference, "optimize_for_inference")):
        yield


TORCHSCRIPT_NOTE = ("TorchScript module {names} ran: recorded as the aten ops its graph calls, each chain of "
                    "elementwise ops priced as the one kernel TorchScript's fuser (NNC) makes of it after the "
                    "module's first calls (capture/torchscript_fusion.py: consecutive ops of one shape)")


class _CountingTracker(ModuleTracker):
    """ModuleTracker that counts module calls and books its hooks' time as the capture's, not the model's."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = HostClock()  # the recorder's, set by the session
        self.script_modules: set[str] = set()  # TorchScript modules called in the recorded step (TORCHSCRIPT_NOTE)
        # told +1 as a TorchScript module's call begins and -1 as it returns (the recorder tags the ops between)
        self.on_script_call: Callable[[int], None] = lambda delta: None

    # Dynamo inlines module hooks into the graph it compiles, where the clock's thread reads are skipped
    # functions (a graph break of ours, not the user's): under compilation both hooks do nothing, and the
    # compiled region's kernels are named by Inductor's graph instead.
    def _fw_pre_hook(self, mod, input) -> None:
        if torch.compiler.is_compiling():
            return
        self.clock.module_calls += 1
        self.clock.ours_begin()
        try:
            if _runs_torchscript(mod):
                self.script_modules.add(getattr(mod, "original_name", type(mod).__name__))
                self.on_script_call(1)
            if _recomputing():
                self._get_append_fn(self._get_mod_name(mod), False)()
            else:
                self._enter(mod, input)
        finally:
            self.clock.ours_end()

    def _enter(self, mod, input) -> None:
        """ModuleTracker._fw_pre_hook, but a module whose inputs include a leaf that requires grad (a gradient
        penalty's `x.requires_grad_()`) is left in backward at the first of its inputs' gradients: the hook over
        all of them asks the engine whether each input's node will run, which it refuses for a leaf inside
        torch.autograd.grad (torch/autograd/graph.py register_multi_grad_hook), and every WGAN-GP step failed."""
        name = self._get_mod_name(mod)
        self._get_append_fn(name, False)()
        tensors = [a for a in tree_flatten(input)[0] if isinstance(a, torch.Tensor) and a.requires_grad]
        if tensors:
            mode = "any" if any(t.grad_fn is None for t in tensors) else "all"
            self._hooks.append(register_multi_grad_hook(tensors, self._get_pop_fn(name, True), mode=mode))

    def _fw_post_hook(self, mod, input, output) -> None:
        if torch.compiler.is_compiling():
            return
        self.clock.ours_begin()
        try:
            if _runs_torchscript(mod):
                self.on_script_call(-1)
            if _recomputing():
                self._get_pop_fn(self._get_mod_name(mod), False)()
            else:
                super()._fw_post_hook(mod, input, output)
        finally:
            self.clock.ours_end()


def _dynamo_never_compiles(*functions) -> None:
    """Dynamo's frame callback compiles every frame entered while a torch.compile'd function runs, the eager code
    after a graph break included: there, a module the user calls fires the tracker's hooks as frames of their own,
    which Dynamo compiled in the recorded step (the tracker is entered only for it), putting this machine's
    tracing on the model's Python (KernelBench L2 #28, a graph break inside InstanceNorm: 1.42 ms predicted against
    a 0.20 ms call). A skipped code object runs as it is; where Dynamo traces a module call instead, it still
    inlines the hooks (they do nothing under compilation), so no graph break of ours appears."""
    try:
        from torch._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
    except ImportError:  # a torch without Dynamo's per-code frame strategy
        return
    for fn in functions:  # the hook's frame and every frame it calls (the tracker's, weakref's) run as they are
        set_code_exec_strategy(fn.__code__, FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))


_dynamo_never_compiles(_CountingTracker._fw_pre_hook, _CountingTracker._fw_post_hook)


def _recomputing() -> bool:
    """Whether a module's forward runs inside a backward: activation checkpointing recomputing it
    (torch.utils.checkpoint). ModuleTracker's backward hooks on its tensors would hold the recomputed graph's
    nodes (register_multi_grad_hook keeps every grad_fn in its closure, a cycle through the node's own hook
    dict), and that graph never runs backward, so its saved activations would stay alive to the end of the
    capture, where the GPU frees each as soon as backward has used it. The module is entered and left only."""
    return torch._C._current_graph_task_id() != -1


BUSY_NOTE = ("the capture machine was busy (the capturing thread waited {share:.0%} of its CPU time for a core): "
             "the model Python it timed may read high; its range allows for it. Capture on an idle machine for a "
             "tighter figure")


class _Probe(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def _another_timing_step(runs: int, steps: int, spent_ns: int, first_ns: int) -> bool:
    """Whether record_timed runs the step once more: up to `steps` while the repeats' process CPU time (every
    thread's, the autograd engine's included) stays within
    TIMING_REPEAT_BUDGET_S (a Llama-7B training step takes seconds to capture: read once, it captures in a third
    of the time, and a step that long is GPU-bound where its Python hardly moves the answer), then up to
    TIMING_STEPS_MAX while they stay within TIMING_BUDGET_S (cheap steps, read more often)."""
    if steps <= 1 or runs >= TIMING_STEPS_MAX:
        return False
    next_ns = spent_ns / (runs - 1) if runs > 1 else first_ns  # the next repeat, as the last ones took
    after_ns = spent_ns + next_ns
    return ((runs < steps and after_ns <= TIMING_REPEAT_BUDGET_S * 1e9)
            or after_ns <= TIMING_BUDGET_S * 1e9)


class CaptureSession:
    """Runs user code under fake CUDA; records ops while `recording` is on."""

    def __init__(self, target: TargetDevice, arch: str, compile_mode: str | None = None, gpu_id: str = "") -> None:
        self.target = target
        self.arch = arch
        self.gpu_id = gpu_id  # the target's id in devices/gpus.toml (Inductor's padding choice is timed for it)
        self.compile_mode = compile_mode  # `--compile MODE`: the step is wrapped in torch.compile (capture/api.py)
        self.inductor: CompiledRegions | None = None  # what Inductor compiled, when it runs here
        self.inductor_missing: str | None = None  # why Inductor cannot run here (no triton)
        self._stack = contextlib.ExitStack()
        self._in_optimizer = 0
        self.tracker: ModuleTracker | None = None
        self.recorder: Recorder | None = None
        self.router: Router | None = None
        self.fake_mode: FakeTensorMode | None = None
        self.real_run_paths = RealRunPaths()  # libraries patched to take their real-GPU path (capture/compat.py)
        self.gap_baselines = GapBaselines()  # set by measure_gap_baselines
        self.lines_counted = False  # whether the model's Python lines were counted (the first recorded step)
        self.lines_done = False  # and that step has ended
        self.cpu_bench = CpuBench()  # this machine's speed, measured before the session (capture/api.py)
        # The model's Python per recorded op: the median of its readings over the timed steps (record_timed;
        # OpRecord.python_us holds the fastest), and how many steps were read.
        self.python_medians: list[float] | None = None
        self.python_steps = 1
        self.wait_share = 0.0  # how long the thread waited for a core per unit of CPU time, over the timed steps
        self.compile_watch = CompileWatch(self._before_compiled_call)
        # Dynamo's compilations, left out of the model's Python (the recorder's clock is read when it exists)
        self.dynamo_compiles = DynamoCompiles(lambda: self.recorder and self.recorder.clock.ours_begin(),
                                              lambda: self.recorder and self.recorder.clock.ours_end())
        self.recorded_dynamo_compiles = 0  # in the first recorded step (record_timed)
        self.warmup_recompiling_steps = 0  # warm-up steps in which Dynamo traced again and Inductor compiled nothing
        self.op_table: CudaOpTable | None = None  # the CUDA build's dispatch choices (capture/cuda_path.py)
        self.compiled_found: list[str] = []  # torch.compile'd callables found in the step (capture/api.py)
        self.storages: StorageTracker | None = None  # CUDA storages made and freed (capture/lifetimes.py)

    # -- context ---------------------------------------------------------------------------------------
    def __enter__(self) -> "CaptureSession":
        state = _fake_cuda.state()
        backward_error = None
        if state.needed and not state.before_torch:
            backward_error = NO_BACKWARD_MESSAGE.format(why=state.detail or "shim not loaded")
        stack = self._stack
        try:
            stack.enter_context(_reraised_errors_not_logged())
            stack.enter_context(cuda_facade(self.target, on_sync=self._host_sync, streams=self))
            stack.enter_context(self.compile_watch.watching())
            self.tracker = _CountingTracker()  # entered only while recording: its hooks cost time
            stack.callback(self._stop_tracking)
            stack.callback(register_optimizer_step_pre_hook(self._optimizer_enter).remove)
            stack.callback(register_optimizer_step_post_hook(self._optimizer_exit).remove)
            stack.enter_context(_foreach_accepts_fake_tensors())
            self.real_run_paths = stack.enter_context(RealRunPaths())
            self.op_table = load_op_table()
            stack.enter_context(cuda_kernels_kept_whole(self.op_table))
            stack.enter_context(cudnn_rnns_on_fake_cuda())
            stack.enter_context(cuda_only_fakes(self.op_table))
            stack.enter_context(sdpa_routed(self.arch))
            self.fake_mode = _CaptureFakeMode(allow_non_fake_inputs=True)
            stack.enter_context(_movable_script_modules())
            stack.enter_context(_traced_as_eager(lambda text: self.recorder.notes.add(text),
                                                 lambda: self.recorder.note_line()))
            stack.enter_context(_swappable_fake_tensors(
                self.fake_mode, lambda t: self.recorder.forget_weak_refs(t) if self.recorder else None))
            stack.enter_context(self.fake_mode)
            self.recorder = stack.enter_context(
                Recorder(self._phase, self._module, origin_of_current_backward_node, self.op_table,
                         self.target.capability))
            recorder = self.recorder
            self.storages = recorder.storages = StorageTracker(lambda: len(recorder.ops),
                                                               lambda: recorder.current_stream, self.fake_mode)
            stack.enter_context(storage_resizes_tracked(self.storages))
            stack.enter_context(dtensor_propagation_untracked(self.storages))
            self.router = stack.enter_context(
                Router(self.arch, self._module, self._host_sync, backward_error))
            self.tracker.clock = self.router.clock = self.recorder.clock
            self.tracker.on_script_call = self.recorder.script_call
            self.recorder.clock.stop()  # until the recorded step: set-up and warm-up readings are not kept
            self.router.hints, self.router.copy_to_host = self.recorder.hints, self.recorder.copy_to_host
            rnn_routes = RnnRoutes(self.arch, self.recorder.hints, self.recorder.dynamic.batch_sizes)
            self.router.add_routes(rnn_routes.routes())
            self.router.add_routes(real_backward.routes(self.recorder.hints, self.recorder.note_line))
            stack.callback(real_backward.reset)
            self.router.on_backward = self.recorder.record_engine_nodes
            self.router.node_post_hook = self.recorder.in_place.outputs_ready
            stack.enter_context(saves_recorded(self.recorder.copy_to_host, self.recorder.notes.add,
                                               self.recorder.note_line, self.recorder.record_serialization))
            stack.enter_context(mock.patch.multiple(FakeTensor, **self.router.host_read_patches(),
                                                    record_stream=lambda t, stream: self._record_stream(t, stream)))
            stack.enter_context(mock.patch.object(torch.overrides, "has_torch_function",
                                                  self.router.has_torch_function_probe(
                                                      torch.overrides.has_torch_function)))
            self.inductor_missing = triton_missing()
        except BaseException:
            stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.end_line_count()  # a step that raised mid-count leaves no tracer behind (fit, advise, notebooks)
        self._stack.close()

    @property
    def recording(self) -> bool:
        return bool(self.recorder and self.recorder.recording)

    @recording.setter
    def recording(self, on: bool) -> None:
        """Recording adds module tracking and forward-line tags for backward ops; unrecorded steps skip them."""
        assert self.recorder is not None and self.router is not None
        if on and not self.recorder.recording:
            self.tracker.__enter__()
            self.recorder.clock.restart()
            # the model's Python lines, while recording, until the first recorded step ends (record_timed, or a
            # `with kernelcast.capture()` block's end)
            if not self.lines_done:
                self.recorder.clock.count_lines(True)
                self.lines_counted = True
        elif not on and self.recorder.recording:
            self.recorder.clock.count_lines(False)
            self._stop_tracking()
            self.recorder.clock.stop()
        self.recorder.recording = on
        self.router.tag_origins = on
        self.compile_watch.recording = on

    def end_line_count(self) -> None:
        """No more of the model's Python lines are counted in this session (the counted step has ended, or a
        compiled step counts none)."""
        if self.recorder is not None:
            self.recorder.clock.count_lines(False)
        self.lines_done = True

    def tracked_warmup(self, run: Callable[[], object]) -> None:
        """One more unrecorded step, with the module tracker's hooks in place as the recorded step will have them
        (its clock stopped: nothing of it is kept)."""
        if self.tracker is None:
            run()
            return
        self.tracker.__enter__()
        try:
            run()
        finally:
            self._stop_tracking()

    def _stop_tracking(self) -> None:
        if self.tracker is not None and getattr(self.tracker, "_fw_pre_handle", None) is not None:
            self.tracker.__exit__(None, None, None)
            self.tracker._fw_pre_handle = None

    def _before_compiled_call(self, wrapper_frame) -> None:
        """A call of torch.compile'd code: Inductor on fake CUDA from the first one on (capture/inductor.py),
        and the Router off the torch-function stack for the call."""
        if self.inductor_missing is not None or self.recorder is None:
            return
        self.recorder.record_compiled_call()
        hide_router(self.router, wrapper_frame)
        if self.inductor is None:  # set up outside the capture's modes: Inductor's imports make real tensors
            from torch.utils._python_dispatch import _disable_current_modes

            with _disable_current_modes():
                hooks = InductorHooks(self.recorder.record_triton_launch, self.recorder.replay_graph,
                                      self.recorder.run_compiled, device_time_us(self.gpu_id or DEFAULT_GPU),
                                      self.recorder.clock.ours)
                self.inductor = self._stack.enter_context(inductor_on_fake_cuda(hooks))
            # after inductor_on_fake_cuda: its torch._dynamo.reset() clears Dynamo's compile callbacks
            self._stack.enter_context(self.dynamo_compiles.watching())
            self.recorder.compiles = True

    # -- hooks -----------------------------------------------------------------------------------------
    def _optimizer_enter(self, optimizer, args, kwargs) -> None:
        self._in_optimizer += 1
        if self.storages is not None:
            self.storages.label_optimizer(optimizer)

    def _optimizer_exit(self, optimizer, args, kwargs) -> None:
        self._in_optimizer -= 1

    def _phase(self) -> str:
        if torch._C._current_graph_task_id() != -1:
            return "backward"
        return "optimizer" if self._in_optimizer else "forward"

    def _module(self) -> str:
        if self._in_optimizer:
            return "optimizer"
        return _innermost(self.tracker.parents - {"Global"}) if self.tracker else ""

    # -- streams (cuda_facade.StreamLog) -------------------------------------------------------------------
    @property
    def current_stream(self) -> int:
        return self.recorder.current_stream if self.recorder is not None else 0

    @current_stream.setter
    def current_stream(self, stream: int) -> None:
        if self.recorder is not None:
            self.recorder.current_stream = stream

    def record_event(self, event: int, stream: int) -> None:
        if self.recorder is not None:
            self.recorder.record_stream_marker(RECORD_EVENT_OP, stream, event)

    def wait_event(self, stream: int, event: int) -> None:
        if self.recorder is not None:
            self.recorder.record_stream_marker(WAIT_EVENT_OP, stream, event)

    def synchronize(self, kind: str) -> None:
        self._host_sync(kind)

    def begin_graph(self) -> object:
        return self.recorder.begin_user_graph() if self.recorder is not None else None

    def end_graph(self, begun: object) -> tuple:
        return self.recorder.end_user_graph(begun) if self.recorder is not None else ()

    def replay_graph(self, body: tuple) -> None:
        if self.recorder is not None:
            self.recorder.replay_user_graph(body)

    def _record_stream(self, tensor, stream) -> None:
        """tensor.record_stream(stream) on a fake tensor: a marker the hazard analysis reads (RECORD_STREAM_OP)."""
        if self.recorder is not None and self.recorder.recording:
            self.recorder.record_stream_use(_storage_id(tensor), int(getattr(stream, "stream_id", 0)))

    def _host_sync(self, kind: str) -> None:
        if self.recorder is not None and self.recorder.recording:
            self.recorder.record_host_sync(kind)

    # -- the model's Python -----------------------------------------------------------------------------
    def record_timed(self, run_step, steps: int = TIMING_STEPS, storages: StorageTracker | None = None,
                     args: tuple = (), reading: str = "fastest") -> None:
        """Record one step, then run it steps - 1 more times with the clock on (more, up to TIMING_STEPS_MAX,
        while the repeats stay within TIMING_BUDGET_S of CPU time) and keep, per op, the fastest model-Python
        reading (host_clock.py says why), or with reading="median" the median of its readings (a compiled step:
        capture/api.py). The first step's ops are the capture; a repeat whose ops differ from them (a step that
        changes what it runs from call to call) is left out. What a repeat adds to per-call state (the CUDA graph
        trees' refusals a replay reports) is taken back, as are its ops and compiled calls.
        `storages` (when given) logs the first step's allocations only: the memory of the step is the capture's."""
        keep = {"fastest": min_over_steps, "median": median_over_steps}[reading]
        assert self.recorder is not None and self.recording
        recorder = self.recorder
        schedstat = cpu_and_wait_ns()
        if storages is not None:
            storages.start_step(args)  # labels what is alive: torch calls and CPU time that are not the model's
        recorder.clock.restart()
        # The repeat budget counts the process's CPU time: a backward runs on autograd's device thread, which
        # this thread's clock does not see (a Llama-7B step read 1.2 s here against 2.6 s of process CPU).
        first_started = time.process_time_ns()
        compiles_before = self.dynamo_compiles.count
        # The first step's lines are counted by a tracer, which slows its reading: the fastest of several (an
        # eager step) leaves it out by itself; a median (a compiled step) is taken over the repeats alone.
        traced_first = reading == "median" and recorder.clock.counting
        run_step()  # its result is dropped here, as a training loop drops it
        self.end_line_count()  # one step's lines: the repeats are timed only
        recorder.record_step_end()
        self.recorded_dynamo_compiles = self.dynamo_compiles.count - compiles_before
        first_ns = time.process_time_ns() - first_started
        if storages is not None:
            storages.end_step(args)
        ops, calls = recorder.ops, recorder.torch_calls
        compiled_calls = self.compile_watch.compiled_calls
        skips = len(self.inductor.cudagraph_skips) if self.inductor is not None else 0
        readings = [[op.python_us for op in ops]]
        signature = [(op.op, op.modules, n) for op, n in zip(ops, calls)]
        try:
            spent_ns, runs = 0, 1
            while _another_timing_step(runs, steps, spent_ns, first_ns) or (traced_first and runs == 1 < steps):
                recorder.ops, recorder.torch_calls = [], []
                recorder.clock.restart()
                started = time.process_time_ns()
                run_step()
                recorder.record_step_end()
                spent_ns += time.process_time_ns() - started
                runs += 1
                if [(op.op, op.modules, n) for op, n in zip(recorder.ops, recorder.torch_calls)] == signature:
                    readings.append([op.python_us for op in recorder.ops])
        finally:
            if traced_first and len(readings) > 1:
                readings = readings[1:]
            recorder.ops = [dataclasses.replace(op, python_us=kept) for op, kept in zip(ops, keep(readings))]
            recorder.torch_calls = calls
            self.compile_watch.compiled_calls = compiled_calls
            if self.inductor is not None:
                del self.inductor.cudagraph_skips[skips:]
        self.python_medians = median_over_steps(readings)
        self.python_steps = len(readings)
        self.wait_share = round(wait_share(schedstat, cpu_and_wait_ns()), 3)

    def measure_gap_baselines(self) -> None:
        """Time loops of bare calls under this session, as the recorded step ran: a torch call (`x + 1`) and
        a module call doing one (`probe(x)`), and torch calls that record no op (`p.grad`). Their time outside
        our own work is the capture's share per call (host_clock.GapBaselines). Read as the step's ops are read: per call, the fastest of as many loops as
        the step had timed steps, so the share taken out and the time it is taken from carry the same bias
        (on a loaded machine, the cache misses after each switch to another process). Nothing from the loops
        is kept."""
        assert self.recorder is not None and self.recording
        recorder = self.recorder
        self.end_line_count()  # a block's step ends here (record_timed's, with its first step)
        kept_ops, kept_calls = recorder.ops, recorder.torch_calls
        recorder.ops, recorder.torch_calls = [], []
        x, probe = torch.ones(16, device="cuda"), _Probe()

        def per_call(call) -> float:
            loops = []
            for _ in range(BASELINE_LOOPS):
                recorder.ops, recorder.torch_calls = [], []
                recorder.clock.restart()
                for _ in range(BASELINE_CALLS):
                    call()
                loops.append([op.python_us for op in recorder.ops][1:])  # the first one holds the loop's set-up
            return statistics.fmean(min_over_steps(loops))

        parameter = torch.nn.Parameter(torch.ones(16, device="cuda"))
        parameter.grad = torch.ones(16, device="cuda")

        def plain_calls_then_op() -> None:  # PLAIN_CALLS property reads (no op), then an op
            for _ in range(PLAIN_CALLS):
                parameter.grad  # noqa: B018
            x + 1

        try:
            with torch.no_grad():
                one_call = per_call(lambda: x + 1)
                one_module = max(per_call(lambda: probe(x)) - one_call, 0.0)
                one_plain = max(per_call(plain_calls_then_op) - one_call, 0.0) / PLAIN_CALLS
        finally:
            recorder.ops, recorder.torch_calls = kept_ops, kept_calls
        self.gap_baselines = GapBaselines(one_call, one_module, one_plain)

    def _model_us(self, op: OpRecord, raw_us: float, torch_calls: int) -> float:
        """The model's Python of one reading, with the capture's shares taken out. Backward runs in torch's C++
        engine: the capture's time there is its own, so backward ops get none."""
        return 0.0 if op.phase == "backward" else round(self.gap_baselines.model_us(raw_us, torch_calls,
                                                                                    op.modules), 3)

    def _with_model_python(self, ops: tuple[OpRecord, ...]) -> tuple[OpRecord, ...]:
        assert self.recorder is not None
        calls = self.recorder.torch_calls  # one entry per record, appended with it
        return tuple(dataclasses.replace(op, python_us=self._model_us(op, op.python_us, n))
                     for op, n in zip(ops, calls, strict=True))

    def _median_model_python_us(self, ops: tuple[OpRecord, ...]) -> float:
        """The step's model Python summed over per-op medians of the timed steps (the fastest: OpRecord)."""
        assert self.recorder is not None
        if self.python_medians is None or len(self.python_medians) != len(ops):
            return sum(op.python_us for op in ops)
        return sum(self._model_us(op, raw, n) for op, raw, n in
                   zip(ops, self.python_medians, self.recorder.torch_calls, strict=True))

    # -- result ----------------------------------------------------------------------------------------
    def result(self, workload: str = "") -> Capture:
        assert self.recorder is not None
        settings = CaptureSettings(
            matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32,
            cudnn_allow_tf32=torch.backends.cudnn.allow_tf32,
            matmul_allow_bf16_reduced=torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            arch=self.arch,
            torch_version=torch.__version__,
            python_bench_us=self.cpu_bench.python_us,
            dispatch_bench_us=self.cpu_bench.dispatch_us,
            module_bench_us=self.cpu_bench.module_us,
            cpu=self.cpu_bench.cpu,
        )
        ops: tuple[OpRecord, ...] = with_fusion(self._with_model_python(tuple(self.recorder.ops)))
        settings = dataclasses.replace(settings, python_timing_steps=self.python_steps,
                                       python_median_us=round(self._median_model_python_us(ops), 1),
                                       capture_wait_share=self.wait_share,
                                       python_lines_counted=self.lines_counted)
        notes = set(self.recorder.notes) | self.router.notes
        notes.update(f"--assume {where}: no host read of the GPU at that line (check the path and line in the "
                     "notes)" for where in self.recorder.host_reads.unused())
        if self.wait_share > BUSY_WAIT_SHARE:
            notes.add(BUSY_NOTE.format(share=self.wait_share))
        if self.op_table is not None and self.op_table.note:
            notes.add(self.op_table.note)
        if self.tracker is not None and self.tracker.script_modules:
            notes.add(TORCHSCRIPT_NOTE.format(names=", ".join(sorted(self.tracker.script_modules))))
        compiled = compiled_note(self.compiled_found, self.compile_watch.compiled_calls, self.inductor,
                                 self.inductor_missing, ops, graph_breaks() if self.inductor is not None else (),
                                 self.recorded_dynamo_compiles, self.warmup_recompiling_steps)
        notes.update(compiled)
        compiled_as = compiled_model(self.compiled_found, self.compile_watch.compiled_calls, ops)
        memory = None
        if self.storages is not None:
            self.storages.end_step()
            memory = self.storages.result()
        return Capture(ops=ops, settings=settings, workload=workload, notes=tuple(sorted(notes)),
                       compiled=bool(compiled_as), compiled_as=compiled_as, memory=memory,
                       build_ops=tuple(self.recorder.build_ops))
