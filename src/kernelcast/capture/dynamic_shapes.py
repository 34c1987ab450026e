"""Data-dependent sizes on fake tensors: what a capture assumes where the GPU's data would decide a shape.

FakeTensorMode cannot run `nonzero`, `unique`, `bincount`, `masked_select`, `repeat_interleave` with tensor
repeats or `_pack_padded_sequence` without a ShapeEnv (DynamicOutputShapeException): their output size
depends on data a fake tensor does not hold. torch's own answer is an unbacked SymInt per size
(`allow_dynamic_output_shape_ops`), but then every later shape is symbolic, and the recorder, the costs and
the timeline all work on concrete sizes. So the capture gives each such output a concrete size and says so:

1. Value hints. Small tensors whose values a plausible guess can stand in for carry a real CPU tensor of
   values beside the fake one (`ValueHints`): exact where the host knows them (`torch.tensor([...])`,
   `arange`), a stated guess where the GPU computes them (random integers spread evenly over their range,
   top-k and arg-max indices spread evenly over their choices: a uniform routing over experts, sort indices in
   order). Ops whose inputs all have hints compute their outputs' hints on the CPU, so `chosen == e`,
   `bincount(idx)`, `counts.tolist()` and the `nonzero` that `torch.where` makes come out as the uniform
   split the guess implies, and `.item()` / `.tolist()` return them.
2. Size hints, where no value hint reaches the op: nonzero / masked_select / boolean indexing select every
   element (an upper bound); bincount has `minlength` bins, else as many bins as input elements; unique keeps
   every element (an upper bound); repeat_interleave uses `output_size`, else one repeat per element;
   packed sequences have every sequence at full length.

Every assumption is listed once under the capture's notes, with the line that made it. Each op is recorded
where CUDA runs it, with its sync point where CUDA's host waits for the count (ATen native/cuda: Nonzero.cu,
Unique.cu, SummaryOps.cu `_bincount_cuda`, Repeat.cu, Indexing.cu via `nonzero`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from .source import current_source
from .tensor_device import device_type

aten = torch.ops.aten

# Tensors above this many elements get no value hint: computing on them would cost real CPU time per op, and
# the sizes that matter (counts, lengths, routing indices) come from small tensors.
VALUE_HINT_MAX_NUMEL = 1 << 17

# Host-side tensors the user built from Python data (torch.tensor, as_tensor): their values are exact.
LIFT_OPS = (aten.lift_fresh.default, aten.lift_fresh_copy.default)
# In-place ops whose written value the capture states (seed sets it; the write does not forget it). GradScaler's
# inf check writes found_inf (torch/amp/grad_scaler.py, _unscale_grads_): 0 when every gradient is finite, as
# in almost every step of a training run; GradScaler.step reads it back and skips optimizer.step() on 1.
AMP_INF_CHECK = aten._amp_foreach_non_finite_check_and_unscale_.default
STATED_WRITES = {AMP_INF_CHECK: 1}  # op -> index of the argument whose value is stated
# Constant fills: the host states every value (torch.full, ones, zeros, their _like/new_ forms, scalar_tensor),
# so their hints are exact. A loop that keeps its state in such a tensor and reads it back (transformers'
# generate: `unfinished_sequences = torch.ones(...)`, `& ~stopping_criteria(...)` of a torch.full, then
# `unfinished_sequences.max() == 0`) then runs as many times on the capture as on the GPU.
FILL_VALUE_ARG = {  # packet -> how its fill value is read from (args, kwargs)
    aten.full: lambda args, kwargs: args[1] if len(args) > 1 else kwargs["fill_value"],
    aten.full_like: lambda args, kwargs: args[1] if len(args) > 1 else kwargs["fill_value"],
    aten.new_full: lambda args, kwargs: args[2] if len(args) > 2 else kwargs["fill_value"],
    aten.scalar_tensor: lambda args, kwargs: args[0],
    aten.ones: lambda args, kwargs: 1,
    aten.ones_like: lambda args, kwargs: 1,
    aten.new_ones: lambda args, kwargs: 1,
    aten.zeros: lambda args, kwargs: 0,
    aten.zeros_like: lambda args, kwargs: 0,
    aten.new_zeros: lambda args, kwargs: 0,
}
# Boolean and/or: the operand value that decides the result whatever the other holds. transformers' beam search
# ends on `improvement_possible & open_beam & ~all(stopping criteria hit)`: scores (unknown here) decide the
# first, max_length the last, which alone ends the loop at the right step.
DOMINANT_VALUES = {aten.bitwise_and: False, aten.logical_and: False, aten.bitwise_or: True, aten.logical_or: True}
# In-place fills write a stated value over the whole tensor, whatever it held (packet -> its value).
FILL_IN_PLACE = {
    aten.fill_.Scalar: lambda args, kwargs: args[1],
    aten.zero_.default: lambda args, kwargs: 0,
}


def _is_fake(t: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _tensor_args(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors among an op's arguments, in lists too (a cheaper tree_flatten for the per-op path)."""
    out = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, torch.Tensor))
    return out


