"""Record every aten op a step dispatches, below autograd and above FakeTensorMode.

The recorder is a TorchDispatchMode pushed on top of FakeTensorMode, so it sees each op once, after
autograd and composite decompositions (as CUDA would run them) and before the fake kernel computes output
metadata. It also stands in for the GPU where the host would read data back (`.item()`, `nonzero`, boolean
masks, copies to the CPU): those become sync points, and the step goes on with placeholder values. Ops whose
output size depends on data (nonzero, unique, bincount, ...) get a stated size (dynamic_shapes.py).
"""

from __future__ import annotations

import dataclasses
import sys
import weakref
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils.weak import WeakIdKeyDictionary
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from kernelcast.errors import CaptureError
from kernelcast.records import (DECOMPOSED_TAG, ENGINE_NODES_OP, FROM_PYTHON_TAG, HOST_OP_PREFIX,
                                INSIDE_COMPILED_TAG, NEW_CUDNN_GRAPH_TAG, POST_BACKWARD, RECORD_STREAM_OP, STEP_END_OP,
                                TORCH_SAVE_OP, TORCHSCRIPT_CALL_TAG, TORCHSCRIPT_TAG,
                                OpRecord, TensorMeta)

from .aten_ops import overloads
from .cuda_inplace import CudaInPlace
from .dynamic_shapes import DynamicShapes, ValueHints, as_python
from .cuda_path import CudaOpTable
from .decompose import Decomposer
from .host_clock import HostClock, called_from_python
from .host_reads import HostReads, how_to_state
from .lifetimes import StorageTracker
from .rnn import cudnn_rnn_with_cuda_layout
from .source import current_source
from .tensor_device import device_type
from .sparse import SPARSE_INDICES_SUFFIX, SPARSE_VALUES_SUFFIX, SparseCuda, has_sparse, is_sparse

aten = torch.ops.aten

# Tags that change how an op is costed; the rest of torch's tags are dropped.
# (torch.Tag.inplace is new in 2.12; before it, the schema says whether an op writes its first argument.)
KEPT_TAGS = {getattr(torch.Tag, name): name for name in ("pointwise", "reduction") if hasattr(torch.Tag, name)}


def _is_inplace(func: torch._ops.OpOverload) -> bool:
    args = func._schema.arguments
    alias = args[0].alias_info if args else None
    return bool(alias is not None and alias.is_write and not func._schema.arguments[0].kwarg_only
                and func._schema.name.endswith("_"))


UNRECORDED_NAMESPACES = {"prim", "profiler"}  # device queries and profiler markers: no device work
# What a bool read back from the GPU most likely is, by the op that made it: checks of the form "all tokens
# valid" / "sum == numel" hold, checks of the form "any NaN" / "a != b" do not. Anything else: False.
# torch.distributions checks its arguments with `torch._is_all_true(constraint.check(value))` before `bool()` (its
# validate_args default, distributions/distribution.py): answered False, every Categorical(logits=...) raised.
BOOL_HINTS = {aten.all: True, aten.eq: True, aten.any: False, aten.ne: False, aten._is_all_true: True,
              aten._is_any_true: False}
# A one-value comparison against a constant is a library's or a model's range check (istft's window-overlap
# `min(|envelope|) < 1e-11`, cov's `min(fweights) >= 0`, a loss's `x > 0`): its placeholder is the comparison
# at a typical magnitude, TYPICAL_VALUE, the value that passes such a check. ATen asks it through
# is_scalar_tensor_true (`equal(t, ones)`): answered True, istft's check failed and its error message read the
# fake tensor's data. Only that path takes it: a user's `while loss > tol:` keeps the unknown bool's False (a
# placeholder True would never leave the loop).
TYPICAL_VALUE = 1.0
SCALAR_COMPARISONS = {aten.lt.Scalar: lambda a, b: a < b, aten.le.Scalar: lambda a, b: a <= b,
                      aten.gt.Scalar: lambda a, b: a > b, aten.ge.Scalar: lambda a, b: a >= b}
# What a number read back straight from a random fill is: the fill's mean (the middle of uniform_'s
# [from, to), normal_'s mean). torchvision's detection transform picks its resize so
# (`int(torch.empty(1).uniform_(0.0, len(sizes)).item())`), where the placeholder 1.0 indexed past a 1-tuple.
# Only a direct read uses it: the fill's tensor carries no value hint into other ops (a randn mask would then
# select nothing where "every element" is the stated bound).
RANDOM_FILL_MEANS = {
    aten.uniform_.default: lambda args, kwargs: (_arg(args, kwargs, 1, "from", 0.0) + _arg(args, kwargs, 2, "to", 1.0)) / 2,
    aten.normal_.default: lambda args, kwargs: _arg(args, kwargs, 1, "mean", 0.0),
}

# Ops that create no tensor data and never run on the device, whatever their inputs.
NO_DEVICE_WORK = {aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default, aten.sym_storage_offset.default}
# Ops whose handler records the ops they run on CUDA instead of themselves (dynamic_shapes.py).
RECORDED_AS_INNER_OPS = {aten._pack_padded_sequence.default}

# Linear algebra that reads the solver's info tensor back to the host. `_linalg_check_errors` runs
# `infos.any().item<bool>()` on every non-meta info (aten/src/ATen/native/BatchLinearAlgebra.cpp), so on a CUDA
# info it is a sync. torch.linalg.solve / inv / cholesky / lu_factor / ldl_factor call it after their *_ex op
# (it is recorded as an op of its own); the *_ex ops call it inside when check_errors=True; _linalg_eigh,
# _linalg_svd (TORCH_IMPL_FUNCs), linalg_eig, linalg_lstsq and the deprecated cholesky call it inside always.
# cholesky_inverse checks a CPU info (no readback).
LINALG_INFO_CHECK = aten._linalg_check_errors.default
LINALG_CHECK_ERRORS_ARG = {aten.linalg_lu_factor_ex.default, aten.linalg_cholesky_ex.default,
                           aten.linalg_inv_ex.default, aten._linalg_solve_ex.default,
                           aten.linalg_ldl_factor_ex.default}
# cholesky.default: removed in torch 2.14 (torch.cholesky is Python there), so looked up, not named.
LINALG_ALWAYS_CHECKED = {aten._linalg_eigh.default, aten._linalg_svd.default, aten.linalg_eig.default,
                         aten.linalg_lstsq.default, aten.linalg_pinv.atol_rtol_tensor} | overloads("cholesky.default")
# torch._grouped_mm's CUTLASS path (bf16 operands and output, sm_90 / sm_100) runs on the device; any other
# case with offsets copies them to the host (`offs.cpu()`, _grouped_mm_fallback in GroupedMMUtils.h).
GROUPED_MM_FAST_ARCH_MAJORS = (9, 10)


def _arg(args: tuple, kwargs: dict, index: int, name: str, default=None):
    return args[index] if len(args) > index else kwargs.get(name, default)


# Other ops whose CUDA implementation reads a value back to the host before it goes on, with the condition:
# nanmedian over the whole tensor counts its NaNs (`sorted.isnan().sum().item()`, cuda/Sorting.cpp, median_impl);
# multinomial without replacement or for one sample checks its input (`.item()` twice, Distributions.cpp, in the
# releases before the checks became `_assert_async`: a capture under a later torch records the checks as their
# ops, decompose.py SHARED_CPU_CUDA, and this rule applies only where that run stops);
# linalg_matrix_exp copies the matrices' norms to the host to pick the Taylor degree (LinearAlgebra.cpp, mexp).
# torch.normal with a tensor std checks `std.min().ge(0).item<bool>()` on the host before it samples, once in
# normal_impl and again in normal_out_impl (aten/src/ATen/native/DistributionTemplates.h CHECK_NORMAL_TENSOR_STD):
# a min, a compare and a copy to the host each, two sync points, then `ret.normal_(0, 1)`, `mul_(std)`,
# `add_(mean)` (costs/elementwise.py prices those three as the op's). torch.distributions.Normal.sample() calls
# it. Measured on an H100 (torch 2.11, validation/probes/opinfo_items/opinfo_items_run1.json.gz, OpInfo normal):
# 9 work items, two of them copies to the host, for one call. Overload -> where std is among the arguments.
NORMAL_TENSOR_STD = {aten.normal.Tensor_Tensor: 1, aten.normal.float_Tensor: 1}
NORMAL_STD_CHECKS = 2

