"""Gathers: ops that read selected rows or elements of a source through an index (embedding, index_select,
gather, advanced indexing, take). Their kernels read only what they select, not the whole source: an embedding
of 2048 tokens from a 50k x 1024 table reads 2048 rows (4 MB in bf16), not the table (103 MB).

Ops costed here:
    aten.embedding, aten.index_select, aten.gather, aten.index, aten._unsafe_index, aten.take

Bytes: the output once written and once read from the source (one element read per element written), the
index tensors once. Kind "gather": the calibration measures it apart from streaming copies (random rows).
"""

from __future__ import annotations

from kernelcast.records import OpRecord, TensorMeta

from .common import memory_key, out_dtype
from .registry import Cost, CostContext, register

GATHER_KIND = "gather"


def _index_bytes(op: OpRecord) -> int:
    """Bytes of the integer index tensors an op reads (a boolean mask too: it is read once)."""
    total = 0
    for name in ("indices", "index"):
        value = op.args.get(name)
        values = value if isinstance(value, tuple) else (value,)
        total += sum(v.nbytes for v in values if isinstance(v, TensorMeta) and v.on_gpu)
    return total


def gather_cost(op: OpRecord, kernels: int = 1) -> Cost:
    written = sum(t.nbytes for t in op.tensors_out() if t.on_gpu)
    kind, key = memory_key(op, GATHER_KIND)
    return Cost(bytes_read=float(written + _index_bytes(op)), bytes_written=float(written), kernels=kernels,
                dtype=out_dtype(op), kind=kind, key=key)


@register("aten.embedding", "aten.index_select", "aten.gather", "aten.index", "aten._unsafe_index", "aten.take")
def gather(op: OpRecord, ctx: CostContext) -> Cost:
    return gather_cost(op)