def _cpu_kwarg(value: Any) -> Any:
    if isinstance(value, torch.device) and value.type != "cpu":
        return torch.device("cpu")
    if isinstance(value, str) and value.startswith("cuda"):
        return "cpu"
    return value


def run_on_values(func, args: tuple, kwargs: dict) -> Any:
    """`func` on real CPU tensors, outside every mode of the capture (no fake tensors, nothing recorded)."""
    kwargs = {k: _cpu_kwarg(v) for k, v in kwargs.items()}
    with _disable_current_modes():
        return func(*args, **kwargs)


def as_python(values: torch.Tensor, as_number: bool = False) -> Any:
    """A hint's values as Python numbers (a list, or a number for a 0-d tensor), read outside the modes;
    as_number: one number, as `.item()` reads a one-element tensor of any shape."""
    with _disable_current_modes():
        return values.reshape(()).item() if as_number else values.tolist()


def spread(numel: int, choices: int, offset: int = 0) -> torch.Tensor:
    """`numel` integers spread evenly over [offset, offset + choices): each choice equally often (0, 1, ...,
    choices-1, 0, 1, ...) where there are at least as many as choices, else one at the middle of each of `numel`
    equal parts of the range. (Counting 0, 1, 2, ... from the bottom had made 16 sequence lengths drawn from
    [5, 40) the lengths 5 to 20: a packed 2-layer bidirectional LSTM then ran 20 steps where a uniform draw runs
    about 39, its cuDNN call 224 work items against 365 measured; benchmarks/whole_models/packed_lstm.py.)"""
    choices = max(choices, 1)
    with _disable_current_modes():
        index = torch.arange(numel, dtype=torch.int64)
        if numel >= choices:
            return index % choices + offset
        return (2 * index + 1) * choices // (2 * numel) + offset


