"""Shared pieces of the formulas: device-memory bytes of an op's tensors, and the generic memory-bound op.

Byte accounting (see DESIGN in the README): every device input is read once, every device output written
once; a broadcast (stride-0) input counts its distinct elements only; CPU tensors (scalars passed to a
kernel) move no device memory; views move nothing.
"""

from __future__ import annotations

from kernelcast.records import OpRecord, TensorMeta

from .registry import Cost


def gpu_tensors(tensors: list[TensorMeta]) -> list[TensorMeta]:
    return [t for t in tensors if t.on_gpu]


def bytes_read(op: OpRecord) -> float:
    return float(sum(t.touched_bytes for t in gpu_tensors(op.tensors_in())))


def bytes_written(op: OpRecord) -> float:
    return float(sum(t.nbytes for t in gpu_tensors(op.tensors_out())))


def out_dtype(op: OpRecord) -> str:
    outs = op.tensors_out() or op.tensors_in()
    return outs[0].dtype if outs else "float32"


def largest_numel(op: OpRecord) -> int:
    return max((t.numel for t in op.tensors_out() + op.tensors_in()), default=0)


def memory_op(op: OpRecord, flops_per_element: float = 0.0, kernels: int = 1) -> Cost:
    """Read every input once, write every output once; math proportional to the largest tensor."""
    return Cost(
        flops=flops_per_element * largest_numel(op), bytes_read=bytes_read(op),
        bytes_written=bytes_written(op), kernels=kernels, dtype=out_dtype(op),
    )


def write_only(op: OpRecord, kernels: int = 1) -> Cost:
    """Fills, factories and in-place RNG: they write their output and read nothing."""
    return Cost(bytes_written=bytes_written(op), kernels=kernels, dtype=out_dtype(op))


def arg(op: OpRecord, name: str) -> TensorMeta:
    value = op.args[name]
    if not isinstance(value, TensorMeta):
        raise TypeError(f"{op.op}: argument {name} is not a tensor")
    return value
