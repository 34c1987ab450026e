"""One registry from aten op to cost. Formulas are small pure functions of an OpRecord.

Lookup order for an op: an explicit formula for its overload ("aten.add.Tensor"), then for its packet
("aten.add"); then the zero-cost set (views, allocation, host-side ops); then a formula chosen by torch's own
op tags (pointwise, reduction). An op that matches none of these is uncosted, and every output lists it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kernelcast.records import FUSED_MEMBER_TAG, FUSION_GROUP_TAG, OpRecord

from .launch_table import LaunchTable


@dataclass(frozen=True)
class Cost:
    """Device work of one op: math, device-memory traffic, and GPU work items (kernels, memcpys)."""

    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    kernels: int = 1
    math: str = "vector"  # tensor-core eligible: "matmul", "conv", "attention"; everything else: "vector"
    dtype: str = "float32"  # dtype the math runs in, which picks the roof
    # What a calibrated kernel model looks the op up by: its class ("gemm", "conv", "attention", or a
    # memory-bound class such as "pointwise", "norm", "copy") and, for the first three, the shape it measured.
    kind: str = ""
    key: tuple = ()
    # Kernels of another kind the op launches inside it, each priced by its own kind (a strided input made
    # contiguous is a transposing copy, not part of a norm). The totals above include them; remainder() is the
    # rest, priced by `kind`.
    parts: tuple["Cost", ...] = ()
    # Bytes of its read that the op's own previous kernel has just written (a convolution's bias add reads the
    # output cuDNN wrote): still in L2 where they fit, whatever the step did before the op.
    reads_just_written: float = 0.0

    def remainder(self) -> "Cost":
        """This cost less its parts: the work its own kind stands for."""
        return Cost(self.flops - sum(p.flops for p in self.parts),
                    self.bytes_read - sum(p.bytes_read for p in self.parts),
                    self.bytes_written - sum(p.bytes_written for p in self.parts),
                    self.kernels - sum(p.kernels for p in self.parts), self.math, self.dtype, self.kind, self.key)

    def with_parts(self, *parts: "Cost") -> "Cost":
        """This cost with kernels of other kinds added to it (totals and parts)."""
        return Cost(self.flops + sum(p.flops for p in parts), self.bytes_read + sum(p.bytes_read for p in parts),
                    self.bytes_written + sum(p.bytes_written for p in parts),
                    self.kernels + sum(p.kernels for p in parts), self.math, self.dtype, self.kind, self.key,
                    self.parts + tuple(parts))

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """FLOP per byte of device memory traffic (0 for an op that moves no bytes)."""
        return self.flops / self.bytes if self.bytes else 0.0

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.flops + other.flops, self.bytes_read + other.bytes_read,
                    self.bytes_written + other.bytes_written, self.kernels + other.kernels, self.math, self.dtype,
                    self.kind, self.key, self.parts + other.parts)


NO_WORK = Cost(kernels=0)


@dataclass(frozen=True)
class CostContext:
    """What kernel launch counts depend on besides the op: the target GPU and the torch that runs it."""

    sm_count: int = 132
    capability: tuple[int, int] = (9, 0)  # CUDA compute capability (some ops pick kernels by arch)
    max_threads_per_sm: int = 2048
    # multi_tensor_apply's 32 KB kernel-argument tables (CUDA 13 builds from torch 2.12 on; 2.11+cu130 was
    # measured with the 4 KB ones, see validation/probe.json).
    multi_tensor_large_args: bool = True
    # Measured work items per GEMM/conv shape (a device profile); None: one kernel each (+ bias kernel).
    launches: LaunchTable | None = None


DEFAULT_CONTEXT = CostContext()

Formula = Callable[[OpRecord, CostContext], Cost]
_FORMULAS: dict[str, Formula] = {}
_ZERO_COST: set[str] = set()


def register(*ops: str) -> Callable[[Formula], Formula]:
    """Register a formula for ops named "aten.mm" (every overload) or "aten.add.Tensor" (one overload)."""

    def wrap(fn: Formula) -> Formula:
        for op in ops:
            if op in _FORMULAS or op in _ZERO_COST:
                raise ValueError(f"{op} is registered twice")
            _FORMULAS[op] = fn
        return fn

    return wrap


def register_zero_cost(*ops: str) -> None:
    """Ops that launch nothing and move no device memory: views, metadata, allocation."""
    for op in ops:
        if op in _FORMULAS or op in _ZERO_COST:
            raise ValueError(f"{op} is registered twice")
        _ZERO_COST.add(op)


# Formulas chosen by torch's op tags, set by the modules that define them.
_TAG_FORMULAS: dict[str, Formula] = {}


def register_tag(tag: str, fn: Formula) -> None:
    if tag in _TAG_FORMULAS:
        raise ValueError(f"tag {tag} is registered twice")
    _TAG_FORMULAS[tag] = fn


def cost_of(op: OpRecord, ctx: CostContext = DEFAULT_CONTEXT,
            overrides: dict[str, Formula] | None = None) -> Cost | None:
    """The op's cost, or None when no formula covers it (the caller lists it as uncosted)."""
    if overrides:
        fn = overrides.get(op.op) or overrides.get(op.packet)
        if fn is not None:
            return fn(op, ctx)
    if op.decomposed:  # CUDA runs it as the ops recorded as its children: they are costed, not it
        return NO_WORK
    if "host" in op.tags:  # runs on the CPU (a CPU tensor, or a host-side sync marker)
        return NO_WORK
    if FUSED_MEMBER_TAG in op.tags:  # TorchScript fused it: its group's kernel is booked at the group's last op
        return NO_WORK
    if FUSION_GROUP_TAG in op.tags:
        return _TAG_FORMULAS[FUSION_GROUP_TAG](op, ctx)
    if _empty(op):  # CUDA ops return early on zero-element tensors: nothing is launched
        return NO_WORK
    fn = _FORMULAS.get(op.op) or _FORMULAS.get(op.packet)
    if fn is not None:
        return fn(op, ctx)
    if op.is_view or op.packet in _ZERO_COST or op.op in _ZERO_COST:
        return NO_WORK
    for tag in ("pointwise", "reduction"):
        if tag in op.tags:
            return _TAG_FORMULAS[tag](op, ctx)
    return None


def _empty(op: OpRecord) -> bool:
    tensors = op.tensors_in() + op.tensors_out()
    return bool(tensors) and all(t.numel == 0 for t in tensors if t.on_gpu) and any(t.on_gpu for t in tensors)


def registered_ops() -> set[str]:
    return set(_FORMULAS) | set(_ZERO_COST)