def _rows_along(shape: tuple[int, ...], dim: int) -> tuple[int, int]:
    """(rows, size) of a tensor viewed as rows along `dim`."""
    size = shape[dim] if shape else 1
    return (math.prod(shape) // size if size else 0), size


def _move_last_to(values: torch.Tensor, shape: tuple[int, ...], dim: int) -> torch.Tensor:
    """Rows laid out with `dim` last, reshaped to `shape` with that axis back at `dim`."""
    moved = list(shape)
    moved.append(moved.pop(dim))
    return values.reshape(moved).movedim(-1, dim).contiguous()


class ValueHints:
    """Real CPU values standing in for small fake tensors' data, each with the assumptions behind it (none
    where the host knows the values). An assumption becomes a note of the capture when a hint it made decides
    a size or a value the host reads, not before."""

    def __init__(self, note: Callable[[str], None]) -> None:
        self._values = WeakIdKeyDictionary()
        self._why = WeakIdKeyDictionary()
        self._counts = WeakIdKeyDictionary()  # masks whose count of selected elements alone is known or assumed
        self._note = note
        self._seeders: dict[Any, Callable] = {
            aten.topk.default: self._topk,
            aten.sort.default: self._sort,
            aten.sort.stable: self._sort,
            aten.argmax.default: self._argmax,
            aten.argmin.default: self._argmax,
            aten.max.dim: self._max_dim,
            aten.min.dim: self._max_dim,
            aten.randperm.default: self._randperm,
            aten.multinomial.default: self._multinomial,
        }

    def __bool__(self) -> bool:
        return len(self._values) > 0

    def get(self, t: Any) -> torch.Tensor | None:
        return self._values.get(t) if isinstance(t, torch.Tensor) else None

    def use(self, t: Any) -> torch.Tensor | None:
        """The hint, when a size or a host read depends on it: its assumptions become notes."""
        values = self.get(t)
        if values is not None:
            for text in self._why.get(t, ()):
                self._note(text)
        return values

    def why(self, t: Any) -> frozenset[str]:
        return self._why.get(t, frozenset()) if isinstance(t, torch.Tensor) else frozenset()

    def set(self, t: torch.Tensor, values: torch.Tensor, why: frozenset[str] = frozenset()) -> None:
        if _is_fake(values):
            raise AssertionError("kernelcast: a value hint must be a real CPU tensor, not a fake one")
        if values.numel() <= VALUE_HINT_MAX_NUMEL and tuple(values.shape) == tuple(t.shape):
            self._values[t] = values
            self._why[t] = why

    def set_count(self, mask: torch.Tensor, count: int, why: str) -> None:
        """The number of elements a mask selects, without its values (a mask of any size), and the assumption
        behind it, noted where a size follows from it."""
        self._counts[mask] = (count, why)

    def count(self, mask: torch.Tensor) -> int | None:
        """A mask's count of selected elements (set_count), its assumption noted; or None."""
        known = self._counts.get(mask)
        if known is None:
            return None
        self._note(known[1])
        return known[0]

    def drop(self, t: torch.Tensor) -> None:
        self._values.pop(t, None)
        self._why.pop(t, None)
        self._counts.pop(t, None)

    # -- sources ---------------------------------------------------------------------------------------
    def seed(self, func, args: tuple, kwargs: dict, out: Any) -> None:
        """Hints for the outputs of ops whose values the host knows or the capture guesses."""
        if "out" in kwargs:  # an out= variant a decomposed op calls: the op itself gets the hint
            return
        if func in LIFT_OPS:
            real = args[0]
            # one-element ones too: FakeTensorMode keeps their values as `constant`, but drops it when they move
            # to the GPU (`torch.tensor(eos_id, device="cuda")`), where the hint carries on
            if isinstance(real, torch.Tensor) and not _is_fake(real) and real.numel() <= VALUE_HINT_MAX_NUMEL:
                with _disable_current_modes():
                    self.set(out, real.clone())
            return
        if func in STATED_WRITES:
            target = args[STATED_WRITES[func]]
            why = self._assumed("GradScaler", "gradients assumed finite (found_inf 0: the optimizer step runs)")
            with _disable_current_modes():
                self.set(target, torch.zeros(target.shape, dtype=target.dtype), why)
            return
        if func in FILL_IN_PLACE:
            self._fill(args[0], FILL_IN_PLACE[func](args, kwargs))
            return
        packet = func.overloadpacket
        if packet in FILL_VALUE_ARG:
            if isinstance(out, torch.Tensor):
                self._fill(out, FILL_VALUE_ARG[packet](args, kwargs))
            return
        if packet is aten.arange:
            seeder = self._arange
        elif packet is aten.randint or packet is aten.randint_like:
            seeder = self._randint
        else:
            seeder = self._seeders.get(func)
        if seeder is not None:
            with _disable_current_modes():  # hints are real CPU tensors: compute them outside the fake mode
                seeder(func, args, kwargs, out)

    def _fill(self, t: torch.Tensor, value: Any) -> None:
        """An exact hint for a tensor filled with one host value (not for parameters: nn.init fills them,
        and a weak reference to one makes Module._apply's swap_tensors fail)."""
        if isinstance(t, torch.nn.Parameter) or t.numel() > VALUE_HINT_MAX_NUMEL or not isinstance(
                value, (bool, int, float)):
            self.drop(t)
            return
        with _disable_current_modes():
            self.set(t, torch.full(tuple(t.shape), value, dtype=t.dtype))

    def _arange(self, func, args, kwargs, out) -> None:
        if isinstance(out, torch.Tensor) and out.numel() <= VALUE_HINT_MAX_NUMEL:
            self.set(out, run_on_values(func, args, kwargs))

    def _randint(self, func, args, kwargs, out) -> None:
        if not isinstance(out, torch.Tensor) or out.numel() > VALUE_HINT_MAX_NUMEL:
            return
        ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
        if func.overloadpacket is aten.randint_like:
            low, high = (0, ints[0]) if len(ints) == 1 else (ints[0], ints[1])
        elif func in (aten.randint.low, aten.randint.low_generator):
            low, high = args[0], args[1]
        else:
            low, high = 0, args[0]
        why = self._assumed("randint", f"values in [{low}, {high}) assumed spread evenly over the range")
        self.set(out, spread(out.numel(), high - low, low).reshape(out.shape).to(out.dtype), why)

    def _topk(self, func, args, kwargs, out) -> None:
        values, indices = out
        x, k = args[0], args[1]
        dim = (args[2] if len(args) > 2 else kwargs.get("dim", -1)) % max(x.dim(), 1)
        if indices.numel() > VALUE_HINT_MAX_NUMEL or x.dim() == 0:
            return
        rows, choices = _rows_along(tuple(x.shape), dim)
        why = self._assumed("topk", f"indices assumed spread evenly over the {choices} choices (a uniform routing)")
        self.set(indices, _move_last_to(spread(rows * k, choices), tuple(indices.shape), dim), why)

    def _sort(self, func, args, kwargs, out) -> None:
        _, indices = out
        x = args[0]
        dim = kwargs.get("dim", -1)
        for a in args[1:]:
            if isinstance(a, int) and not isinstance(a, bool):
                dim = a
        if x.dim() == 0 or indices.numel() > VALUE_HINT_MAX_NUMEL:
            return
        dim %= x.dim()
        rows, n = _rows_along(tuple(x.shape), dim)
        with _disable_current_modes():
            ordered = torch.arange(n, dtype=torch.int64).repeat(rows)
        why = self._assumed("sort", "indices assumed in order (the input already sorted)")
        self.set(indices, _move_last_to(ordered, tuple(indices.shape), dim), why)

    def _argmax(self, func, args, kwargs, out) -> None:
        x = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        self._index_choices(out, x, dim)

    def _max_dim(self, func, args, kwargs, out) -> None:
        x, dim = args[0], args[1]
        self._index_choices(out[1], x, dim)

    def _index_choices(self, indices, x, dim) -> None:
        if indices.numel() > VALUE_HINT_MAX_NUMEL:
            return
        choices = x.numel() if dim is None or x.dim() == 0 else x.shape[dim]
        why = self._assumed("argmax/argmin", f"indices assumed spread evenly over the {choices} choices")
        self.set(indices, spread(indices.numel(), choices).reshape(indices.shape), why)

    def _randperm(self, func, args, kwargs, out) -> None:
        if out.numel() <= VALUE_HINT_MAX_NUMEL:
            why = self._assumed("randperm", "assumed the identity permutation")
            self.set(out, spread(out.numel(), out.numel()).to(out.dtype), why)

    def _multinomial(self, func, args, kwargs, out) -> None:
        probs = args[0]
        if out.numel() <= VALUE_HINT_MAX_NUMEL and probs.dim() > 0:
            why = self._assumed("multinomial", f"samples assumed spread evenly over the {probs.shape[-1]} choices")
            self.set(out, spread(out.numel(), probs.shape[-1]).reshape(out.shape), why)

    @staticmethod
    def _assumed(what: str, text: str) -> frozenset[str]:
        return frozenset({f"{what} at {current_source() or 'set-up'}: {text}"})

    # -- propagation -----------------------------------------------------------------------------------
    def propagate(self, func, args: tuple, kwargs: dict, out: Any) -> None:
        """Outputs of an op whose tensor inputs all have hints get hints computed from them on the CPU; an
        in-place op with an input of unknown value makes its target's hint unknown."""
        tensors = _tensor_args(args, kwargs)
        values = self._values
        dominant = DOMINANT_VALUES.get(func.overloadpacket)
        if dominant is not None and self._dominated(dominant, args, out):
            return
        if not any(t in values for t in tensors):  # the common case, kept short: it runs for every op
            return
        hinted = [t in values or not _is_fake(t) or t.constant is not None for t in tensors]
        if not all(hinted) or torch.Tag.nondeterministic_seeded in func.tags:
            self._forget_written(func, args)
            return
        flat_out, _ = tree_flatten(out)
        out_tensors = [t for t in flat_out if isinstance(t, torch.Tensor)]
        if any(t.numel() > VALUE_HINT_MAX_NUMEL for t in out_tensors):
            self._forget_written(func, args)
            return
        real_args, real_kwargs = tree_map(lambda a: self._real(a), (args, kwargs))
        try:
            real_out = run_on_values(func, real_args, real_kwargs)
        except (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError):
            self._forget_written(func, args)  # no hint: the op's size hints apply instead
            return
        why = frozenset().union(*(self.why(t) for t in tensors))
        self._attach(out, real_out, why)

    def _dominated(self, dominant: bool, args: tuple, out: Any) -> bool:
        """A boolean and/or whose one operand decides it (False & anything, True | anything) gets an exact
        hint though the other operand is unknown; whether it did."""
        if not isinstance(out, torch.Tensor) or out.dtype != torch.bool or out.numel() > VALUE_HINT_MAX_NUMEL:
            return False
        for a in args[:2]:
            if isinstance(a, bool):
                decides, why = a is dominant, frozenset()
            elif isinstance(a, torch.Tensor):
                known = self._real(a)  # the tensor itself, its hint, its constant, or None: unknown
                if known is None:
                    continue
                with _disable_current_modes():
                    decides = bool((known.to(torch.bool) == dominant).all())
                why = self.why(a)
            else:
                continue
            if decides:
                with _disable_current_modes():
                    self.set(out, torch.full(tuple(out.shape), dominant, dtype=torch.bool), why)
                return True
        return False

    def _real(self, a: Any) -> Any:
        if not isinstance(a, torch.Tensor) or not _is_fake(a):
            return a
        values = self.get(a)
        return a.constant if values is None else values

    def _attach(self, out: Any, real_out: Any, why: frozenset[str]) -> None:
        fakes, _ = tree_flatten(out)
        reals, _ = tree_flatten(real_out)
        for fake, real in zip(fakes, reals):
            if isinstance(fake, torch.Tensor) and isinstance(real, torch.Tensor):
                self.set(fake, real, why)

    def _forget_written(self, func, args: tuple) -> None:
        schema_args = func._schema.arguments
        stated = STATED_WRITES.get(func)
        for i, a in enumerate(args):
            if i == stated:
                continue
            if i < len(schema_args) and schema_args[i].alias_info is not None and schema_args[i].alias_info.is_write:
                if isinstance(a, torch.Tensor):
                    self.drop(a)


def _on_cuda(t: torch.Tensor) -> bool:
    return device_type(t) == "cuda"


def _even_counts(total: int, bins: int) -> torch.Tensor:
    """`bins` counts as equal as integers allow, summing to `total`."""
    with _disable_current_modes():
        counts = torch.full((bins,), total // bins if bins else 0, dtype=torch.int64)
        counts[: total % bins if bins else 0] += 1
    return counts


Record = Callable[[Any, tuple, dict, Any, "str | None"], None]


class DynamicShapes:
    """Handlers for the recorder: each runs one data-dependent op on fake tensors and returns (output, the
    sync it makes on CUDA or None). `record` records an inner op as CUDA runs it (a nonzero under a boolean
    index, the copies of a packed sequence)."""

    def __init__(self, hints: ValueHints, note: Callable[[str], None], record: Record,
                 where: Callable[[], str] = lambda: current_source() or "set-up") -> None:
        self.hints = hints
        self._note = note
        self._record = record
        self._where = where  # the line a note names: the user's, or in backward the forward op's
        # (self, indices, ...) with host indices copied to a CUDA self's device, each copy recorded (the
        # recorder's; a mask on the host becomes host indices, which CUDA's indexing copies over)
        self.indices_to_device: Callable[[tuple], tuple] = lambda args: args

    def handlers(self) -> dict[Any, Callable]:
        return {
            aten.nonzero.default: self.nonzero,
            aten.masked_select.default: self.masked_select,
            aten.index.Tensor: self.index_with_masks,
            aten.index_put.default: self.index_with_masks,
            aten.index_put_.default: self.index_with_masks,
            aten._index_put_impl_.default: self.index_with_masks,
            aten.bincount.default: self.bincount,
            aten._unique2.default: self.unique,
            aten._unique.default: self.unique,
            aten.unique_dim.default: self.unique,
            aten.unique_consecutive.default: self.unique,
            aten.repeat_interleave.Tensor: self.repeat_interleave,
            aten._pack_padded_sequence.default: self.pack_padded_sequence,
            aten._pack_padded_sequence_backward.default: self.pack_padded_sequence_backward,
        }

    def library_handlers(self) -> dict[str, Callable]:
        """Handlers for other libraries' data-dependent ops, by the op's qualified name ("torchvision::nms"):
        the library may be imported after the capture starts, so its ops are matched by name."""
        return {"torchvision::nms": self.nms}

    def _assume(self, what: str, assumption: str) -> frozenset[str]:
        """Note an assumption a size rests on; returned so hints made from it carry it on."""
        text = f"{what} at {self._where()}: {assumption}"
        self._note(text)
        return frozenset({text})

    # -- nonzero and boolean masks ---------------------------------------------------------------------
    def _selected(self, mask: torch.Tensor, what: str, shape: tuple[int, ...] | None = None) -> tuple[int, Any]:
        """How many elements a mask selects (broadcast to `shape`), and their coordinates where known."""
        values = self.hints.use(mask)
        if values is not None:
            with _disable_current_modes():
                full = values.expand(shape) if shape is not None else values
                return int(full.count_nonzero()), full.nonzero()
        count = self.hints.count(mask) if shape is None else None
        if count is not None:
            return count, None
        numel = math.prod(shape) if shape is not None else mask.numel()
        self._assume(what, "every element assumed selected (an upper bound on the size)")
        return numel, None

    def _nonzero_out(self, t: torch.Tensor, count: int, coords: Any) -> torch.Tensor:
        # CUDA writes the (count, ndim) result transposed: strides (1, count) (ATen cuda/Nonzero.cu).
        out = torch.empty_strided((count, t.dim()), (1, max(count, 1)), dtype=torch.long, device=t.device)
        if coords is not None:
            self.hints.set(out, coords, self.hints.why(t))
        return out

    def nonzero(self, func, args, kwargs):
        (t,) = args[:1]
        count, coords = self._selected(t, "nonzero")
        return self._nonzero_out(t, count, coords), ("nonzero" if _on_cuda(t) else None)

    def nms(self, func, args, kwargs):
        """torchvision.ops.nms: the indices of the boxes kept, as many as the IoUs between them decide.
        torchvision's CUDA nms (csrc/ops/cuda/nms_kernel.cu) ends in `order.masked_select(keep)`, whose count
        the host reads back: a sync. With value hints for both inputs the CPU kernel gives the exact count;
        else every box is assumed kept (an upper bound on the size)."""
        boxes, scores = args[:2]
        box_values, score_values = self.hints.use(boxes), self.hints.use(scores)
        if box_values is not None and score_values is not None:
            real = run_on_values(func, (box_values, score_values, *args[2:]), kwargs)
            out = boxes.new_empty(tuple(real.shape), dtype=torch.long)
            self.hints.set(out, real, self.hints.why(boxes) | self.hints.why(scores))
        else:
            self._assume("nms", "every box assumed kept (an upper bound on the size)")
            out = boxes.new_empty((boxes.shape[0],), dtype=torch.long)
        return out, ("nms" if _on_cuda(boxes) else None)

    def masked_select(self, func, args, kwargs):
        t, mask = args[:2]
        shape = tuple(torch.broadcast_shapes(t.shape, mask.shape))
        count, _ = self._selected(mask, "masked_select", shape)
        out = t.new_empty((count,))
        t_values, m_values = self.hints.get(t), self.hints.get(mask)
        if t_values is not None and m_values is not None:
            why = self.hints.why(t) | self.hints.why(mask)
            self.hints.set(out, run_on_values(func, (t_values, m_values), {}), why)
        return out, ("masked_select" if _on_cuda(t) else None)

    def index_with_masks(self, func, args, kwargs):
        """Indexing with boolean masks: CUDA turns each mask into indices with a nonzero (a sync), except an
        index_put_ of one CPU scalar through one mask on self's device, which is a masked_fill_ (ATen
        TensorAdvancedIndexing.cpp, canDispatchToMaskedFill). A mask on the host takes its nonzero there (no
        sync) and its indices are copied to the device (the recorder's indices_to_device)."""
        self_t, indices = args[0], args[1]
        masks = [i for i in indices if isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)]
        if not masks:
            return func(*args, **kwargs), None
        if func is not aten.index.Tensor and self._masked_fill_path(func, args, kwargs, masks):
            return self._as_masked_fill(func, args, kwargs, masks[0]), None
        expanded: list[torch.Tensor | None] = []
        for index in indices:
            if isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8):
                count, coords = self._selected(index, "boolean mask")
                where = self._nonzero_out(index, count, coords)
                if _on_cuda(index):
                    self._record(aten.nonzero.default, (index,), {}, where, "boolean mask")
                expanded.extend(where.unbind(1))
            else:
                expanded.append(index)
        self_t, expanded = self.indices_to_device((self_t, expanded))
        out = func(self_t, expanded, *args[2:], **kwargs)
        return out, None

    @staticmethod
    def _masked_fill_path(func, args, kwargs, masks) -> bool:
        values = args[2] if len(args) > 2 else kwargs.get("values")
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        other = [i for i in args[1] if isinstance(i, torch.Tensor) and all(i is not m for m in masks)]
        # the mask on self's device too: a host mask into a CUDA tensor takes the nonzero on the host instead
        return (func is not aten.index_put.default and not accumulate and len(masks) == 1 and not other
                and device_type(masks[0]) == device_type(args[0])
                and isinstance(values, torch.Tensor) and values.numel() == 1 and device_type(values) == "cpu")

    def _as_masked_fill(self, func, args, kwargs, mask: torch.Tensor) -> torch.Tensor:
        self_t, indices, values = args[0], args[1], args[2]
        leading = 0
        for i in indices:
            if i is mask:
                break
            leading += 1
        trailing = self_t.dim() - leading - mask.dim()
        shaped = mask.reshape(tuple(mask.shape) + (1,) * trailing)
        # recorded as the index_put_ it is (one kernel, as the device attributes it), without a nonzero or sync
        return aten.masked_fill_.Tensor(self_t, shaped, values.reshape(()))

    # -- counting ops ----------------------------------------------------------------------------------
    def bincount(self, func, args, kwargs):
        x = args[0]
        weights = args[1] if len(args) > 1 else kwargs.get("weights")
        minlength = args[2] if len(args) > 2 else kwargs.get("minlength", 0)
        x_values, w_values = self.hints.get(x), self.hints.get(weights)
        dtype = torch.long if weights is None else (torch.float32 if weights.dtype == torch.float32
                                                    else torch.float64)
        if x_values is not None:  # the bins follow from the indices; the counts need the weights too
            self.hints.use(x)
            real = run_on_values(func, (x_values, None, minlength), {})
            out = x.new_empty(tuple(real.shape), dtype=dtype)
            if weights is None or w_values is not None:
                self.hints.use(weights)
                real = run_on_values(func, (x_values, w_values, minlength), {})
                self.hints.set(out, run_on_values(aten._to_copy.default, (real,), {"dtype": dtype}),
                               self.hints.why(x) | self.hints.why(weights))
        else:
            bins = minlength if minlength > 0 else x.numel()
            source = "minlength" if minlength > 0 else "as many bins as input elements, an upper bound"
            why = self._assume("bincount", f"{bins} bins assumed ({source}), the counts spread evenly")
            out = x.new_empty((bins,), dtype=dtype)
            if weights is None:
                self.hints.set(out, _even_counts(x.numel(), bins), why)
        # _bincount_cuda reads self.min() and self.max() back to the host (ATen cuda/SummaryOps.cu).
        return out, ("bincount" if _on_cuda(x) else None)

    def unique(self, func, args, kwargs):
        x = args[0]
        values = self.hints.use(x)
        if values is not None:
            real = run_on_values(func, (values, *args[1:]), kwargs)
            outs = tuple(x.new_empty(tuple(r.shape), dtype=r.dtype) for r in real)
            for fake, r in zip(outs, real):
                self.hints.set(fake, r, self.hints.why(x))
            return outs, ("unique" if _on_cuda(x) else None)
        dim = self._unique_dim(func, args, kwargs)
        kept = x.numel() if dim is None else x.shape[dim]
        self._assume(func.overloadpacket.__name__, "every element assumed distinct (an upper bound on the size)")
        inverse, counts = self._unique_flags(func, args, kwargs)
        shape = (kept,) if dim is None else tuple(x.shape[:dim]) + (kept,) + tuple(x.shape[dim + 1:])
        out = x.new_empty(shape)
        inv = x.new_empty(tuple(x.shape) if dim is None else (x.shape[dim],), dtype=torch.long) if inverse \
            else x.new_empty((0,), dtype=torch.long)
        cnt = x.new_empty((kept,), dtype=torch.long) if counts else x.new_empty((0,), dtype=torch.long)
        outs = (out, inv) if func is aten._unique.default else (out, inv, cnt)
        return outs, ("unique" if _on_cuda(x) else None)

    @staticmethod
    def _unique_dim(func, args, kwargs) -> int | None:
        if func is aten.unique_dim.default:
            return (args[1] if len(args) > 1 else kwargs["dim"]) % max(args[0].dim(), 1)
        if func is aten.unique_consecutive.default:
            dim = args[3] if len(args) > 3 else kwargs.get("dim")
            return None if dim is None else dim % max(args[0].dim(), 1)
        return None

    @staticmethod
    def _unique_flags(func, args, kwargs) -> tuple[bool, bool]:
        """(return_inverse, return_counts) from each overload's own argument order."""
        def flag(i: int, name: str) -> bool:
            return bool(args[i] if len(args) > i else kwargs.get(name, False))

        if func is aten.unique_consecutive.default:
            return flag(1, "return_inverse"), flag(2, "return_counts")
        if func is aten.unique_dim.default:
            return flag(3, "return_inverse"), flag(4, "return_counts")
        if func is aten._unique.default:
            return flag(2, "return_inverse"), False
        return flag(2, "return_inverse"), flag(3, "return_counts")

    def repeat_interleave(self, func, args, kwargs):
        repeats = args[0]
        output_size = args[1] if len(args) > 1 else kwargs.get("output_size")
        values = self.hints.use(repeats)
        if values is not None:
            real = run_on_values(func, (values,), {"output_size": output_size})
            out = repeats.new_empty(tuple(real.shape))
            self.hints.set(out, real, self.hints.why(repeats))
        elif output_size is not None:
            out = repeats.new_empty((output_size,))
        else:
            self._assume("repeat_interleave", "each repeat assumed 1 (the output as long as the repeats)")
            out = repeats.new_empty((repeats.numel(),))
        # Without output_size, CUDA reads the total (and a check that no repeat is negative) back to the host
        # (ATen cuda/Repeat.cu, repeat_interleave_common).
        sync = "repeat_interleave" if output_size is None and _on_cuda(repeats) else None
        return out, sync

    # -- packed sequences ------------------------------------------------------------------------------
    def _lengths(self, lengths: torch.Tensor, steps: int) -> list[int]:
        values = self.hints.use(lengths)
        if values is not None:
            return [int(v) for v in as_python(values)]
        self._assume("pack_padded_sequence", f"every sequence assumed at full length ({steps})")
        return [steps] * lengths.numel()

    def pack_padded_sequence(self, func, args, kwargs):
        """ATen native/PackedSequence.cpp `_pack_padded_sequence`: the lengths are on the host, so the packed
        size is exact. One contiguous copy per run of equal lengths (where the slice is not contiguous
        already), then a cat; these are what CUDA launches and what is recorded."""
        raw, lengths, batch_first = args[0], args[1], args[2]
        x = raw.transpose(0, 1) if batch_first else raw
        steps_total, batch = x.shape[0], x.shape[1]
        lens = self._lengths(lengths, steps_total)
        steps, batch_sizes, prev = [], [], 0
        step_shape = (-1, *x.shape[2:])
        for i in range(batch):
            length = lens[batch - 1 - i]
            if length > prev:
                current = batch - i
                block = x[prev:length, :current]
                if not block.is_contiguous():
                    copied = aten.clone.default(block, memory_format=torch.contiguous_format)
                    self._record(aten.clone.default, (block,), {"memory_format": torch.contiguous_format},
                                 copied, None)
                    block = copied
                steps.append(block.view(step_shape))
                batch_sizes.extend([current] * (length - prev))
                prev = length
        data = aten.cat.default(steps)
        self._record(aten.cat.default, (steps,), {}, data, None)
        sizes = torch.tensor(batch_sizes, dtype=torch.int64)
        with _disable_current_modes():
            self.hints.set(sizes, torch.tensor(batch_sizes, dtype=torch.int64), self.hints.why(lengths))
        return (data, sizes), None

    def batch_sizes(self, batch_sizes: torch.Tensor, rows: int) -> list[int]:
        """A packed sequence's batch sizes (host values), or one step of every row where unknown."""
        values = self.hints.use(batch_sizes)
        if values is not None:
            return [int(v) for v in as_python(values)]
        self._assume("packed sequence", f"batch sizes unknown: one step of all {rows} rows assumed")
        return [rows]

    def pack_padded_sequence_backward(self, func, args, kwargs):
        """ATen native/PackedSequence.cpp `_pack_padded_sequence_backward`: zeros, then one copy per time
        step (kept whole on CUDA by a stand-in kernel, see capture/rnn.py); recorded as one op."""
        grad, input_size, batch_sizes, batch_first = args[:4]
        size = list(input_size)
        if batch_first:
            size[0], size[1] = size[1], size[0]
        out = grad.new_zeros(size)
        return (out.transpose(0, 1) if batch_first else out), None