# Ops CUDA runs by reading a tensor's value to the host and writing it as a number (decompose.py SHARED_CPU_CUDA):
# the read is a sync point whose value decides no work, so the capture assumes it without a note.
FILL_VALUE_READS = frozenset({"aten.index_fill_.int_Tensor"})

# Advanced indexing of a CUDA tensor moves index tensors that are on the host to the device first
# (TensorAdvancedIndexing.cpp make_info: `indice.to(self.device())`), a copy from pageable memory each; FakeTensor
# refuses the mixed devices in index_put (an index's backward: BEiT's relative position bias, a CUDA table indexed
# by an index built on the CPU, failed every training capture).
INDEXING_OPS = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}
# Ops that answer a host bool computed on GPU values, which FakeTensor refuses as data-dependent. In the recorded
# step CUDA runs their explicit kernel's ops (torch.allclose: isclose's kernels, all(), the read: TensorCompare.cpp),
# decomposed as any explicit op; outside it (a module's set-up: nn.utils.parametrizations.orthogonal checks its
# weight with allclose on the CPU, and failed every capture) the check is answered from known values, else as
# passing, with a note (_allclose).
BOOL_CHECKS = {aten.allclose.default}
HOST_READS = {
    aten.nanmedian.default: ("nanmedian count", lambda args, kwargs: args[0].numel() > 0),
    aten.multinomial.default: ("multinomial check", lambda args, kwargs: (
        not _arg(args, kwargs, 2, "replacement", False) or _arg(args, kwargs, 1, "num_samples") == 1)),
    aten.linalg_matrix_exp.default: ("matrix_exp norm", lambda args, kwargs: args[0].shape[-1] > 1),
    # nn.Embedding(max_norm=...): the count of unique indices sizes the renorm kernel's grid (Embedding.cu)
    aten.embedding_renorm_.default: ("embedding renorm", lambda args, kwargs: args[1].numel() > 0),
    # LearnableFakeQuantize per tensor: `scale[0].item()` and the zero point's, forward and backward
    # (FakeQuantPerTensorAffine.cpp): one sync point each call (the second read follows the first)
    aten._fake_quantize_learnable_per_tensor_affine.default: ("fake quant qparams", lambda args, kwargs: True),
    aten._fake_quantize_learnable_per_tensor_affine_backward.default: ("fake quant qparams",
                                                                        lambda args, kwargs: True),
}


def runs_as_local_ops(types) -> bool:
    """A tensor subclass with its own dispatch other than FakeTensor (DTensor, ...) among an op's arguments.
    A mode sees such an op before the subclass does; CUDA runs the ops the subclass then issues on its local
    tensors, so a mode returns NotImplemented and records those instead (they come back through it)."""
    return any(t.__torch_dispatch__ is not torch._C._disabled_torch_dispatch_impl and not issubclass(t, FakeTensor)
               for t in types)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _storage_id(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError):  # tensors without storage (e.g. some subclasses)
        return 0


def _storage_offset(t: torch.Tensor) -> int:
    try:
        return int(t.storage_offset())
    except (RuntimeError, NotImplementedError):  # sparse and other layouts without one strided storage
        return 0


def _is_conj(t: torch.Tensor) -> bool:
    try:
        return bool(t.is_complex() and t.is_conj())
    except (RuntimeError, NotImplementedError):
        return False


def tensor_meta(t: torch.Tensor) -> TensorMeta:
    return TensorMeta(tuple(int(s) for s in t.shape), _dtype_name(t.dtype), tuple(int(s) for s in t.stride()),
                      device_type(t), _storage_id(t), _storage_offset(t), _is_conj(t))


