"""torch.compile'd code in a capture runs as Inductor compiles it for the target GPU, on fake CUDA tensors.

PyTorch's own passes do the work (docs/compile.md): TorchDynamo captures the graphs (graph breaks and all),
AOTAutograd makes the forward and backward graphs, and Inductor lowers them, fuses them in its scheduler and
writes the Python wrapper that launches the kernels. What kernelcast changes is only what needs a GPU:

- Inductor's generated Triton kernels are not compiled; `AsyncCompile.triton` gets a `TritonKernelStub` that
  reads the kernel's class (pointwise / reduction / persistent_reduction / template / ...) and Inductor's own
  bytes and FLOPs estimates from its source, and records one op per launch ("triton.<class>.<kernel name>");
- Triton's CUDA driver (which loads libcuda) is replaced by one that answers the target's arch;
- the device queries Inductor makes through torch._dynamo.device_interface, and the helpers the generated
  wrapper calls in C++ (`_empty_strided_cuda`, `_reinterpret_tensor`, `copy_if_misaligned`, the raw stream),
  answer for fake tensors;
- Inductor's own fake-tensor modes never touch a device (FakeTensorMode.avoid_device_init);
- CUDA graphs (mode="reduce-overhead") go through Inductor's `cudagraph_policy` hook: Inductor decides whether
  a graph can be graphed (its own `cudagraph_fail_reasons`: CPU tensors, mutated inputs, dynamic shapes, ...),
  and a graphed call is recorded as CUDA graph trees replay it: the copies of the non-static inputs into the
  graph's static buffers, one graph launch, the graph's kernels with no host work of their own.

The generated wrapper then runs in the capture like any code: its extern kernels (cuBLAS mm, convolution,
attention, ...) are aten ops the recorder records with the shapes Inductor gave them (padded ones included),
its Python between launches is timed as the model's Python is. Dynamo compiles with the capture's dispatch
modes popped (the recorder declares `ignore_compile_internals`), so the compile records nothing; the Router
(a TorchFunctionMode, which Dynamo would trace into) is taken off the stack for each call of compiled code.
All of it is set up at the first call of compiled code in a capture (a step without any pays nothing).

Checked with torch 2.13.0 and triton 3.9.0 (CHECKED_VERSIONS); another version is tried and, where a hook has
moved, the capture fails with one line naming the versions.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from unittest import mock

import torch

from kernelcast.errors import CaptureError

CHECKED_VERSIONS = {"torch": "2.13", "triton": "3.9"}
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
# Kernel classes Inductor's Triton heuristics decorate kernels with (torch/_inductor/runtime/triton_heuristics.py).
KERNEL_CLASSES = ("pointwise", "reduction", "persistent_reduction", "cooperative_reduction", "split_scan",
                  "template", "foreach", "user_autotune", "fixed_config")
TRITON_OP_PREFIX = "triton."
CUDAGRAPH_REPLAY_OP = "host.cudagraph_replay"
COMPILED_CALL_OP = "host.compiled_call"  # a call of compiled code begins (the caller's Python is before it)
COMPILED_GRAPH_OP = "host.compiled_graph"  # Inductor's wrapper for one graph begins (guards, AOT wrapper before)
COMPILED_GRAPH_END_OP = "host.compiled_graph_end"  # and returns (the Python before it is the wrapper's tail)
COMPILED_TAG = "compiled"  # an op run by Inductor's generated wrapper
GRAPHED_TAG = "graphed"  # an op replayed inside a CUDA graph (no host work of its own)
USER_GRAPH_REPLAY_OP = "host.user_graph_replay"  # a user's torch.cuda.CUDAGraph.replay(): one graph launch
_DECORATOR = re.compile(r"@triton_heuristics\.(\w+)\(")
_SIGNATURE_POINTER = ("in_ptr", "out_ptr", "in_out_ptr")
# Inductor's Triton codegen stores with mode "atomic_add" as one such call per store (codegen/triton.py, store)
_ATOMIC_ADD = "tl.atomic_add("
# The launch-size arguments of a Triton kernel that multiply to the elements one store statement writes.
_ITERATION_NUMELS = ("xnumel", "ynumel", "znumel")


def triton_missing() -> str | None:
    """Why Inductor cannot compile for CUDA here (None when it can): its CUDA backend needs the triton
    package importable, even to write kernels (torch/_inductor/scheduler.py, create_backend: TritonMissing).
    Looked up without importing it (a capture that compiles nothing does not pay for triton's import)."""
    if importlib.util.find_spec("triton") is None:
        return "the triton package is not installed; `pip install triton` lets kernelcast run Inductor"
    return None


def _version_line() -> str:
    import triton

    return (f"torch {torch.__version__}, triton {triton.__version__} (checked: torch "
            f"{CHECKED_VERSIONS['torch']}, triton {CHECKED_VERSIONS['triton']})")


# -- the Triton kernels ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TritonKernelMeta:
    """What Inductor wrote about one generated kernel (its decorator's arguments)."""

    name: str
    kind: str  # the heuristics decorator: pointwise, reduction, persistent_reduction, template, ...
    arg_names: tuple[str, ...]  # non-constexpr arguments, in launch order
    num_bytes: float | None  # Inductor's estimate of the bytes it moves (inductor_meta["kernel_num_gb"])
    flops: float | None  # Inductor's estimate of its FLOPs (inductor_meta["kernel_flop"]), where it has one
    mutated: tuple[str, ...] = ()
    atomic_adds: int = 0  # `tl.atomic_add` statements in its body (index_put/index_add with accumulate, scatter_add)

    @staticmethod
    def from_source(name: str, source: str) -> "TritonKernelMeta":
        found = _DECORATOR.search(source)
        if found is None:
            raise CaptureError(f"Inductor's kernel {name} has no triton_heuristics decorator ({_version_line()})")
        kind = found.group(1)
        call = _decorator_call(source, found.end() - 1)
        kwargs = _eval_decorator(call)
        triton_meta = kwargs.get("triton_meta") or {}
        inductor_meta = kwargs.get("inductor_meta") or {}
        signature = triton_meta.get("signature", {})
        args = tuple(n for n, t in signature.items() if t != "constexpr")
        gb = inductor_meta.get("kernel_num_gb")
        return TritonKernelMeta(name=name, kind=kind, arg_names=args,
                                num_bytes=None if gb is None else float(gb) * 1e9,
                                flops=inductor_meta.get("kernel_flop"),
                                mutated=tuple(inductor_meta.get("mutated_arg_names", ())),
                                atomic_adds=source.count(_ATOMIC_ADD))


def _decorator_call(source: str, open_paren: int) -> str:
    """The text of the decorator's argument list, parentheses included (balanced, outside string literals)."""
    depth, quote, i = 0, "", open_paren
    while i < len(source):
        c = source[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return source[open_paren:i + 1]
        i += 1
    raise CaptureError(f"an Inductor kernel's decorator did not parse ({_version_line()})")


def _eval_decorator(call: str) -> dict:
    """The decorator's keyword arguments, evaluated with the names Inductor's kernel source imports."""
    from torch._inductor.runtime.hints import AutotuneHint, DeviceProperties, ReductionHint, TileHint

    names = {"DeviceProperties": DeviceProperties, "ReductionHint": ReductionHint, "TileHint": TileHint,
             "AutotuneHint": AutotuneHint, "__file__": "", "_kwargs": lambda *a, **kw: kw, "torch": torch}
    return eval("_kwargs" + call, {"__builtins__": {"set": set, "frozenset": frozenset}}, names)  # noqa: S307


class TritonKernelStub:
    """Stands in for a compiled Triton kernel: `run` records the launch instead of running it."""

    def __init__(self, meta: TritonKernelMeta, on_launch: Callable[[TritonKernelMeta, tuple], None]) -> None:
        self.meta = meta
        self._on_launch = on_launch
        self.fn = self  # CachingAutotuner attributes the wrapper may read
        self.configs: list = []

    def run(self, *args: Any, **kwargs: Any) -> None:
        self._on_launch(self.meta, args)

    def __call__(self, *args: Any, **kwargs: Any) -> None:  # some wrappers call the kernel object itself
        self._on_launch(self.meta, args)

    def precompile(self, *args: Any, **kwargs: Any) -> None:
        return None

    def set_compile_info(self, *args: Any, **kwargs: Any) -> None:
        return None


def launch_record(meta: TritonKernelMeta, args: tuple) -> tuple[dict, tuple[torch.Tensor, ...]]:
    """(op args, tensors written) for one launch: the pointer arguments by name, the sizes it iterates over
    (xnumel, r0_numel, ...), Inductor's bytes and FLOPs, and the elements it adds atomically (each atomic_add
    statement runs once per element of the iteration space: `atomic_elements`)."""
    named = dict(zip(meta.arg_names, args))
    reads: list[torch.Tensor] = []
    writes: list[torch.Tensor] = []
    numels: dict[str, int] = {}
    for name, value in named.items():
        if isinstance(value, torch.Tensor):
            if name.startswith("out_ptr") or name.startswith("in_out_ptr") or name in meta.mutated:
                writes.append(value)
            if not name.startswith("out_ptr"):
                reads.append(value)
        elif name.endswith("numel") and isinstance(value, int):
            numels[name] = value
    record = {"kernel": meta.name, "reads": tuple(reads), **numels}
    if meta.num_bytes is not None:
        record["inductor_bytes"] = meta.num_bytes
    if meta.flops is not None:
        record["inductor_flops"] = float(meta.flops)
    if meta.atomic_adds:
        elements = 1
        for name in _ITERATION_NUMELS:
            elements *= numels.get(name, 1)
        record["atomic_elements"] = meta.atomic_adds * elements
    return record, tuple(writes)


# -- CUDA graphs -------------------------------------------------------------------------------------------
@dataclass
class GraphedCall:
    """One graph Inductor decided to run under CUDA graphs (its cudagraph_policy was asked to graph it)."""

    static_inputs: frozenset[int]
    is_backward: bool
    mutated_inputs: frozenset[int] = frozenset()
    placeholders: Any = None
    refused: Callable[[str], None] = lambda reason: None

    def mutation_refused(self, managed: Callable[[int], bool]) -> str | None:
        """Why CUDA graph trees run this call without a graph: it mutates an input that is neither static nor
        an earlier graph's output (cudagraph_utils.check_for_mutation, checked by the trees at run time);
        the reason in Inductor's words (get_mutation_stack_trace). `managed(i)`: input i came from a graph."""
        from torch._inductor.cudagraph_utils import get_mutation_stack_trace

        mutated = [i for i in sorted(self.mutated_inputs) if i not in self.static_inputs and not managed(i)]
        if not mutated:
            return None
        return get_mutation_stack_trace(self.placeholders, mutated) if self.placeholders else "mutated inputs"


@dataclass
class CompiledRegions:
    """What the Inductor machinery saw during a capture: kernels written, graphs graphed or refused, time."""

    kernels: dict[str, TritonKernelMeta] = field(default_factory=dict)
    graphed: list[GraphedCall] = field(default_factory=list)
    cudagraph_skips: list[str] = field(default_factory=list)
    compile_s: float = 0.0  # wall time Dynamo + AOTAutograd + Inductor took on this machine (kernels not compiled)
    graphs: int = 0  # Inductor graphs compiled (forward and backward count apart)
    max_autotune: bool = False  # a graph was compiled with max_autotune on
    warm_graphs: int = 0  # graphs compiled before the recorded step (more after it: it recompiled)


def _cudagraph_policy(regions: CompiledRegions, replay: Callable[[Callable, list, GraphedCall], Any]) -> Any:
    """Inductor's `config.cudagraph_policy` (torch/_inductor/cudagraph_utils.py, CUDAGraphPolicy): asked to wrap
    each graph Inductor decided to graph; it keeps Inductor's other methods (should_wrap, wrap_output)."""
    from torch._inductor.cudagraph_utils import CUDAGraphPolicy

    class Policy(_CudagraphPolicy, CUDAGraphPolicy):
        pass

    return Policy(regions, replay)


@dataclass(frozen=True)
class GraphBreak:
    """Where Dynamo split the compiled code, and why (what torch._dynamo.explain reports as break_reasons)."""

    reason: str
    source: str  # "file.py:123 in func": the innermost frame of the user's code


MAX_REASON_CHARS = 160


COMPILE_TIME_KEY = "_compile.compile_inner"  # Dynamo's timer around one frame's whole compile (convert_frame.py)


def compile_seconds() -> float:
    """Wall time Dynamo, AOTAutograd and Inductor spent compiling since Dynamo's last reset, on this machine
    (torch._dynamo.utils.compilation_time_metrics; the Triton compiler did not run)."""
    from torch._dynamo.utils import compilation_time_metrics

    return float(sum(compilation_time_metrics.get(COMPILE_TIME_KEY, ())))


def graph_breaks() -> list[GraphBreak]:
    """The graph breaks Dynamo recorded since its last reset (torch/_dynamo/output_graph.py keeps every
    GraphCompileReason with graph_break=True in `graph_break_reasons`; explain() reads the same list)."""
    from torch._dynamo import output_graph

    from .source import display_path

    out = []
    for reason in getattr(output_graph, "graph_break_reasons", ()):
        frame = reason.user_stack[-1] if reason.user_stack else None
        where = f"{display_path(frame.filename)}:{frame.lineno} in {frame.name}" if frame is not None else ""
        text = " ".join(str(reason.reason).split())[:MAX_REASON_CHARS]
        out.append(GraphBreak(text, where))
    return list(dict.fromkeys(out))


class _CudagraphPolicy:
    """What the policy does for a graph: record it as graphed, and replay it through the recorder."""

    def __init__(self, regions: CompiledRegions, replay: Callable[[Callable, list, GraphedCall], Any]) -> None:
        self._regions = regions
        self._replay = replay

    def __deepcopy__(self, memo: dict) -> "_CudagraphPolicy":  # Inductor copies its config dict; one policy
        return self

    def cudagraphify(self, model: Callable, inputs: list, static_input_idxs=(), **kwargs: Any) -> Callable:
        call = GraphedCall(frozenset(static_input_idxs), bool(kwargs.get("is_backward")),
                           frozenset(kwargs.get("mutated_input_idxs") or ()), kwargs.get("placeholders"),
                           self._regions.cudagraph_skips.append)
        self._regions.graphed.append(call)

        def run(new_inputs: list) -> Any:
            return self._replay(model, new_inputs, call)

        return run


NO_CONSTANTS = -1  # proxy_tensor.CONSTANT_NUMEL_LIMIT below any tensor's numel (0-element ones included)


# -- shape padding -----------------------------------------------------------------------------------------
# Inductor pads a matmul's unaligned dimensions when a benchmark on the device says the padded GEMM (with its
# padding copies) beats the original by this factor (fx_passes/pad_mm.py, is_padded_faster).
PAD_MM_SPEEDUP = 1.1


def _contiguous_meta(shape: tuple[int, ...], dtype: str):
    from kernelcast.records import TensorMeta

    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return TensorMeta(tuple(shape), dtype, tuple(reversed(strides)))


def _matmul_ops(batch: tuple[int, ...], m: int, k: int, n: int, dtype: str, pads: tuple[tuple, ...] = ()):
    """The ops of one (b)mm and of the padding copies before it, as records kernelcast can time."""
    from kernelcast.records import OpRecord

    op = "aten.bmm.default" if batch else "aten.mm.default"
    a, b = _contiguous_meta((*batch, m, k), dtype), _contiguous_meta((*batch, k, n), dtype)
    ops = [OpRecord(0, op, {"self": a, "mat2": b}, (_contiguous_meta((*batch, m, n), dtype),))]
    for source, padded in pads:
        ops.append(OpRecord(0, "aten.constant_pad_nd.default", {"self": _contiguous_meta(source, dtype)},
                            (_contiguous_meta(padded, dtype),)))
    return ops


def should_pad_by_model(time_us: Callable[[list], float]) -> Callable:
    """Inductor's `_should_pad` (fx_passes/pad_mm.py) with kernelcast's predicted times for the target GPU in
    place of its benchmark on the device: the same sizes, alignment, compute-bound test and 1.1x margin; the
    padding copies of operands Inductor would pad at run time (not those padded once, as parameters are)."""
    from torch._inductor.fx_passes import joint_graph, pad_mm
    from torch.fx.experimental import proxy_tensor

    aten = torch.ops.aten

    def should_pad(match, mat1, mat2, op, input=None) -> bool:
        if op is aten.mm or op is aten.addmm:
            batch, (m, k), n = (), mat1.shape, mat2.shape[1]
        elif op is aten.bmm:
            batch, (m, k), n = (mat1.shape[0],), mat1.shape[1:], mat2.shape[2]
        else:
            return False
        if torch._inductor.config.force_shape_pad:
            return True
        m, k, n = pad_mm.hint_symbols((m, k, n))
        if not pad_mm.is_mm_compute_bound(m, k, n, mat1.dtype):
            return False
        dm = pad_mm.get_padded_length(m, pad_mm.get_alignment_size(mat1))
        dk = pad_mm.get_padded_length(k, pad_mm.get_alignment_size(mat1))
        dn = pad_mm.get_padded_length(n, pad_mm.get_alignment_size(mat2))
        dtype = str(mat1.dtype).removeprefix("torch.")
        batch = tuple(pad_mm.hint_symbols(batch))
        pads = []
        if (dm or dk) and not pad_mm.should_exclude_padding_time(match, "mat1"):
            pads.append(((*batch, m, k), (*batch, m + dm, k + dk)))
        if (dk or dn) and not pad_mm.should_exclude_padding_time(match, "mat2"):
            pads.append(((*batch, k, n), (*batch, k + dk, n + dn)))
        original = time_us(_matmul_ops(batch, m, k, n, dtype))
        padded = time_us(_matmul_ops(batch, m + dm, k + dk, n + dn, dtype, tuple(pads)))
        return original > padded * PAD_MM_SPEEDUP

    return should_pad


# -- constant folding --------------------------------------------------------------------------------------
class _CudaAsCpu:
    """A dispatch mode that runs ops asked for on "cuda" on the CPU (real tensors, no device)."""

    @staticmethod
    def mode() -> Any:
        from torch.utils._python_dispatch import TorchDispatchMode

        class CudaAsCpu(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = dict(kwargs or {})
                device = kwargs.get("device")
                if device is not None and torch.device(device).type == "cuda":
                    kwargs["device"] = torch.device("cpu")
                return func(*args, **kwargs)

        return CudaAsCpu()


def folded_on_cpu(original: Callable) -> Callable:
    """Inductor's uniform-value constant folding (fx_passes/joint_graph.py, UniformValueConstantFolder) runs the
    graph's constant ops on one-element tensors on the device, and keeps only their values (`.item()`); its own
    TODO says it could run on the CPU. Here it does: same values, no GPU. A node it cannot evaluate so (an
    operand that is itself fake) is left unfolded, as Inductor leaves any node of unknown value."""
    def deduce_value(self, node):
        try:
            with _CudaAsCpu.mode():
                return original(self, node)
        except (RuntimeError, NotImplementedError, TypeError):
            return self.unknown_value

    return deduce_value


def optimizer_init_in_fake_mode(original: Callable) -> Callable:
    """Dynamo runs an optimizer's `_init_group` for real rather than tracing it, after moving CPU step counts to
    the parameters' device and making its state capturable (torch/_dynamo/variables/optimizer.py,
    OptimizerVariable.call_method): on "cuda" that allocates device tensors. It runs here in the fake mode the
    parameters belong to, so the state it makes is fake CUDA, as it is real CUDA on a GPU."""
    from torch._subclasses.fake_tensor import FakeTensor

    def call_method(self, tx, name, args, kwargs):
        if name != "_init_group":
            return original(self, tx, name, args, kwargs)
        params = [p for group in self.value.param_groups for p in group["params"] if isinstance(p, FakeTensor)]
        if not params:
            return original(self, tx, name, args, kwargs)
        with params[0].fake_mode:
            return original(self, tx, name, args, kwargs)

    return call_method


# -- the session's hooks -----------------------------------------------------------------------------------
class _FakeDriverFactory:
    """A Triton CUDA driver that needs no libcuda: it answers with torch.cuda's (the facade's) arch."""

    @staticmethod
    def make() -> Any:
        from triton.backends.driver import GPUDriver
        from triton.backends.nvidia.driver import CudaDriver, CudaLauncher

        class FakeCudaDriver(CudaDriver):
            def __init__(self) -> None:  # CudaDriver's loads CudaUtils (libcuda)
                self.launcher_cls = CudaLauncher
                GPUDriver.__init__(self)
                self.get_current_stream = lambda device=None: 0

        return FakeCudaDriver()


def _device_interface_patches() -> dict[str, Any]:
    """torch._dynamo.device_interface.CudaInterface bound torch.cuda's functions at import: rebind them to the
    facade's (which are in force when this runs)."""
    cuda = torch.cuda
    return {
        "get_device_properties": staticmethod(cuda.get_device_properties),
        "current_device": staticmethod(lambda: 0), "device_count": staticmethod(lambda: 1),
        "set_device": staticmethod(lambda device: None), "synchronize": staticmethod(lambda device=None: None),
        "get_raw_stream": staticmethod(lambda index=0: 0),
        "exchange_device": staticmethod(lambda device: 0), "maybe_exchange_device": staticmethod(lambda device: 0),
        "is_bf16_supported": staticmethod(cuda.is_bf16_supported),
        "memory_allocated": staticmethod(lambda device=None: 0),
    }


def _wrapper_helper_patches(ours: Callable[[], Any]) -> dict[str, Any]:
    """The C++ helpers Inductor's generated wrapper calls (torch/csrc/dynamo/guards.cpp) that allocate or read
    device memory directly: the same results through aten, which fake tensors answer. Their Python is the
    capture's (`ours`), not the wrapper's: the C++ helpers cost what the op they record costs."""
    def empty_strided_cuda(size, stride, dtype, *args):
        with ours():
            return torch.empty_strided(size, stride, dtype=dtype, device="cuda")

    def reinterpret_tensor(base, size, stride, offset_increment=0):
        with ours():
            return torch.as_strided(base, size, stride, base.storage_offset() + offset_increment)

    return {"_empty_strided_cuda": empty_strided_cuda, "_reinterpret_tensor": reinterpret_tensor,
            "copy_if_misaligned": lambda tensor: tensor, "assert_alignment": lambda *args, **kwargs: None}


def _inductor_config() -> dict[str, Any]:
    """Inductor settings for a capture: nothing cached across captures, one process, the bytes and FLOPs
    estimates written into each kernel; max-autotune's GEMM templates cannot be benchmarked without a GPU."""
    return {
        "fx_graph_cache": False, "fx_graph_remote_cache": False, "autotune_local_cache": False,
        "autotune_remote_cache": False, "bundled_autotune_remote_cache": False,
        "compile_threads": 1, "benchmark_kernel": True,
        # GEMM and conv templates are chosen by timing them on the device (select_algorithm.py); with only the
        # extern choice there is nothing to time. Mode options (max_autotune=True) are applied inside this.
        "max_autotune_gemm_backends": "ATEN", "max_autotune_conv_backends": "ATEN",
    }


# Dynamo and Inductor warn on stderr about what the capture reports itself (graph breaks, skipped CUDA graphs).
COMPILE_LOGGERS = ("torch._dynamo", "torch._inductor")


@contextlib.contextmanager
def _compile_logs_quiet() -> Iterator[None]:
    """Dynamo's and Inductor's warnings off for the capture (KERNELCAST_DEBUG keeps them)."""
    import logging
    import os

    from kernelcast.errors import DEBUG_ENV

    if os.environ.get(DEBUG_ENV):
        yield
        return
    loggers = [logging.getLogger(name) for name in COMPILE_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def hide_router(router: Any, wrapper_frame: Any) -> None:
    """Take the Router off the torch-function mode stack for one call of compiled code, and put it back after.

    Dynamo traces into any torch-function mode on the stack (and guards on the stack), so the Router would be
    compiled into the graphs. Each compiled callable asks `eval_frame._callback_from_stance` for its callback
    just before it runs, inside `compile_wrapper` (`wrapper_frame`), whose `cleanups` run in its `finally`
    (torch 2.6-2.13): the Router comes off now, and a cleanup puts it back."""
    stack = torch.overrides._get_current_function_mode_stack()
    if router is None or router not in stack:
        return
    cleanups = wrapper_frame.f_locals.get("cleanups")
    if not isinstance(cleanups, list):
        raise CaptureError(f"torch.compile's call wrapper has changed ({_version_line()})")
    _set_mode_stack([m for m in stack if m is not router])
    cleanups.append(lambda: _set_mode_stack(stack))


def _set_mode_stack(stack: list) -> None:
    from torch._dynamo.variables.torch_function import set_torch_function_mode_stack

    set_torch_function_mode_stack(list(stack))


def traced_modules(graph) -> int:
    """How many nn.Modules Dynamo traced into an FX graph (its nodes' nn_module_stack): a compiled call through
    a module pays for it on the host (scripts/device/probe_compiled_host.py's module cases)."""
    paths = set()
    for node in graph.nodes:
        for entry in (node.meta.get("nn_module_stack") or {}).values():
            paths.add(entry[0] if isinstance(entry, tuple) else str(entry))
    return len(paths)


@dataclass
class InductorHooks:
    """Callbacks into the recorder: a Triton launch, and the bracket of a CUDA graph replay."""

    on_launch: Callable[[TritonKernelMeta, tuple], None]
    replay: Callable[[Callable, list, GraphedCall], Any]
    run_compiled: Callable[[Callable, list, int], Any]  # (the graph's call, its inputs, nn.Modules it traced)
    time_us: Callable[[list], float]  # predicted device time of some ops on the target GPU (for pad_mm)
    ours: Callable[[], Any] = contextlib.nullcontext  # books the time inside as the capture's, not the model's


@contextlib.contextmanager
def inductor_on_fake_cuda(hooks: InductorHooks) -> Iterator[CompiledRegions]:
    """Everything Inductor needs to compile for the fake CUDA device, for the length of a capture.

    Enter inside the torch.cuda facade (the device properties come from it). Yields the record of what was
    compiled. Dynamo's caches are reset on the way in and out, so compiled code never outlives its capture."""
    import torch._dynamo
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._dynamo.device_interface import CudaInterface
    from torch._dynamo.variables.optimizer import OptimizerVariable
    from torch._inductor import async_compile, output_code
    from torch._inductor.fx_passes import joint_graph, pad_mm
    from torch.fx.experimental import proxy_tensor
    from torch._inductor.graph import GraphLowering
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton.runtime import driver as triton_driver

    regions = CompiledRegions()

    def triton_stub(self, kernel_name: str, source_code: str, device_str: str = "cuda", *args, **kwargs):
        meta = TritonKernelMeta.from_source(kernel_name, source_code)
        regions.kernels[kernel_name] = meta
        return TritonKernelStub(meta, hooks.on_launch)

    log_skip = output_code.log_cudagraph_skip_and_bump_counter

    def skipped(msg: str) -> None:
        regions.cudagraph_skips.append(str(msg).strip())
        log_skip(msg)

    original_compile_to_module = GraphLowering.compile_to_module

    def compile_to_module(self):
        """Inductor's module for one graph, its `call` tagging the ops it runs as compiled code."""
        with contextlib.redirect_stderr(io.StringIO()):  # benchmark_kernel prints each module's path
            module = original_compile_to_module(self)
        regions.graphs += 1
        regions.max_autotune |= bool(inductor_config.max_autotune)
        call = module.call
        modules = traced_modules(self.graph)

        def tagged_call(args):
            return hooks.run_compiled(call, args, modules)

        module.call = tagged_call
        return module

    guards = torch._C._dynamo.guards
    torch._dynamo.reset()
    stack_quiet = _compile_logs_quiet()
    previous_driver = triton_driver._active
    with contextlib.ExitStack() as stack:
        stack.enter_context(stack_quiet)
        stack.enter_context(mock.patch.object(FakeTensorMode, "avoid_device_init", property(lambda self: True)))
        stack.enter_context(mock.patch.multiple(CudaInterface, **_device_interface_patches()))
        stack.enter_context(mock.patch.multiple(guards, **_wrapper_helper_patches(hooks.ours)))
        stack.enter_context(mock.patch.object(torch._C, "_cuda_getCurrentRawStream", lambda index=0: 0,
                                              create=True))
        # CUDA graphs need the caching allocator (cudagraph_utils.check_caching_allocator_for_cudagraphs)
        stack.enter_context(mock.patch.object(torch._C, "_cuda_cudaCachingAllocator_is_enabled", lambda: True,
                                              create=True))
        stack.enter_context(mock.patch.object(async_compile.AsyncCompile, "triton", triton_stub))
        stack.enter_context(mock.patch.object(GraphLowering, "compile_to_module", compile_to_module))
        stack.enter_context(mock.patch.object(pad_mm, "_should_pad", should_pad_by_model(hooks.time_us)))
        # make_fx keeps a real copy of each small tensor computed from constants (proxy_tensor.py, proxy_call),
        # computing it for real, which on "cuda" needs a GPU. None are kept: AOTAutograd retraces a graph Dynamo
        # already captured (data-dependent values were graph breaks there), so the graph is the same.
        stack.enter_context(mock.patch.object(proxy_tensor, "CONSTANT_NUMEL_LIMIT", NO_CONSTANTS))
        stack.enter_context(mock.patch.object(OptimizerVariable, "call_method",
                                              optimizer_init_in_fake_mode(OptimizerVariable.call_method)))
        folder = joint_graph.UniformValueConstantFolder
        stack.enter_context(mock.patch.object(folder, "_deduce_value", folded_on_cpu(folder._deduce_value)))
        stack.enter_context(mock.patch.object(output_code, "log_cudagraph_skip_and_bump_counter", skipped))
        stack.enter_context(inductor_config.patch(
            {**_inductor_config(), "cudagraph_policy": _cudagraph_policy(regions, hooks.replay)}))
        stack.enter_context(mock.patch.object(functorch_config, "enable_autograd_cache", False))
        triton_driver.set_active(_FakeDriverFactory.make())
        stack.callback(setattr, triton_driver, "_active", previous_driver)
        stack.callback(torch._dynamo.reset)
        yield regions


def check_compile_mode(mode: str) -> None:
    if mode not in COMPILE_MODES:
        raise CaptureError(f"--compile takes one of {', '.join(COMPILE_MODES)}, not {mode!r}")


def compile_step(step: Callable, mode: str) -> Callable:
    """The step as `torch.compile(step, mode=mode)` would run it (`kernelcast predict --compile MODE`)."""
    check_compile_mode(mode)
    return torch.compile(step, mode=mode)



def device_time_us(gpu_id: str) -> Callable[[list], float]:
    """Predicted device time (µs) of a list of op records on this GPU, with kernelcast's own kernel model."""
    from kernelcast.costs import cost_of
    from kernelcast.devices import get_gpu
    from kernelcast.predict import cost_context, kernel_model_for
    from kernelcast.records import Capture

    gpu = get_gpu(gpu_id)
    empty = Capture(ops=())
    model, ctx = kernel_model_for(gpu, empty), cost_context(gpu, empty)

    def time_us(ops: list) -> float:
        total = 0.0
        for op in ops:
            cost = cost_of(op, ctx)
            if cost is not None:
                total += model.estimate(cost).time_us
        return total

    return time_us
