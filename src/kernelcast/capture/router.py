"""A TorchFunctionMode that sits above autograd during a capture.

It does what the dispatch-level recorder cannot (scaled_dot_product_attention is routed below it, at the
dispatcher: capture/attention.py):
- notes where each forward op came from on its autograd node, so backward ops can name their forward line;
- turns host reads that bypass aten (`tolist`, `numpy`, printing) into sync points;
- reduces ctc_loss over integer lengths in Python, as its C++ formula does from host memory;
- refuses backward cleanly when this process cannot run autograd on fake CUDA tensors.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.overrides import TorchFunctionMode

from kernelcast.errors import CaptureError

from . import fused_inference
from .dynamic_shapes import as_python
from .host_clock import HostClock
from .source import current_source

_CTC_SIGNATURE = inspect.signature(torch.nn.functional.ctc_loss)
# nn.TransformerEncoder's inference fast path (torch/nn/modules/transformer.py) converts a padded batch to a nested
# tensor when its src_key_padding_mask is left-aligned, which only the mask's values say
# (torch._nested_tensor_from_mask_left_aligned, a CUDA kernel reading the mask) and the nested tensor's sizes
# follow them too. A capture without the values answers "not left-aligned": the encoder skips the conversion and
# its layers run on the padded batch, as the GPU runs them for a mask that is not left-aligned.
NESTED_MASK_NOTE = ("nn.TransformerEncoder's inference fast path turns a padded batch into a nested tensor when "
                    "src_key_padding_mask is left-aligned (padding only at the end), which only the mask's values "
                    "tell: captured as not left-aligned, whatever the mask, since kernelcast cannot capture the "
                    "nested-tensor path (the layers run on the padded batch); with a left-aligned mask the GPU "
                    "skips the padded positions and does less work (TransformerEncoder(..., "
                    "enable_nested_tensor=False) runs as captured)")
# PyTorch's fused inference paths for its attention modules are taken only where torch.overrides.
# has_torch_function finds no handler on the module's tensors (torch/nn/modules/activation.py
# MultiheadAttention.forward, transformer.py TransformerEncoderLayer.forward and TransformerEncoder.forward); the
# capture's own torch-function mode is such a handler. That check comes after every other condition of the path
# but the tensors' devices, autograd and make_fx tracing: reached from those forwards with no tensor needing a
# gradient, the GPU takes the fused path. For the two layers below the capture answers "no handler" and takes it
# too, their fused ops routed to their CUDA chains (capture/fused_inference.py); TransformerEncoder's nested batch
# is not taken (NESTED_MASK_NOTE).
FAST_PATHS = {
    "MultiheadAttention.forward": "nn.MultiheadAttention (torch._native_multi_head_attention)",
    "TransformerEncoderLayer.forward": "nn.TransformerEncoderLayer (torch._transformer_encoder_layer_fwd)",
}
FAST_PATH_NOTE = ("PyTorch runs its fused inference path on the GPU here (eval mode, no autograd) for {modules}; "
                  "captured as its CUDA kernels run it (the packed qkv projection, the attention kernel or its own "
                  "bmm-softmax-bmm chain, the fused bias and activation GEMMs)")
MASK_CHECK_SYNC = "padding mask check"  # its sync point's kind (predict.SYNC_ADVICE says what to do)
ORIGIN_KEY = "kernelcast_origin"  # autograd Node.metadata key: (source, module) of the forward op


class Router(TorchFunctionMode):
    def __init__(self, arch: str, module_of: Callable[[], str], on_sync: Callable[[str], None],
                 backward_error: str | None) -> None:
        super().__init__()
        self.arch = arch
        self._module_of = module_of
        self._on_sync = on_sync
        self._backward_error = backward_error
        self.tag_origins = False  # the session turns it on while recording
        self.on_backward: Callable[[int], None] | None = None  # told how many autograd nodes a backward ran
        # A post hook for every autograd node of a backward (the recorder's CudaInPlace.outputs_ready).
        self.node_post_hook: Callable | None = None
        self.clock = HostClock()  # the recorder's, set by the session: every torch call is the capture's time
        # Set by the session: the recorder's value hints, and its copy of a GPU tensor to the host for a read.
        self.hints: Any = None
        self.copy_to_host: Callable[[torch.Tensor, str], None] | None = None
        self._routes: dict[Any, Callable] = {
            torch.nn.functional.ctc_loss: self._ctc_loss,
            torch.tensor_split: self._tensor_split,
            torch.Tensor.tensor_split: self._tensor_split,
            torch.Tensor.backward: self._backward,
            torch.autograd.backward: self._backward,
            torch.Tensor.__repr__: self._host_read("print"),
            torch.Tensor.__format__: self._host_read("print"),
            torch._nested_tensor_from_mask_left_aligned: self._mask_not_left_aligned,
            **fused_inference.routes(arch),
        }
        self.notes: set[str] = set()  # what the routes assumed, for the capture's notes
        self._fast_paths: set[str] = set()  # FAST_PATHS' modules the GPU would run fused (has_torch_function_probe)

    def add_routes(self, routes: dict[Any, Callable]) -> None:
        """More functions to send elsewhere (the session adds the RNN ones, capture/rnn.py)."""
        self._routes.update(routes)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # Dynamo traces the torch-function modes on the stack into the graph it compiles; the clock's thread
        # reads and the routes are skipped functions there, so each would be a graph break of ours, not the
        # user's. Under compilation the call passes straight through (Dynamo folds is_compiling() to True).
        if torch.compiler.is_compiling():
            return func(*args, **(kwargs or {}))
        self.clock.torch_calls += 1
        self.clock.ours_begin()
        try:
            return self._call(func, args, kwargs or {})
        finally:
            self.clock.ours_end()

    def _call(self, func, args, kwargs):
        route = self._routes.get(func)
        if route is None and not self.tag_origins:  # the common case, kept short: it runs for every call
            return func(*args, **kwargs)
        out = route(func, args, kwargs) if route is not None else func(*args, **kwargs)
        if (self.tag_origins and isinstance(out, torch.Tensor) and out.requires_grad and torch.is_grad_enabled()
                and torch._C._current_graph_task_id() == -1):
            self._tag(out)
        return out

    def _tag(self, out: torch.Tensor) -> None:
        # Reading grad_fn raises for a no_grad view that was since modified in place; such a tensor has no
        # node of its own worth naming, so it is skipped rather than failing the user's code.
        try:
            node = out.grad_fn
        except RuntimeError:
            return
        if node is not None and ORIGIN_KEY not in node.metadata:
            tag_new_nodes(node, (current_source(), self._module_of()))

    def _ctc_loss(self, func, args, kwargs):
        """ctc_loss with lengths as integers and the mean reduction: its C++ formula makes a tensor of the
        target lengths from host memory (at::tensor, LossCTC.cpp apply_loss_reduction), which a fake tensor
        cannot hold. The same reduction, in Python: the per-sample losses over the lengths copied to the
        device (clamped to 1), averaged. Lengths given as CPU tensors (F.ctc_loss's documented form) are read to
        host memory on a GPU and take the same path (LossCTC.cpp ctc_loss), where under the capture the
        subclass branch divided the CUDA losses by the CPU lengths: "found at least two devices"."""
        bound = _CTC_SIGNATURE.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        lengths = a["target_lengths"]
        on_host = not isinstance(lengths, torch.Tensor) or lengths.device.type == "cpu"
        if a["reduction"] != "mean" or not on_host:
            return func(*args, **kwargs)
        losses = func(a["log_probs"], a["targets"], a["input_lengths"], lengths, blank=a["blank"],
                      reduction="none", zero_infinity=a["zero_infinity"])
        if isinstance(lengths, torch.Tensor):
            lengths = lengths.to(dtype=losses.dtype, device=losses.device)
        else:
            lengths = torch.tensor(list(lengths), dtype=losses.dtype, device=losses.device)
        return (losses / lengths.clamp_min(1)).mean()

    def _tensor_split(self, func, args, kwargs):
        """tensor_split with its indices or sections as a tensor on the host: the C++ overload reads the tensor's
        data there (TensorShape.cpp), which a fake tensor does not hold ("its data is not allocated"), and calls
        the integer overload with them. The values go in as Python ints, from what FakeTensorMode kept of a
        literal or the recorder's value hints; unknown, n indices are taken as evenly spaced, with a note."""
        names = ("tensor_indices_or_sections", "indices_or_sections", "indices", "sections")
        tensor = args[0] if args else kwargs.get("input", kwargs.get("self"))
        split = args[1] if len(args) > 1 else next((kwargs[k] for k in names if k in kwargs), None)
        if not isinstance(split, FakeTensor) or split.device.type != "cpu" or tensor is None:
            return func(*args, **kwargs)  # (a real tensor's data the C++ overload can read)
        rest = {k: v for k, v in kwargs.items() if k not in (*names, "input", "self")}
        dim = args[2] if len(args) > 2 else rest.pop("dim", 0)
        known = getattr(split, "constant", None)
        if known is None and self.hints is not None:
            known = self.hints.use(split)
        if known is not None:
            values = as_python(known)
        elif split.dim() == 0:
            raise CaptureError("torch.tensor_split with a number of sections in a tensor whose value the capture "
                               "does not know: pass it as an int")
        else:
            size, count = tensor.shape[dim], split.numel()
            values = [size * (i + 1) // (count + 1) for i in range(count)]
            self.notes.add(f"tensor_split at {current_source() or 'set-up'}: its {count} split indices are data "
                           f"the capture does not know; assumed evenly spaced")
        return func(tensor, values, dim, **rest)

    def has_torch_function_probe(self, real: Callable[[Any], bool]) -> Callable[[Any], bool]:
        """torch.overrides.has_torch_function, but "no handler" where an attention layer's forward asks it on the
        way to PyTorch's fused inference path (FAST_PATHS) with CUDA tensors and none needing a gradient:
        the capture then takes the path as the GPU does (the router's fused_inference routes)."""
        def probe(args) -> bool:
            # Dynamo traces the modules' forwards, and this with them: under compilation the check is torch's
            # own, in the form Dynamo answers itself (its handler table, built on first use, may have been built
            # while this patch stood, keyed by it and not by the builtin; has_torch_function_variadic is not
            # patched). sys._getframe would be a graph break of ours, not the user's.
            if torch.compiler.is_compiling():
                return torch.overrides.has_torch_function_variadic(*args)
            caller = sys._getframe(1).f_code
            path = getattr(caller, "co_qualname", caller.co_name)
            if path in FAST_PATHS and caller.co_filename.endswith(("activation.py", "transformer.py")):
                tensors = [t for t in args if isinstance(t, torch.Tensor)]
                if all(t.device.type == "cuda" for t in tensors) and not (
                        torch.is_grad_enabled() and any(t.requires_grad for t in tensors)):
                    self._note_fast_path(FAST_PATHS[path])
                    return False
            return real(args)

        return probe

    def _note_fast_path(self, path: str) -> None:
        """One note naming every module whose fused path the capture could not take."""
        if path in self._fast_paths:
            return
        self.notes.discard(FAST_PATH_NOTE.format(modules=", ".join(sorted(self._fast_paths))))
        self._fast_paths.add(path)
        self.notes.add(FAST_PATH_NOTE.format(modules=", ".join(sorted(self._fast_paths))))

    def _mask_not_left_aligned(self, func, args, kwargs) -> bool:
        """The check's kernels as the GPU runs them, its read-back as a sync point, and the answer "no".
        NestedTensor_nested_tensor_from_mask_left_aligned (aten/src/ATen/native/nested/
        NestedTensorTransformerFunctions.cpp) appends a zero column to the mask, takes each row's first zero
        (argmin over the int copy) and its count of ones (the last column of a cumsum), and compares the two with
        at::equal, which on CUDA is eq, all and item (aten/src/ATen/native/cuda/Equal.cpp): a host read."""
        mask = args[1] if len(args) > 1 else kwargs.get("mask")  # (t, mask): native_functions.yaml
        if isinstance(mask, torch.Tensor) and mask.dim() == 2 and mask.device.type == "cuda":
            pad = torch.zeros((mask.shape[0], 1), dtype=mask.dtype, device=mask.device)
            first_zero = torch.cat([mask, pad], 1).to(torch.int32).argmin(1)
            ones = mask.cumsum(1).select(1, mask.shape[1] - 1)
            torch.eq(ones, first_zero.to(ones.dtype)).all()
            self._on_sync(MASK_CHECK_SYNC)
        self.notes.add(NESTED_MASK_NOTE)
        return False

    def _backward(self, func, args, kwargs):
        if self._backward_error is not None:
            raise CaptureError(self._backward_error)
        if not self.tag_origins or self.on_backward is None:
            return func(*args, **kwargs)
        roots = args[0] if args else kwargs.get("tensors")
        nodes = graph_nodes(roots if isinstance(roots, (list, tuple)) else (roots,))
        hook = self.node_post_hook
        handles = [node.register_hook(hook) for node in nodes if hook is not None and not hasattr(node, "variable")]
        try:
            out = func(*args, **kwargs)
        finally:
            for handle in handles:
                handle.remove()
        self.on_backward(len(nodes))
        return out

    def host_read_patches(self) -> dict[str, Callable]:
        """tolist() and numpy() are C methods that bypass __torch_function__; the session patches them on
        FakeTensor for the length of the capture with these."""
        def method(kind: str) -> Callable:
            read = self._host_read(kind)
            return lambda tensor, *args, **kwargs: read(None, (tensor, *args), kwargs)

        return {"tolist": method("tolist"), "numpy": method("numpy")}

    def _host_read(self, kind: str) -> Callable:
        def read(func, args, kwargs):
            tensor = args[0]
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "cuda":
                if kind == "tolist" and self.copy_to_host is not None:
                    self.copy_to_host(tensor, kind)  # tolist copies to the host first: that copy is the sync
                else:
                    self._on_sync(kind)
            return _placeholder_read(kind, tensor, self._known_values(tensor))

        return read

    def _known_values(self, tensor: torch.Tensor) -> torch.Tensor | None:
        """The real values behind a fake tensor where the capture has them: a small host constant, or a
        value hint (dynamic_shapes.py)."""
        constant = getattr(tensor, "constant", None)
        if constant is None and self.hints is not None:
            constant = self.hints.use(tensor)
        return constant


def _placeholder_read(kind: str, tensor: torch.Tensor, values: torch.Tensor | None) -> Any:
    """What the host gets back: the known values, else zeros of the right shape (fake tensors hold no data)."""
    import numpy as np

    if kind == "tolist":
        if values is not None:
            return as_python(values)
        return np.zeros(tuple(tensor.shape)).tolist() if tensor.dim() else 0
    if kind == "numpy":
        if values is not None:
            return np.array(as_python(values))
        return np.zeros(tuple(tensor.shape), dtype=np.float32)
    return f"tensor(shape={tuple(tensor.shape)}, dtype={tensor.dtype}, device='{tensor.device}')"


MAX_NODES_PER_CALL = 256  # one call (a linear under autocast, say) creates a handful of autograd nodes


def tag_new_nodes(root, origin: tuple[str, str]) -> None:
    """Tag `root` and the nodes behind it that this call created (those not tagged yet), so every backward
    op of, e.g., a linear layer (view, mm, cast) names the forward line."""
    stack, seen = [root], 0
    while stack and seen < MAX_NODES_PER_CALL:
        node = stack.pop()
        meta = node.metadata
        if ORIGIN_KEY in meta:
            continue
        meta[ORIGIN_KEY] = origin
        seen += 1
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None and not hasattr(nxt, "variable"))


def origin_of_current_backward_node() -> tuple[str, str] | None:
    node = torch._C._current_autograd_node()
    if node is None:
        return None
    return node.metadata.get(ORIGIN_KEY)


def graph_nodes(roots) -> list:
    """Autograd nodes reachable from the roots' grad_fn: what the engine visits in backward, including
    nodes that dispatch no op (AccumulateGrad stealing a fresh gradient, views' backward)."""
    seen: dict = {}
    stack = [t.grad_fn for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen[node] = None
        stack.extend(fn for fn, _ in node.next_functions if fn is not None)
    return list(seen)


def count_graph_nodes(roots) -> int:
    return len(graph_nodes(roots))
