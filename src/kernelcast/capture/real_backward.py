"""Backward formulas whose branch for tensor subclasses is not what a GPU run executes: captured as CUDA runs them.

PyTorch's backward formulas test `isTensorSubclassLike` (ATen/TensorSubclassLikeUtils.h), which is true for a
FakeTensor and under any TorchDispatchMode, so a capture sees the formula written for subclasses. Where that branch
differs only in-place against out-of-place, capture/cuda_inplace.py rewrites the call. Three formulas differ in
their work and in a sync point, and are routed here, above autograd, to a torch.autograd.Function whose backward
is the formula's other branch, written from the source:

- cumprod (aten/src/ATen/native/ReduceOps.cpp, cumprod_backward): `w = output * grad`, `is_zero = input == 0`,
  then `is_zero.any().item()` (a sync point) and, where no element is zero, `reversed_cumsum(w, dim).div(input)`
  (a flip, a cumsum, a flip, a div). The subclass branch loops over `dim`: a cumprod, a cat, a prod, a mul and a
  sum per element along it (O(n) kernels, O(n^2) work), then a stack. Measured on an H100 (torch 2.11, OpInfo
  cumprod, 5 x 5 x 5 fp32, validation/probes/opinfo_items/opinfo_items_run1.json.gz): 10 work items for the
  forward and backward (the scan, the gradient's fill, mul, eq, any, the copy to the host, flip, scan, flip,
  div); the subclass branch was priced at 39.
- prod over all elements (FunctionsManual.cpp, prod_backward): `(input == 0).nonzero()` (a sync point), then,
  where it is empty, `grad * (result / input)`; the subclass branch runs prod_safe_zeros_backward (a cat, two
  cumprods, two flips, ...) with no sync. Measured: 9 items (prod, fill, eq, nonzero's four and its copy, div, mul).
- prod along a dim (the same file): `(input == 0).sum(dim, true).sum().item()` (a sync point), then
  `grad * (result / input)`. Measured: 9 items.

Where the input does hold zeros the GPU takes a third path (masked or O(n)); the capture cannot see values and
keeps to the no-zero one, the common case, which is what a read of `any()` or `nonzero` with no value known
gives. Compiled regions are not routed (the router passes calls straight through while Dynamo traces): there
AOTAutograd traces the formula with fake tensors, so the subclass branch is what Inductor compiles and runs.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes

PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter, FakeTensor)
NO_ZERO_NOTE = ("{what}'s backward at {where}: its input assumed to hold no zero (the GPU's common path; with zeros "
                "it takes another, and this read's value decides which)")


class _Context:
    """What the backward formulas below need from the capture: its value hints (capture/dynamic_shapes.py) and
    the line a note names (Recorder.note_line)."""

    hints: Any = None
    where: Callable[[], str] = staticmethod(lambda: "set-up")

    @classmethod
    def assume_none(cls, what: str, t: torch.Tensor, count_only: bool = False) -> None:
        """The read of `t` (a count, a flag, or a mask's selection) answers "no zero", with a note."""
        if cls.hints is None:
            return
        why = NO_ZERO_NOTE.format(what=what, where=cls.where())
        if count_only:
            cls.hints.set_count(t, 0, why)
        else:
            with _disable_current_modes():  # a real CPU value, made outside the capture's modes
                value = torch.zeros((), dtype=t.dtype)
            cls.hints.set(t, value, frozenset({why}))


def reset() -> None:
    """Forget the capture's hints and note line (the session calls it as the capture ends)."""
    _Context.hints, _Context.where = None, staticmethod(lambda: "set-up")


def _needs_real_backward(x: Any) -> bool:
    """A plain (fake) CUDA floating tensor that needs a gradient, outside torch.func's transforms: a tensor
    subclass of another kind (DTensor) takes the subclass branch on a GPU too, and functorch's wrappers need
    autograd.Function.setup_context."""
    return (type(x) in PLAIN_TENSORS and x.requires_grad and torch.is_grad_enabled() and x.is_floating_point()
            and x.device.type == "cuda" and not torch._C._are_functorch_transforms_active())


class CumprodAsCuda(torch.autograd.Function):
    """cumprod with cumprod_backward's non-subclass branch (module docstring)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int, dtype: torch.dtype | None) -> torch.Tensor:
        out = torch.ops.aten.cumprod.default(x, dim, dtype=dtype)
        ctx.save_for_backward(x, out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, out = ctx.saved_tensors
        dim = ctx.dim % max(x.dim(), 1)
        grad = grad.to(x.dtype)
        if x.numel() <= 1 or x.shape[dim] == 1:
            return grad, None, None
        w = out * grad
        is_zero = x == 0
        any_zero = is_zero.any()
        _Context.assume_none("cumprod", any_zero)
        any_zero.item()  # the host reads whether any element is zero (a sync point)
        return w.flip(dim).cumsum(dim).flip(dim).div(x), None, None


class ProdAsCuda(torch.autograd.Function):
    """prod over all elements with prod_backward's non-subclass branch (module docstring)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
        out = torch.ops.aten.prod.default(x, dtype=dtype)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, out = ctx.saved_tensors
        x = x.to(grad.dtype)  # derivatives.yaml: prod_backward(grad, self.to(grad.scalar_type()), result)
        if x.dim() == 0:
            return grad, None
        is_zero = x == 0
        _Context.assume_none("prod", is_zero, count_only=True)
        is_zero.nonzero()  # where the zeros are, read back to size the result (a sync point)
        return grad * (out / x), None


class ProdDimAsCuda(torch.autograd.Function):
    """prod along a dim with prod_backward's non-subclass branch (module docstring)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int, keepdim: bool, dtype: torch.dtype | None) -> torch.Tensor:
        out = torch.ops.aten.prod.dim_int(x, dim, keepdim, dtype=dtype)
        ctx.save_for_backward(x, out)
        ctx.dim, ctx.keepdim = dim, keepdim
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, out = ctx.saved_tensors
        x = x.to(grad.dtype)  # derivatives.yaml: prod_backward(grad, self.to(grad.scalar_type()), result, ...)
        if x.dim() == 0:
            return grad, None, None, None
        dim = ctx.dim % x.dim()
        if not ctx.keepdim:
            grad, out = grad.unsqueeze(dim), out.unsqueeze(dim)
        zeros = (x == 0).sum(dim, True).sum()
        _Context.assume_none("prod", zeros)
        zeros.item()  # the zero count read back (a sync point)
        return grad * (out / x), None, None, None


def _cumprod(func, args: tuple, kwargs: dict):
    x = args[0] if args else kwargs.get("input", kwargs.get("self"))
    if not _needs_real_backward(x) or kwargs.get("out") is not None:
        return func(*args, **kwargs)
    dim = args[1] if len(args) > 1 else kwargs["dim"]
    if not isinstance(dim, int):  # a named dimension
        return func(*args, **kwargs)
    return CumprodAsCuda.apply(x, dim, kwargs.get("dtype"))


def _prod(func, args: tuple, kwargs: dict):
    x = args[0] if args else kwargs.get("input", kwargs.get("self"))
    if not _needs_real_backward(x) or kwargs.get("out") is not None:
        return func(*args, **kwargs)
    rest, dtype = list(args[1:]), kwargs.get("dtype")
    dim = rest[0] if rest else kwargs.get("dim")
    if dim is None:
        return ProdAsCuda.apply(x, dtype)
    if not isinstance(dim, int):
        return func(*args, **kwargs)
    keepdim = rest[1] if len(rest) > 1 else kwargs.get("keepdim", False)
    return ProdDimAsCuda.apply(x, dim, bool(keepdim), dtype)


def routes(hints: Any, where: Callable[[], str]) -> dict[Any, Callable]:
    """Router routes (capture/router.py): the Python entry points of cumprod and prod. hints: the recorder's
    ValueHints; where: the line its notes name."""
    _Context.hints, _Context.where = hints, where
    return {torch.cumprod: _cumprod, torch.Tensor.cumprod: _cumprod, torch.prod: _prod, torch.Tensor.prod: _prod}
