"""The one kernel of a TorchScript fusion group (capture/torchscript_fusion.py): NNC's generated kernel for a chain
of elementwise ops, booked at the group's last op, its other members launching nothing.

It reads what the group reads from outside it and writes what leaves it (the capture's FUSION_READS and
FUSION_WRITES), once each, and is priced as an eager pointwise kernel moving those bytes: like it, a generated
elementwise kernel is memory-bound, one thread per element (the H100's `fused_sigmoid_mul_mul_add_add` of the zoo's
torchscript_mlp_forward: 2.4 µs for a 2 MB read and a 2 MB write, validation/h100/user_kinds_dec08).
"""

from __future__ import annotations

from kernelcast.records import FUSION_GROUP_TAG, FUSION_OPS, FUSION_READS, FUSION_WRITES, OpRecord

from .common import width_key
from .registry import Cost, CostContext, register_tag

# an elementwise op's arithmetic per element, as costs/elementwise.py counts one; a group's is its members' sum
FLOPS_PER_ELEMENT_PER_OP = 1.0


def fusion_group(op: OpRecord, ctx: CostContext) -> Cost:
    """One pointwise kernel: FUSION_READS read once, FUSION_WRITES written once; its FUSION_OPS ops' arithmetic."""
    reads, writes = op.args.get(FUSION_READS, ()), op.args.get(FUSION_WRITES, ())
    out = max(writes, key=lambda t: t.numel, default=None) or op.tensors_out()[0]
    return Cost(flops=FLOPS_PER_ELEMENT_PER_OP * op.args.get(FUSION_OPS, 1) * out.numel,
                bytes_read=float(sum(t.touched_bytes for t in reads)),
                bytes_written=float(sum(t.nbytes for t in writes)), kernels=1, dtype=out.dtype, kind="pointwise", key=width_key(out))


register_tag(FUSION_GROUP_TAG, fusion_group)