def _plain(value: Any) -> Any:
    """An op argument as a JSON-friendly value: tensors become TensorMeta, torch enums their names."""
    if isinstance(value, torch.Tensor):
        return tensor_meta(value)
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return _dtype_name(value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.maybe_as_int() if isinstance(value, torch.SymInt) else str(value)
    return str(value)


class OpSchema:
    """Argument names and defaults of one op overload, computed once."""

    def __init__(self, func: torch._ops.OpOverload) -> None:
        self.args = [
            (a.name, a.kwarg_only, a.default_value if a.has_default_value() else None, a.is_out)
            for a in func._schema.arguments
        ]
        tags = [name for tag, name in KEPT_TAGS.items() if tag in func.tags]
        if _is_inplace(func):
            tags.append("inplace")
        if func.is_view or torch.Tag.inplace_view in func.tags:
            tags.append("view")
        self.tags = tuple(tags)

    def bind(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """Arguments by name; an `out=` argument is left to the outputs (it is written, not read)."""
        bound: dict[str, Any] = {}
        for i, (name, kwarg_only, default, is_out) in enumerate(self.args):
            if is_out:
                continue
            if not kwarg_only and i < len(args):
                value = args[i]
            else:
                value = kwargs.get(name, default)
            bound[name] = _plain(value)
            if is_sparse(value):  # its memory is its indices and values: costs read nnz from them
                bound[f"{name}{SPARSE_INDICES_SUFFIX}"] = tensor_meta(value._indices())
                bound[f"{name}{SPARSE_VALUES_SUFFIX}"] = tensor_meta(value._values())
        return bound


def _no_sparse_kernel(exc: Exception) -> bool:
    """Whether an op failed for want of a sparse kernel in FakeTensorMode, not for the user's arguments: a CPU build
    has no SparseMeta kernel ("Could not run ... 'SparseMeta' backend"), a CUDA build tries the real kernel and
    cannot start CUDA."""
    text = str(exc)
    return "SparseMeta" in text or "SparseCUDA" in text or "without ATen_cuda library" in text


def _number_overload(func, args: tuple, kwargs: dict):
    """The overload of `func`'s op that takes a Python number where `func` takes a Tensor, or None.

    A kernel that calls an op with a wrapped-number tensor (remainder.Scalar calls remainder.Tensor with its
    scalar wrapped; take_along_dim's index wrap-around does) reaches a Python mode with that argument as a
    Python number (torch/csrc/utils/python_dispatch: wrapped numbers are passed as scalars), which the Tensor
    overload then refuses. The Scalar overload is the same kernel on the same values."""
    def accepts(arg_type, value) -> bool:
        if isinstance(value, torch.Tensor):
            return isinstance(arg_type, torch.TensorType)
        if isinstance(value, (bool, int, float)):
            return str(arg_type) in ("Scalar", "float", "int", "bool", "number")
        return True

    packet = func.overloadpacket
    for name in packet.overloads():
        candidate = getattr(packet, name)
        schema = candidate._schema
        params = [a for a in schema.arguments if not a.kwarg_only]
        if (candidate is func or schema.is_mutable != func._schema.is_mutable or len(params) < len(args)
                or not all(accepts(p.type, a) for p, a in zip(params, args))
                or not set(kwargs) <= {a.name for a in schema.arguments}):
            continue
        return candidate
    return None


def _host_index(index) -> bool:
    """An integer index tensor on the host with elements to copy (a 0-d one is read as a number)."""
    return isinstance(index, torch.Tensor) and index.dim() > 0 and device_type(index) == "cpu" \
        and index.dtype not in (torch.bool, torch.uint8)


def _on_gpu(args: tuple, kwargs: dict) -> bool:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            if device_type(value) == "cuda":
                return True
        elif isinstance(value, (list, tuple)):
            if any(isinstance(v, torch.Tensor) and device_type(v) == "cuda" for v in value):
                return True
    return False


def _targets_gpu(args: tuple, kwargs: dict) -> bool:
    """A GPU tensor among the arguments, or a factory asked for a CUDA tensor."""
    device = kwargs.get("device")
    return _on_gpu(args, kwargs) or (device is not None and torch.device(device).type == "cuda")


_NOT_DECOMPOSED = object()
# How a shared CPU/CUDA kernel run on fake CUDA tensors stops short (decompose.py SHARED_CPU_CUDA): a TORCH_CHECK
# on a value the capture assumed, or a DispatchStub this build has no CUDA kernel for. Anything else is ours.
SHARED_STOPS = (RuntimeError, NotImplementedError)


def output_metas(out: Any) -> tuple[TensorMeta | None, ...]:
    items = out if isinstance(out, (tuple, list)) else (out,)
    metas: list[TensorMeta | None] = []
    for item in items:
        if isinstance(item, torch.Tensor):
            metas.append(tensor_meta(item))
        elif isinstance(item, (tuple, list)):
            metas.extend(tensor_meta(t) for t in item if isinstance(t, torch.Tensor))
        elif item is None and isinstance(out, (tuple, list)):
            metas.append(None)
    return tuple(metas)


# The ops whose cuDNN graph PyTorch builds per shape and caches (aten/src/ATen/native/cudnn/MHA.cpp: the forward's
# and the backward's caches are keyed by batch, heads, lengths, head dims, strides, dtype and the options).
CUDNN_GRAPH_OPS = frozenset({aten._scaled_dot_product_cudnn_attention.default,
                             aten._scaled_dot_product_cudnn_attention_backward.default})


def _records_node(args: tuple) -> bool:
    """Whether an op called with these arguments records an autograd node (grad mode on, an input needing grad)."""
    return torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)


def _graph_key(value) -> tuple | object:
    """What of an argument a cuDNN graph is keyed by: a tensor's shape, strides and dtype; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), tuple(value.stride()), value.dtype)
    return value if isinstance(value, (int, float, bool, str, type(None))) else repr(value)


class Recorder(TorchDispatchMode):
    """Records ops while `recording` is set; handles sync ops always (the warm-up step needs them too)."""

    def __init__(self, phase_of: Callable[[], str], module_of: Callable[[], str],
                 backward_origin: Callable[[], tuple[str, str] | None], op_table: CudaOpTable | None = None,
                 capability: tuple[int, int] = (9, 0)) -> None:
        super().__init__()
        self.capability = capability  # the target GPU's: a few ops read data back on some archs only
        self.recording = False
        self.graph_modules = 0  # nn.Modules Dynamo traced into the compiled graph being run (run_compiled)
        self.ops: list[OpRecord] = []
        self.notes: set[str] = set()
        self.current_stream = 0  # the stream ops are issued on (torch.cuda.stream(...) changes it)
        self.clock = HostClock()  # the model's Python time between ops (the session's tracker counts modules)
        self.torch_calls: list[int] = []  # per recorded op: torch calls since the previous one
        self._last_node: Any = None  # the autograd node whose backward ran the previous op
        self._after_backward = False  # this step ran a backward: its later non-autograd ops are post-backward
        self._phase_of = phase_of
        self._module_of = module_of
        self._backward_origin = backward_origin
        self._schemas: dict[Any, OpSchema] = {}
        # Which bool tensors came from all()/any(), so .item() on them gets a plausible placeholder.
        self._bool_hint = WeakIdKeyDictionary()
        self._check_hint = WeakIdKeyDictionary()  # one-value comparisons against a constant (SCALAR_COMPARISONS)
        self.host_reads = HostReads()  # stated values of reads no hint decides (--assume)
        self._fill_mean = WeakIdKeyDictionary()  # one-element random fills: (op, its mean), for .item()
        # Plausible values of small tensors whose data the GPU would compute, and data-dependent sizes.
        self.hints = ValueHints(self._note)
        self.dynamic = DynamicShapes(self.hints, self._note, self._record_inner, self.note_line)
        self.dynamic.indices_to_device = self._host_indices_to_device
        self._shape_handlers = self.dynamic.handlers()  # they give their outputs' hints themselves
        self._library_handlers = self.dynamic.library_handlers()  # by qualified name, found on first call
        self._sync_handlers: dict[Any, Callable] = {
            **self._shape_handlers,
            aten._local_scalar_dense.default: self._scalar,
            aten.is_nonzero.default: self._scalar,
            aten.equal.default: self._equal,
            aten.allclose.default: self._allclose,
            aten._to_copy.default: self._copy,
            aten.copy_.default: self._copy,
            aten._pin_memory.default: self._pin_memory,
            aten._ctc_loss.Tensor: self._ctc_lengths,
            aten.is_pinned.default: self._is_pinned,
            aten._cudnn_rnn.default: cudnn_rnn_with_cuda_layout,
            LINALG_INFO_CHECK: self._linalg_info,
            aten.histc.default: self._histc,
            aten._grouped_mm.default: self._grouped_mm,
            **{op: self._linalg_info for op in LINALG_CHECK_ERRORS_ARG | LINALG_ALWAYS_CHECKED},
            **{op: self._host_read for op in HOST_READS},
            **{op: self._normal_tensor_std for op in NORMAL_TENSOR_STD},
        }
        self._pinned = WeakIdKeyDictionary()  # host tensors in pinned memory (FakeTensorMode has no such notion)
        self._pending_tags: tuple[str, ...] = ()  # set by a handler for the op it handles
        self._cudnn_graphs: set[tuple] = set()  # cuDNN attention shape keys run so far, warm-up steps included
        self._script_depth = 0  # TorchScript module calls running (script_call): their ops are tagged TORCHSCRIPT_TAG
        self._script_started = False  # an op of the running script call was recorded
        self.in_place = CudaInPlace()  # backward work a GPU run does in place (cuda_inplace.py)
        self._host_read_kind: str | None = None  # set while a host read (tolist) copies a tensor to the CPU
        # Ops CUDA runs by calling other ops (capture/decompose.py); the ops being decomposed, innermost last.
        self._decomposer = Decomposer(op_table, set(self._sync_handlers) - BOOL_CHECKS)
        self._parents: list[int] = []
        # Sparse COO ops (sparse gradients and their optimizers), run as their CUDA code does (sparse.py).
        self.sparse = SparseCuda(self._run_children, self._note, self.hints)
        self._sync_handlers[aten._coalesce.default] = self.sparse.coalesce
        self.storages: StorageTracker | None = None  # sees every CUDA storage made and freed (lifetimes.py)
        # torch.compile'd code (capture/inductor.py): Dynamo compiles with this mode popped when `compiles` is on,
        # and the ops Inductor's wrapper runs carry `region_tags` ("compiled", and "graphed" in a CUDA graph).
        self.compiles = False
        self.region_tags: tuple[str, ...] = ()
        # storages CUDA graph replays wrote (static for later graphs): storage id -> a weak reference to the output,
        # so that a storage freed since, whose id a new one may reuse, is not taken for an output (_graph_output)
        self._graph_outputs: dict[int, weakref.ref] = {}
        # ops build() issued on a side stream, one per (op, stream, phase): records.Capture.build_ops
        self.build_ops: list[OpRecord] = []
        self._build_op_kinds: set[tuple[str, int, str]] = set()
        self._static_buffers: dict[tuple[int, int], torch.Tensor] = {}  # (graphed callable, input): its buffer

    def ignore_compile_internals(self) -> bool:  # type: ignore[override]
        """True while Inductor runs on fake CUDA: Dynamo then compiles with this mode off and runs the compiled
        code with it on (torch/utils/_python_dispatch.py); else Dynamo skips every frame and the code runs eager."""
        return self.compiles

    # -- dispatch --------------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if runs_as_local_ops(types):  # DTensor: its local ops are what runs (and come back here)
            return NotImplemented
        self.clock.ours_begin()
        try:
            return self._dispatch(func, args, kwargs or {})
        finally:
            self.clock.ours_end()

    def _dispatch(self, func, args, kwargs):
        if func.namespace in UNRECORDED_NAMESPACES:  # device queries: pass through, fast
            return func(*args, **kwargs)
        self._pending_tags = ()
        func, args, kwargs = self.in_place.rewrite(func, args, kwargs)
        if kwargs.get("generator") is not None:  # (cuda_facade.HostGeneratorForCuda says why)
            kwargs = {**kwargs, "generator": None}
        if any(isinstance(a, torch._C.Generator) for a in args):  # poisson, binomial, _standard_gamma: positional
            args = tuple(None if isinstance(a, torch._C.Generator) else a for a in args)
        if func in INDEXING_OPS:
            args = self._host_indices_to_device(args)
        handler = self._sync_handlers.get(func)
        if handler is None and func.namespace != "aten" and func.name() in self._library_handlers:
            handler = self._sync_handlers[func] = self._shape_handlers[func] = self._library_handlers[func.name()]
        # a sparse tensor's copy is its indices' and values' copies, each through the copy handler (sparse.py)
        if (handler is None or func is aten._to_copy.default) and self.sparse.handles(func, args, kwargs):
            return self._finish(func, args, kwargs, self.sparse.run(func, args, kwargs))
        if (handler is None or func in HOST_READS or func in BOOL_CHECKS) and self.recording \
                and func not in NO_DEVICE_WORK:
            how = self._decomposer.how(func)
            if how is not None and (self._parents or _targets_gpu(args, kwargs)) and not has_sparse(args, kwargs):
                out = self._decompose(func, how, args, kwargs)
                if out is not _NOT_DECOMPOSED:
                    return out
        if handler is not None:
            out, sync = handler(func, args, kwargs)
        else:
            try:
                out, sync = func(*args, **kwargs), None
            except (NotImplementedError, RuntimeError) as exc:
                if has_sparse(args, kwargs) and _no_sparse_kernel(exc):
                    # FakeTensor has no sparse kernels (a CPU build says so; a CUDA build tries the real kernel
                    # and fails to start CUDA); the sparse ops CUDA runs by calling others are in sparse.py
                    raise CaptureError(f"{func} on a sparse COO tensor is not modelled by kernelcast yet (capture/"
                                       "sparse.py lists the sparse ops it runs as CUDA does): this step cannot be "
                                       "captured") from exc
                if isinstance(exc, NotImplementedError):
                    raise
                number_overload = _number_overload(func, args, kwargs) if "Expected a value of type" in str(exc) \
                    else None
                if number_overload is None:
                    raise
                func = number_overload
                out, sync = func(*args, **kwargs), None
        self.in_place.note(func, out)
        if func in CUDNN_GRAPH_OPS:
            self._see_cudnn_graph(func, args, kwargs)
        if self.storages is not None:
            self.storages.see_op(args, kwargs, out)
        if func not in self._shape_handlers:
            self.hints.seed(func, args, kwargs, out)
            self.hints.propagate(func, args, kwargs, out)
        hint = BOOL_HINTS.get(func.overloadpacket)
        if hint is not None and isinstance(out, torch.Tensor):
            self._bool_hint[out] = hint
        if func in SCALAR_COMPARISONS and isinstance(out, torch.Tensor) and out.dim() == 0 and len(args) > 1 \
                and isinstance(args[1], (int, float)):  # read only by a library check (_equal)
            self._check_hint[out] = SCALAR_COMPARISONS[func](TYPICAL_VALUE, args[1])
        fill_mean = RANDOM_FILL_MEANS.get(func)
        # not on parameters (nn.init fills them): a weak reference to one makes Module._apply's swap_tensors fail
        if fill_mean is not None and out.numel() == 1 and not isinstance(out, torch.nn.Parameter):
            self._fill_mean[out] = (func.overloadpacket.__name__, float(fill_mean(args, kwargs)))
        if (self.recording and func not in NO_DEVICE_WORK and func not in RECORDED_AS_INNER_OPS
                and not (self.storages is not None and self.storages.paused)):  # DTensor's metadata-only ops
            self._record(func, args, kwargs, out, sync)
        elif not self.recording and self.current_stream != 0 and func not in NO_DEVICE_WORK:
            self._record_build_op(func, args, kwargs)
        return out

    def _record_build_op(self, func, args: tuple, kwargs: dict) -> None:
        """An op build() issued on a side stream, the first of its kind there (Capture.build_ops)."""
        phase = self._phase_of()
        kind = (str(func), self.current_stream, phase)
        if kind in self._build_op_kinds or not _on_gpu(args, kwargs):
            return
        self._build_op_kinds.add(kind)
        schema = self._schemas.get(func) or self._schemas.setdefault(func, OpSchema(func))
        self.build_ops.append(OpRecord(index=-1, op=str(func), args=schema.bind(args, kwargs), outputs=(),
                                       tags=schema.tags, phase=phase, stream=self.current_stream))

    def _host_indices_to_device(self, args: tuple) -> tuple:
        """An indexing op's arguments with its index tensors on the host copied to the CUDA tensor's device, each
        copy recorded (INDEXING_OPS). Boolean masks stay: their nonzero runs where they are."""
        self_t, indices = args[0], args[1]
        if device_type(self_t) != "cuda" or not any(_host_index(i) for i in indices):
            return args
        moved = []
        for index in indices:
            if _host_index(index):
                kwargs = {"device": self_t.device}
                on_device, sync = self._copy(aten._to_copy.default, (index,), kwargs)
                self._record_inner(aten._to_copy.default, (index,), kwargs, on_device, sync)
                index = on_device
            moved.append(index)
        return (self_t, moved, *args[2:])

    def _record_inner(self, func, args: tuple, kwargs: dict, out: Any, sync: str | None) -> None:
        """An op a handler ran on the way to its own result (the nonzero of a boolean index, ...)."""
        if self.recording:
            self._record(func, args, kwargs, out, sync)

    def _finish(self, func, args: tuple, kwargs: dict, out: Any) -> Any:
        """What _dispatch does after an op ran for one whose children were recorded (value hints)."""
        self.hints.seed(func, args, kwargs, out)
        self.hints.propagate(func, args, kwargs, out)
        return out

    def _run_children(self, func, args: tuple, kwargs: dict, body: Callable[[], Any]) -> Any:
        """Record `func` as a decomposed op (it launches nothing itself), then run `body()` with this recorder
        in force: the ops it calls are recorded as the op's children. Returns body's result. Outside a
        recording, body just runs."""
        if not self.recording:
            with self:
                return body()
        index = len(self.ops)
        self._record(func, args, kwargs, None, None, extra_tags=(DECOMPOSED_TAG,),
                     on_gpu=bool(self._parents) or _targets_gpu(args, kwargs))
        self._parents.append(index)
        try:
            with self:  # the ops it calls come back through this recorder
                out = body()
        finally:
            self._parents.pop()
        self.ops[index] = dataclasses.replace(self.ops[index], outputs=output_metas(out))
        return out

    def _decompose(self, func, how: str, args: tuple, kwargs: dict) -> Any:
        """Record the op, then run it as CUDA does (decompose.py), recording the ops it calls as its
        children. An op whose kernel launches by itself, or builds its output without calling ops (a plain
        tensor comes back), is recorded whole instead (_NOT_DECOMPOSED)."""
        def run_as_cuda():
            try:
                return Decomposer.run(func, how, args, kwargs)
            except Exception as exc:
                # a shared kernel may also stop at a check on a value the capture does not know (an older
                # torch's `.item()` of a multinomial's input check): recorded whole, by its handler
                if Decomposer.launched_by_itself(exc) or (how == "shared" and isinstance(exc, SHARED_STOPS)):
                    return NotImplemented
                raise

        index, notes = len(self.ops), set(self.notes) if how == "shared" else None
        out = self._run_children(func, args, kwargs, run_as_cuda)
        if out is NotImplemented or not Decomposer.outputs_fake(out):
            if how != "shared":  # a shared kernel stops by its arguments (multinomial with replacement): per call
                self._decomposer.self_launching.add(func)
            del self.ops[index:], self.torch_calls[index:]
            if notes is not None:
                self.notes = notes  # a note of the abandoned run (an assumed read) is not the step's
            return _NOT_DECOMPOSED
        self.in_place.note(func, out)  # a decomposed new_zeros still makes a backward formula's zeros
        return self._finish(func, args, kwargs, out)  # value hints follow the op, not the ops it called

    def _record(self, func, args: tuple, kwargs: dict, out: Any, sync: str | None, extra_tags: tuple = (),
                on_gpu: bool | None = None) -> None:
        schema = self._schemas.get(func)
        if schema is None:
            schema = self._schemas[func] = OpSchema(func)
        if on_gpu is None:
            on_gpu = _on_gpu(args, kwargs) or _on_gpu((out,), {})  # factories have only a device kwarg
        tags = (schema.tags if on_gpu else schema.tags + ("host",)) + extra_tags
        parent = self._parents[-1] if self._parents else -1
        if parent >= 0:  # called by a decomposed op: its phase, module and line; no autograd of its own
            caller = self.ops[parent]
            phase, module, source, stream = caller.phase, caller.module, caller.source, caller.stream
        else:
            phase = self._phase_of()
            origin = self._backward_origin() if phase == "backward" else None
            if origin is not None:
                source, module = origin
            else:
                source, module = current_source(), self._module_of()
            stream = self.current_stream
            tags += self._autograd_tags(phase, args)
            # a new forward records autograd history: an op that reads a tensor needing grad and makes one
            # (loss.item() reads the loss and makes a number)
            makes_tensor = isinstance(out, (torch.Tensor, tuple, list))
            phase = self._step_phase(phase, starts_forward="grad" in tags and makes_tensor)
        tags += self._pending_tags + self.region_tags + ((TORCHSCRIPT_TAG,) if self._script_depth else ())
        self._pending_tags = ()
        python_us, torch_calls, modules, lines = self.clock.take()
        if self._script_depth and parent < 0:
            # inside a script module's graph no Python runs between ops and no module is called: what the clock
            # read since the previous op is the capture's interpreter on fake tensors (its first op keeps the
            # caller's Python before the call, and marks where the call's graph begins)
            if self._script_started:
                python_us, lines, modules = 0.0, 0, 0
            else:
                tags += (TORCHSCRIPT_CALL_TAG,)
            self._script_started = True
        if self.clock.take_inside_compiled():
            tags += (INSIDE_COMPILED_TAG,)
        if self.region_tags and parent < 0:
            # Inductor's wrapper calls each aten op itself, with the Router off the stack: one torch call each,
            # whose hand-over into the capture's modes the gap baselines take out (host_clock.py)
            torch_calls = max(torch_calls, 1)
        self.torch_calls.append(torch_calls)
        self.ops.append(OpRecord(
            index=len(self.ops), op=str(func), args=schema.bind(args, kwargs), outputs=output_metas(out),
            tags=tags, phase=phase, module=module, source=source, sync=sync, python_us=python_us, modules=modules,
            python_lines=lines, stream=stream, parent=parent,
        ))

    def _step_phase(self, phase: str, starts_forward: bool = False) -> str:
        """The op's phase within the step: after a backward, an op outside autograd and the optimizer is
        POST_BACKWARD unless it records autograd history (starts_forward: the next micro-batch's forward)."""
        if phase == "backward":
            self._after_backward = True
        elif phase == "forward" and self._after_backward:
            if not starts_forward:
                return POST_BACKWARD
            self._after_backward = False
        return phase

    def _see_cudnn_graph(self, func, args: tuple, kwargs: dict) -> None:
        """Note the cuDNN graph a cuDNN attention call needs (its shape key); in the recorded step, a key that no
        earlier step ran, where an earlier step did run cuDNN attention, tags the op NEW_CUDNN_GRAPH_TAG (set by
        _record from _pending_tags). Without an earlier step (a capture block's only step) nothing says whether
        the shapes repeat, and nothing is tagged."""
        key = (func, *(_graph_key(a) for a in (*args, *kwargs.values())))
        if key in self._cudnn_graphs:
            return
        if self.recording and self._cudnn_graphs:
            self._pending_tags += (NEW_CUDNN_GRAPH_TAG,)
        self._cudnn_graphs.add(key)

    def _autograd_tags(self, phase: str, args: tuple) -> tuple[str, ...]:
        """"grad": a forward op that records an autograd node (its host cost is higher); "node": the first op
        of an autograd node's backward (the engine's per-node cost is paid there); FROM_PYTHON_TAG: a backward op
        that Python called (a custom Function's backward, a hook, checkpointing's recomputed forward: "grad" too
        where it records a node), not the engine's formula."""
        if phase == "backward":
            tags: tuple[str, ...] = ()
            node = torch._C._current_autograd_node()
            if node is not None and node is not self._last_node:
                self._last_node = node
                tags = ("node",)
            if called_from_python(sys._getframe(1)):
                tags += (FROM_PYTHON_TAG, "grad") if _records_node(args) else (FROM_PYTHON_TAG,)
            return tags
        return ("grad",) if _records_node(args) else ()

    # -- torch.compile'd code (capture/inductor.py) ------------------------------------------------------
    def record_triton_launch(self, meta, args: tuple) -> None:
        """One launch of an Inductor-generated Triton kernel, as op "triton.<class>.<kernel name>"."""
        from .inductor import COMPILED_TAG, TRITON_OP_PREFIX, launch_record

        if not self.recording:
            return
        self.clock.ours_begin()
        try:
            record, writes = launch_record(meta, args)
            phase = self._phase_of()
            origin = self._backward_origin() if phase == "backward" else None
            source, module = origin if origin is not None else (current_source(), self._module_of())
            python_us, torch_calls, modules, lines = self.clock.take()
            self.torch_calls.append(torch_calls)
            tags = tuple(dict.fromkeys((COMPILED_TAG, *self.region_tags)))
            self.ops.append(OpRecord(
                index=len(self.ops), op=f"{TRITON_OP_PREFIX}{meta.kind}.{meta.name}",
                args={k: _plain(v) for k, v in record.items()}, outputs=tuple(tensor_meta(t) for t in writes),
                tags=tags, phase=phase, module=module, source=source, python_us=python_us, modules=modules,
                python_lines=lines, stream=self.current_stream,
            ))
        finally:
            self.clock.ours_end()

    def run_compiled(self, call, args: list, modules: int = 0) -> Any:
        """Inductor's generated wrapper for one graph: the ops it runs are tagged as compiled code. Outside a
        CUDA graph a marker op (COMPILED_GRAPH_OP, with the graph's tensor inputs) opens it: the Python timed
        before it since the compiled call began is Dynamo's guards and AOTAutograd's wrapper, as they ran here
        on fake tensors, which the host model prices by its own calibration instead; a second marker
        (COMPILED_GRAPH_END_OP) closes it, so that the wrapper's Python after its last op is not read as the
        caller's. The marker holds how many nn.Modules Dynamo traced into the graph (inductor.traced_modules)."""
        from .inductor import COMPILED_GRAPH_END_OP, COMPILED_GRAPH_OP, COMPILED_TAG, GRAPHED_TAG

        marked = self.recording and GRAPHED_TAG not in self.region_tags
        self.graph_modules = modules  # for a replay's marker (replay_graph), which is recorded before this call
        if marked:
            inputs = sum(isinstance(a, torch.Tensor) for a in args)
            self._record_marker(COMPILED_GRAPH_OP, {"inputs": inputs, "modules": modules},
                                tags=("host", COMPILED_TAG))
        saved = self.region_tags
        self.region_tags = tuple(dict.fromkeys((*saved, COMPILED_TAG)))
        try:
            return call(args)
        finally:
            self.region_tags = saved
            if marked and self.recording:
                self._record_marker(COMPILED_GRAPH_END_OP, {}, tags=("host", COMPILED_TAG))

    def _graph_output(self, t: torch.Tensor) -> bool:
        """Whether t's storage is one a CUDA graph replay wrote and that is still alive. A storage's id is its
        C++ address, which a storage made after it was freed may get again: the id alone had made the inputs
        copied per replay, and the kernels of a step, move from capture to capture (zoo
        llama_generate_static_cache, 1975-1985 work items)."""
        ref = self._graph_outputs.get(_storage_id(t))
        output = ref() if ref is not None else None
        return output is not None and _storage_id(output) == _storage_id(t)

    def _static_buffer(self, call, index: int, like: torch.Tensor) -> torch.Tensor:
        """The graph's own buffer for its input `index` (made once, unrecorded: the graph's memory pool)."""
        key = (id(call), index)
        buffer = self._static_buffers.get(key)
        if buffer is None:
            was, self.recording = self.recording, False
            try:
                buffer = torch.empty_strided(like.shape, like.stride(), dtype=like.dtype, device="cuda")
            finally:
                self.recording = was
            self._static_buffers[key] = buffer
        return buffer

    def replay_graph(self, model, inputs: list, call) -> Any:
        """A call of a graph Inductor put under CUDA graphs, as CUDA graph trees replay it
        (torch/_inductor/cudagraph_trees.py, CUDAGraphNode.run): a host-only marker for the replay (its launch
        and checks), the inputs that are not static (parameters, buffers, outputs of earlier graphs) copied
        into the graph's own buffers with one _foreach_copy_, then the graph's kernels, which have no host work
        of their own, and the end marker (COMPILED_GRAPH_END_OP, as run_compiled). The replay's marker holds how
        many nn.Modules the graph traced, known once the graph has run."""
        from .inductor import COMPILED_GRAPH_END_OP, COMPILED_TAG, CUDAGRAPH_REPLAY_OP, GRAPHED_TAG

        with self.clock.ours():  # kernelcast's bookkeeping, not the model's Python
            refused = call.mutation_refused(lambda i: isinstance(inputs[i], torch.Tensor)
                                            and self._graph_output(inputs[i]))
            copies = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and i not in call.static_inputs
                      and device_type(t) == "cuda" and not self._graph_output(t)]
            buffers = [self._static_buffer(call, i, inputs[i]) for i in copies]
        if refused is not None:  # the trees run it without a graph, every call
            call.refused(refused)
            return model(list(inputs))
        marker = None
        if self.recording:  # first: the Python before it (guards, the trees' checks) is priced by the marker
            marker = len(self.ops)
            self._record_marker(CUDAGRAPH_REPLAY_OP, {"backward": call.is_backward, "copied_inputs": len(copies),
                                                      "inputs": sum(isinstance(t, torch.Tensor) for t in inputs)},
                                tags=("host", COMPILED_TAG))
        if copies:
            saved, self.region_tags = self.region_tags, tuple(dict.fromkeys((*self.region_tags, COMPILED_TAG)))
            try:
                torch._foreach_copy_(buffers, [inputs[i] for i in copies])
            finally:
                self.region_tags = saved
        saved = self.region_tags
        self.region_tags = tuple(dict.fromkeys((*saved, COMPILED_TAG, GRAPHED_TAG)))
        self.graph_modules = 0
        try:
            out = model(list(inputs))
        finally:
            self.region_tags = saved
        with self.clock.ours():
            for t in out if isinstance(out, (list, tuple)) else (out,):
                if isinstance(t, torch.Tensor):
                    self._graph_outputs[_storage_id(t)] = weakref.ref(t)
            if marker is not None and self.recording:  # the modules the replayed graph traced (run_compiled)
                op = self.ops[marker]
                self.ops[marker] = dataclasses.replace(op, args={**op.args, "modules": self.graph_modules})
        if marker is not None and self.recording:
            self._record_marker(COMPILED_GRAPH_END_OP, {}, tags=("host", COMPILED_TAG))
        return out

    # -- a user's own CUDA graphs (torch.cuda.CUDAGraph, torch.cuda.graph; cuda_facade.FakeCUDAGraph) -----------
    def begin_user_graph(self) -> tuple:
        """A graph capture begins: what is issued until end_user_graph is the graph's work, recorded (whether or
        not the step is being recorded: graphs are mostly captured in build()) and then taken out of the step."""
        from .inductor import GRAPHED_TAG

        begun = (self.recording, len(self.ops), self.region_tags, self.current_stream)
        self.recording = True
        self.region_tags = tuple(dict.fromkeys((*self.region_tags, GRAPHED_TAG)))
        return begun

    def end_user_graph(self, begun: tuple) -> tuple[OpRecord, ...]:
        """The graph's ops, taken out of the recorded ones (a capture runs nothing on the GPU)."""
        recording, start, tags, _ = begun
        body = tuple(self.ops[start:])
        del self.ops[start:], self.torch_calls[start:]
        self.recording, self.region_tags = recording, tags
        return body

    def replay_user_graph(self, body: tuple[OpRecord, ...]) -> None:
        """g.replay(): a host-only marker for the launch (USER_GRAPH_REPLAY_OP, one cudaGraphLaunch), then the
        graph's ops again, tagged graphed (no host work of their own), on the stream the replay is issued on
        where they were captured on the capture's stream, each in the phase it was captured in."""
        from .inductor import USER_GRAPH_REPLAY_OP

        if not self.recording:
            return
        kernels = sum("host" not in op.tags for op in body)
        self._note(f"CUDA graph replayed (torch.cuda.CUDAGraph.replay): its {len(body)} captured ops issued again "
                   "behind one launch, with no host work of their own")
        self._record_marker(USER_GRAPH_REPLAY_OP, {"kernels": kernels})
        capture_stream = body[0].stream if body else 0
        offset = len(self.ops) - (body[0].index if body else 0)
        with self.clock.ours():  # kernelcast's bookkeeping, not the model's Python
            for op in body:
                self.torch_calls.append(0)
                self.ops.append(dataclasses.replace(
                    op, index=op.index + offset, parent=op.parent + offset if op.parent >= 0 else -1,
                    stream=self.current_stream if op.stream == capture_stream else op.stream, python_us=0.0,
                    modules=0, captured_stream=op.stream))

    def record_compiled_call(self) -> None:
        """Where a call of torch.compile'd code begins, before Dynamo checks its guards: the Python timed
        before it is the caller's own (COMPILED_CALL_OP)."""
        from .inductor import COMPILED_CALL_OP

        if self.recording:
            self._record_marker(COMPILED_CALL_OP, {})

    def record_stream_marker(self, op: str, stream: int, event: int) -> None:
        """An event record or wait on a stream (torch.cuda.Event / Stream.wait_event / wait_stream)."""
        if self.recording:
            self._record_marker(op, {"event": event}, stream=stream)

    def record_range(self, op: str, name: str) -> None:
        """Where a profiler range the predict stage models begins or ends (RANGE_BEGIN_OP / RANGE_END_OP)."""
        if self.recording:
            self._record_marker(op, {"name": name})

    def record_engine_nodes(self, nodes: int) -> None:
        """After a backward: the autograd nodes that ran without dispatching an op (each costs the engine
        host time all the same), as a host-only marker."""
        with_ops = 0
        for op in reversed(self.ops):  # this backward's ops: back to the forward, or to the previous marker
            if op.phase != "backward" or op.op == ENGINE_NODES_OP:
                break
            with_ops += "node" in op.tags
        self._record_marker(ENGINE_NODES_OP, {"nodes": max(nodes - with_ops, 0)}, phase="backward", module="")
        self.in_place.backward_done()

    def record_stream_use(self, storage: int, stream: int) -> None:
        """tensor.record_stream(stream) (RECORD_STREAM_OP): no kernel; the hazard analysis reads it."""
        self._record_marker(RECORD_STREAM_OP, {"storage": storage, "stream": stream})

    def record_step_end(self) -> None:
        """The step returned: the model's Python since its last op (STEP_END_OP), in that op's phase; no module
        or source line of its own (the capture's caller is on the stack now, not the model's code)."""
        self._record_marker(STEP_END_OP, {}, phase=self.ops[-1].phase if self.ops else None, module="",
                            source="")
        self._after_backward = False
        # no script call runs past the step (one that raised, its error caught, left its module hook unrun)
        self._script_depth, self._script_started = 0, False

    def script_call(self, delta: int) -> None:
        """A TorchScript module's call begins (+1) or returns (-1): the ops between run its graph."""
        if self._script_depth == 0:
            self._script_started = False
        self._script_depth = max(self._script_depth + delta, 0)

    def record_serialization(self, nbytes: int, storages: int) -> None:
        """torch.save's serialization of `storages` storages of `nbytes` bytes on the host (TORCH_SAVE_OP), after
        their device-to-host copies."""
        if self.recording:
            self._record_marker(TORCH_SAVE_OP, {"bytes": nbytes, "storages": storages})

    def record_host_sync(self, kind: str) -> None:
        """A sync that does not pass through aten: torch.cuda.synchronize, tolist, numpy, printing."""
        self._record_marker(f"{HOST_OP_PREFIX}{kind}", {}, sync=kind)

    def _record_marker(self, op: str, args: dict, stream: int | None = None, sync: str | None = None,
                       phase: str | None = None, module: str | None = None, tags: tuple[str, ...] = ("host",),
                       source: str | None = None) -> None:
        """A host-only record, with the model's Python since the previous op (its own time is ours)."""
        self.clock.ours_begin()
        python_us, torch_calls, modules, lines = self.clock.take()
        if self.clock.take_inside_compiled():
            tags += (INSIDE_COMPILED_TAG,)
        self.torch_calls.append(torch_calls)
        self.ops.append(OpRecord(
            index=len(self.ops), op=op, args=args, outputs=(), tags=tags,
            phase=self._step_phase(self._phase_of()) if phase is None else phase,
            module=self._module_of() if module is None else module,
            source=current_source() if source is None else source, sync=sync,
            python_us=python_us, modules=modules, python_lines=lines,
            stream=self.current_stream if stream is None else stream,
        ))
        self.clock.ours_end()

    def forget_weak_refs(self, t: torch.Tensor) -> None:
        """Drop the recorder's weak references to `t` (value hints, bool and fill hints): swap_tensors, which
        Module._apply uses, refuses a tensor that has any."""
        self.hints.drop(t)
        self._bool_hint.pop(t, None)
        self._check_hint.pop(t, None)
        self._fill_mean.pop(t, None)

    # -- sync points -----------------------------------------------------------------------------------
    def _note(self, text: str) -> None:
        self.notes.add(text)

    def note_line(self) -> str:
        """The line a note names: the innermost user frame; in backward, where no user code runs (the engine
        runs a formula, capture/real_backward.py one of ours), the forward op's line; else "set-up"."""
        source = current_source()
        if not source and torch._C._current_graph_task_id() != -1:
            origin = self._backward_origin()
            source = origin[0] if origin else ""
        return source or "set-up"

    def _scalar(self, func, args, kwargs):
        (t,) = args[:1]
        constant = getattr(t, "constant", None)
        if constant is None:
            constant = self.hints.use(t)  # a value the host knows, or the capture's stated guess for it
        if constant is not None:  # FakeTensorMode kept the real value of a small constant: use it
            # .item() reads a one-element tensor of any shape as a number
            number = as_python(constant, as_number=True)
            value = number if func is aten._local_scalar_dense.default else bool(number)
        elif self._parents and self.ops[self._parents[-1]].op in FILL_VALUE_READS:
            value = False if t.dtype == torch.bool else 0  # only written, never decides work: no note
        else:
            value = self._unknown_read(func, t)
        return value, ("item" if device_type(t) == "cuda" else None)

    def _equal(self, func, args, kwargs):
        a, b = self.hints.use(args[0]), self.hints.use(args[1])
        if a is not None and b is not None:
            return as_python(a) == as_python(b), ("item" if _on_gpu(args, kwargs) else None)
        if b is not None and args[0] in self._check_hint:  # ATen's is_scalar_tensor_true(a comparison)
            value = self._check_hint[args[0]] == bool(as_python(b))
            self._note(f"a library's range check on GPU values at {current_source() or 'set-up'}: assumed it "
                       f"passes (a comparison's placeholder at a typical value, {TYPICAL_VALUE})")
            return value, ("item" if _on_gpu(args, kwargs) else None)
        source = self.note_line()
        stated = self._stated_read("torch.equal on GPU tensors", source)
        if stated is None:
            self._note(f"torch.equal on GPU tensors at {source}: assumed True; {how_to_state(source)}")
        return True if stated is None else bool(stated), ("item" if _on_gpu(args, kwargs) else None)

    def _allclose(self, func, args, kwargs):
        """torch.allclose where it was not decomposed (BOOL_CHECKS): from the values FakeTensor kept, else the
        stated value for its line or True (a check that the tensors agree: the answer that lets the code go on)."""
        sync = "item" if _on_gpu(args, kwargs) else None
        a, b = (getattr(t, "constant", None) for t in args[:2])
        if a is not None and b is not None:
            with _disable_current_modes():
                return bool(func(a, b, *args[2:], **kwargs)), sync
        source = self.note_line()
        stated = self._stated_read("torch.allclose", source)
        if stated is None:
            self._note(f"torch.allclose at {source}: assumed True; {how_to_state(source)}")
        return True if stated is None else bool(stated), sync

    def _stated_read(self, what: str, source: str):
        """The value the user stated (--assume) or a known library loop gives a read at `source`, noted; or
        None (host_reads.py)."""
        stated = self.host_reads.value(source)
        if stated is None:
            return None
        value, how = stated
        self._note(f"{what} at {source}: {how}")
        return value

    def _unknown_read(self, func, t: torch.Tensor):
        """A value read back from the GPU that no hint decides: the user's statement for its line, a known
        library loop's, or the dtype's placeholder; each is a note with the line (host_reads.py)."""
        source = self.note_line()
        as_bool = t.dtype == torch.bool or func is aten.is_nonzero.default
        kind = "bool" if as_bool else "float" if t.dtype.is_floating_point or t.dtype.is_complex else "integer"
        stated = self._stated_read(f"{kind} read back from the GPU", source)
        if stated is not None:
            return bool(stated) if as_bool else stated
        if as_bool:
            value = self._bool_hint.get(t, False)
            self._note(f"bool read back from the GPU at {source}: assumed {value} (all/eq -> True, "
                       f"any/ne/other -> False); {how_to_state(source)}")
        elif t in self._fill_mean:
            fill, value = self._fill_mean[t]
            self._note(f"{fill} read back at {source}: random value assumed {value:g}, its mean")
        elif kind == "float":
            value = 1.0
            self._note(f"float read back from the GPU at {source}: assumed 1.0; {how_to_state(source)}")
        else:
            value = 1
            self._note(f"integer read back from the GPU at {source}: assumed 1; {how_to_state(source)}")
        return value

    def copy_to_host(self, tensor: torch.Tensor, kind: str) -> None:
        """A host read outside aten (tolist) of a GPU tensor: torch copies it to the CPU first
        (torch/csrc/utils/tensor_list.cpp); the copy is the sync point, labelled with the read's kind."""
        self._host_read_kind = kind
        try:
            tensor.to("cpu")
        finally:
            self._host_read_kind = None

    def _ctc_lengths(self, func, args, kwargs):
        """CTC loss with its lengths in tensors. On CUDA, ctc_loss reads them back to the host (LossCTC.cpp:
        `.to(kCPU)`, then the IntArrayRef overload), so the host waits; its outputs' size depends on the longest
        target. Fake tensors hold no lengths: every input is taken as long as log_probs, every target as long
        as the padded targets (2-D), or an equal share of them (1-D)."""
        log_probs, targets, input_lengths, target_lengths = args[:4]
        steps, batch = log_probs.shape[0], (log_probs.shape[1] if log_probs.dim() == 3 else 1)
        longest = targets.shape[-1] if targets.dim() == 2 else targets.numel() // max(batch, 1)
        self._note("CTC lengths read back from the GPU: assumed full (inputs as long as log_probs, targets as "
                   "long as the padded targets)")
        out = aten._ctc_loss.default(log_probs, targets, [steps] * batch, [longest] * batch, *args[4:], **kwargs)
        on_gpu = any(isinstance(t, torch.Tensor) and device_type(t) == "cuda" for t in (input_lengths, target_lengths))
        return out, ("ctc lengths" if on_gpu else None)

    def _linalg_info(self, func, args, kwargs):
        """A solver whose info tensor is read back on the host (LINALG_INFO_CHECK and the sets by it)."""
        out = func(*args, **kwargs)
        checks = func in LINALG_ALWAYS_CHECKED or func is LINALG_INFO_CHECK or bool(kwargs.get("check_errors"))
        return out, ("linalg info" if checks and _on_gpu(args, kwargs) else None)

    def _host_read(self, func, args, kwargs):
        """An op of HOST_READS: a sync when its condition holds on a CUDA input."""
        out = func(*args, **kwargs)
        kind, reads = HOST_READS[func]
        return out, (kind if device_type(args[0]) == "cuda" and reads(args, kwargs) else None)

    def _normal_tensor_std(self, func, args, kwargs):
        """torch.normal with a CUDA tensor std (NORMAL_TENSOR_STD): its std checks recorded before it, each a
        min, a compare and a sync point; the op itself as one (its sampling kernels). The second check runs
        after the output is allocated on the GPU; recorded before it, the peak can read up to two 512-byte
        blocks low."""
        index = NORMAL_TENSOR_STD[func]
        std = args[index] if len(args) > index else kwargs["std"]
        if self.recording and device_type(std) == "cuda" and std.numel() > 0:
            self._note(f"torch.normal with a tensor std at {current_source() or 'set-up'}: CUDA checks std >= 0 "
                       f"on the host {NORMAL_STD_CHECKS} times per call (a sync point each; "
                       "torch.randn_like(std) * std + mean samples without them)")
            with self:  # the checks' ops come back through this recorder
                for _ in range(NORMAL_STD_CHECKS):
                    passes = std.min().ge(0)
                    self._record(aten._local_scalar_dense.default, (passes,), {}, True, "normal std check")
                    del passes
        return func(*args, **kwargs), None

    def _histc(self, func, args, kwargs):
        """torch.histc with min == max (the default 0, 0) reads the input's min and max back to the host
        (`self.min().cpu()`, `self.max().cpu()`: _histc_cuda_template, aten/src/ATen/native/cuda/SummaryOps.cu)."""
        out = func(*args, **kwargs)
        t = args[0]
        low = args[2] if len(args) > 2 else kwargs.get("min", 0)
        high = args[3] if len(args) > 3 else kwargs.get("max", 0)
        reads_range = low == high and t.numel() > 0 and device_type(t) == "cuda"
        return out, ("histc range" if reads_range else None)

    def _grouped_mm(self, func, args, kwargs):
        a, b = args[0], args[1]
        out_dtype = (args[4] if len(args) > 4 else kwargs.get("out_dtype")) or a.dtype
        try:
            out = func(*args, **kwargs)
        except RuntimeError:
            # torch's meta (_meta_grouped_mm_common) takes bf16 only (2.14: and fp16 where supported), where CUDA
            # runs other dtypes by its fallback (GroupedMMUtils.h): transformers' MoE experts call it in fp32
            # (Mixtral, Qwen2-MoE training in fp32 failed to capture). The output is the bf16 call's shape, in
            # the operands' dtype. (Told by the dtype: the builds word the refusal differently.)
            if a.dtype == torch.bfloat16 or a.dtype != b.dtype:
                raise
            as_bf16 = [t.to(torch.bfloat16) if t is a or t is b else t for t in args[:4]]
            out = func(*as_bf16, **{k: v for k, v in kwargs.items() if k != "out_dtype"}).to(out_dtype)
        offs = args[2] if len(args) > 2 else kwargs.get("offs")
        fast = (a.dtype == b.dtype == out_dtype == torch.bfloat16
                and self.capability[0] in GROUPED_MM_FAST_ARCH_MAJORS)
        on_host = offs is not None and not fast and device_type(a) == "cuda"
        return out, ("grouped_mm offsets" if on_host else None)

    def _pin_memory(self, func, args, kwargs):
        out = aten.clone.default(args[0])
        self._pinned[out] = True
        return out, None

    def _is_pinned(self, func, args, kwargs):
        return bool(self._pinned.get(args[0], False)), None

    def _copy(self, func, args, kwargs):
        """Copies between host and device. As CUDA does them: a pageable host buffer makes the host wait for
        the stream first (CUDA runtime docs, "API synchronization behavior"), and torch waits after any copy
        without non_blocking=True; only a pinned buffer with non_blocking=True leaves the CPU free.
        non_blocking=True to the host allocates pinned memory in torch's _to_copy."""
        out = func(*args, **kwargs)
        if func is aten._to_copy.default:
            src, dst = args[0], out
            non_blocking = bool(kwargs.get("non_blocking", False))
        else:
            dst, src = args[0], args[1]
            non_blocking = bool(args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
        if not isinstance(src, torch.Tensor) or not isinstance(dst, torch.Tensor):
            return out, None
        if src.numel() == 0:  # copy_impl returns before any device work (aten/src/ATen/native/Copy.cpp)
            return out, None
        src_device, dst_device = device_type(src), device_type(dst)
        if src_device == dst_device or "cuda" not in (src_device, dst_device):
            return out, None
        if src_device == "cuda":  # to the host
            pinned = non_blocking if func is aten._to_copy.default else bool(self._pinned.get(dst, False))
            self._pending_tags = ("pinned",) if pinned else ()
            return out, (None if pinned and non_blocking else (self._host_read_kind or "cpu"))
        pinned = bool(self._pinned.get(src, False))
        self._pending_tags = ("pinned",) if pinned else ()
        if pinned and non_blocking:
            return out, None
        return out, ("h2d blocking" if pinned else "h2d pageable")
