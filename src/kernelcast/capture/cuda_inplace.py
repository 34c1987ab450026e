"""Backward work that CUDA does in place but a capture would see done out of place.

Autograd picks out-of-place variants for tensor subclasses, and it counts any active TorchDispatchMode as one
(at::isTensorSubclassLike returns true when c10::impl::dispatch_mode_enabled(), ATen/TensorSubclassLikeUtils.h).
Under the capture's modes, then:
- the engine sums gradients that reach one input along several paths out of place (`old + new`;
  torch/csrc/autograd/input_buffer.cpp, InputBuffer::accumulate), where a GPU run adds into the buffer it
  already holds (`old.add_(new)`: grad mode is off, the buffer is dense and the engine holds its only
  reference);
- backward formulas in torch/csrc/autograd/FunctionsManual.cpp take their subclass branch: index_backward
  calls zeros.index_put(...) instead of at::_index_put_impl_(zeros, ..., accumulate=true, unsafe=true),
  value_selecting_reduction_backward (topk, max/min/kthvalue/mode/median/sort along a dim) zeros.scatter(...)
  instead of scatter_, gather_backward zeros.scatter_add(...) instead of scatter_add_, masked_select's backward
  (masked_scatter_backward) zeros.masked_scatter(...) instead of masked_scatter_, index_select's backward
  (index_select_backward_symint) zeros.index_add(...) instead of index_add_, take's (take_backward)
  zeros.put(...) instead of put_, trace's (trace_backward_symint) zeros.index_fill(...) instead of index_fill_
  (aten/src/ATen/native/TensorAdvancedIndexing.cpp, ReduceOps.cpp; FunctionsManual.cpp).
The functional variants clone their input first (a kernel, and memory, a GPU run does not spend), so the
capture runs and records the in-place op CUDA runs instead. The formulas' own zero tensors are recognised as
ones made by the same autograd node (a Python-defined Function is left as written: its code is what runs).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense
from torch.utils.weak import WeakIdKeyDictionary

aten = torch.ops.aten

# Factories of the zero tensors the backward formulas above write into.
ZERO_FACTORIES = {aten.zeros.default, aten.new_zeros.default, aten.zeros_like.default}


def _index_put_impl(args: tuple, kwargs: dict) -> tuple[Any, tuple, dict] | None:
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    if not accumulate:
        return None  # index_backward always accumulates; anything else is the user's own index_put
    return aten._index_put_impl_.default, (args[0], args[1], args[2], True, True), {}


def _same_args(inplace) -> Callable[[tuple, dict], tuple[Any, tuple, dict]]:
    return lambda args, kwargs: (inplace, args, kwargs)


# Out-of-place op of a subclass branch -> the call CUDA makes.
SUBCLASS_BRANCHES: dict[Any, Callable[[tuple, dict], tuple[Any, tuple, dict] | None]] = {
    aten.index_put.default: _index_put_impl,
    aten.scatter.src: _same_args(aten.scatter_.src),
    aten.scatter_add.default: _same_args(aten.scatter_add_.default),
    aten.masked_scatter.default: _same_args(aten.masked_scatter_.default),
}
# ... and those rewritten only under the node whose formula has the branch: other formulas call the same
# out-of-place op on zeros of their own in both branches (index_reduce's prod backward,
# `zeros_like(self).index_add(...)`, ran as a copy and the add on an H100: OpInfo index_reduce.prod, 30 work items).
NODE_SUBCLASS_BRANCHES: dict[tuple[str, Any], Callable[[tuple, dict], tuple[Any, tuple, dict] | None]] = {
    ("IndexSelectBackward0", aten.index_add.default): _same_args(aten.index_add_.default),
    ("TakeBackward0", aten.put.default): _same_args(aten.put_.default),
    ("TraceBackward0", aten.index_fill.int_Tensor): _same_args(aten.index_fill_.int_Tensor),
}


NODE_BRANCH_OPS = frozenset(op for _, op in NODE_SUBCLASS_BRANCHES)


# References to a storage when one tensor holds it: the tensor, and the Python wrapper the check itself creates.
SOLE_OWNER_STORAGE_REFS = 2


def _sole_storage_owner(t: torch.Tensor) -> bool:
    """`v.storage().use_count() == 1` in can_accumulate_inplace, seen from Python (untyped_storage() adds a ref)."""
    try:
        return torch._C._storage_Use_Count(t.untyped_storage()._cdata) <= SOLE_OWNER_STORAGE_REFS
    except (RuntimeError, NotImplementedError):
        return False


def _builtin_node(node) -> bool:
    """A C++ autograd node (IndexBackward0, ...), not the backward of a Python torch.autograd.Function."""
    return node is not None and not isinstance(node, torch.autograd.function.BackwardCFunction)


class CudaInPlace:
    """Rewrites, as the recorder dispatches them, the backward calls that a GPU run makes in place."""

    def __init__(self) -> None:
        self._zeros_by_node = WeakIdKeyDictionary()  # zero tensors made in backward -> the node that made them
        self._outputs_ready: Any = None  # the node whose gradients the engine is now adding into its buffers

    def outputs_ready(self, grad_inputs=None, grad_outputs=None) -> None:
        """A post hook on each autograd node: the node's function has returned; what the engine dispatches
        under this node from now on is its own buffer accumulation."""
        self._outputs_ready = torch._C._current_autograd_node()

    def backward_done(self) -> None:
        self._outputs_ready = None

    def rewrite(self, func, args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
        """The call a GPU run makes in place of `func(*args, **kwargs)` (itself when the same)."""
        if torch._C._current_graph_task_id() == -1:
            return func, args, kwargs
        node = torch._C._current_autograd_node()
        if func is aten.add.Tensor and self._accumulates(node, args, kwargs):
            return aten.add_.Tensor, args, kwargs
        branch = SUBCLASS_BRANCHES.get(func)
        if branch is None and func in NODE_BRANCH_OPS and node is not None:
            branch = NODE_SUBCLASS_BRANCHES.get((node.name(), func))
        if branch is not None and args and _builtin_node(node) and self._zeros_by_node.get(args[0]) is node:
            return branch(args, kwargs) or (func, args, kwargs)
        return func, args, kwargs

    def note(self, func, out) -> None:
        """Remember zero tensors made in backward, by node."""
        if func in ZERO_FACTORIES and isinstance(out, torch.Tensor) and torch._C._current_graph_task_id() != -1:
            self._zeros_by_node[out] = torch._C._current_autograd_node()

    def _accumulates(self, node, args: tuple, kwargs: dict) -> bool:
        """InputBuffer::accumulate's in-place case (can_accumulate_inplace): grad mode off, and the buffer on the
        left dense and the sole owner of its memory (a view, e.g. one of unbind's gradients, shares its base's
        storage: out of place)."""
        if node is None or node is not self._outputs_ready or torch.is_grad_enabled() or len(args) < 2:
            return False
        old = args[0]
        return (isinstance(old, torch.Tensor) and isinstance(args[1], torch.Tensor) and old.layout == torch.strided
                and is_non_overlapping_and_dense(old) and kwargs.get("alpha", 1) == 1 and old.shape == args[1].shape
                and _sole_storage_owner(old))
