"""Collectives (all_reduce, all_gather, reduce_scatter, all_to_all, broadcast): what NCCL moves.

A collective is not costed against a roofline: its time comes from the interconnect (predict/comm.py). Its
Cost says which collective it is, its message size and its group size (kind "collective", key
(collective, message_bytes, group_size)), so the predict stage can time it.

The message size S is the one nccl-tests reports and defines its bus bandwidth on (NVIDIA/nccl-tests,
doc/PERFORMANCE.md): the buffer for all_reduce, broadcast and reduce; the whole gathered buffer for
all_gather (sendcount x n); the whole input buffer for reduce_scatter (recvcount x n); the buffer each rank
sends for all_to_all.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelcast.records import OpRecord, TensorMeta

from .foreach import multi_tensor_launches
from .registry import Cost, CostContext, register, register_zero_cost

COLLECTIVE_KIND = "collective"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")


@dataclass(frozen=True)
class MessageRule:
    """Which collective an op is, which of its arguments hold S, and whether they hold S / n instead."""

    collective: str
    args: tuple[str, ...]
    times_group_size: bool = False  # the arguments hold one rank's share (sendcount), S is n times it


# Every c10d (ProcessGroup) and _c10d_functional collective torch 2.13 defines, by op packet. Arguments as the
# ops' schemas name them.
MESSAGE_RULES: dict[str, MessageRule] = {
    "c10d.allreduce_": MessageRule("all_reduce", ("tensors",)),
    "c10d.allreduce_coalesced_": MessageRule("all_reduce", ("tensors",)),
    "c10d.barrier": MessageRule("all_reduce", ("tensor",)),  # NCCL's barrier is an all-reduce of one element
    "c10d.broadcast_": MessageRule("broadcast", ("tensors",)),
    "c10d.reduce_": MessageRule("reduce", ("tensors",)),
    "c10d._allgather_base_": MessageRule("all_gather", ("output_tensor",)),
    "c10d.allgather_": MessageRule("all_gather", ("input_tensors",), times_group_size=True),
    "c10d.allgather_coalesced_": MessageRule("all_gather", ("input_list",), times_group_size=True),
    "c10d.allgather_into_tensor_coalesced_": MessageRule("all_gather", ("outputs",)),
    "c10d._reduce_scatter_base_": MessageRule("reduce_scatter", ("input_tensor",)),
    "c10d.reduce_scatter_": MessageRule("reduce_scatter", ("output_tensors",), times_group_size=True),
    "c10d.reduce_scatter_tensor_coalesced_": MessageRule("reduce_scatter", ("inputs",)),
    "c10d.alltoall_base_": MessageRule("all_to_all", ("input",)),
    "c10d.alltoall_": MessageRule("all_to_all", ("input_tensors",)),
    "_c10d_functional.all_reduce": MessageRule("all_reduce", ("input",)),
    "_c10d_functional.all_reduce_": MessageRule("all_reduce", ("input",)),
    "_c10d_functional.all_reduce_coalesced": MessageRule("all_reduce", ("inputs",)),
    "_c10d_functional.all_reduce_coalesced_": MessageRule("all_reduce", ("inputs",)),
    "_c10d_functional.broadcast": MessageRule("broadcast", ("input",)),
    "_c10d_functional.broadcast_": MessageRule("broadcast", ("input",)),
    "_c10d_functional.all_gather_into_tensor": MessageRule("all_gather", ("input",), times_group_size=True),
    "_c10d_functional.all_gather_into_tensor_out": MessageRule("all_gather", ("input",), times_group_size=True),
    "_c10d_functional.all_gather_into_tensor_coalesced": MessageRule("all_gather", ("inputs",), times_group_size=True),
    "_c10d_functional.reduce_scatter_tensor": MessageRule("reduce_scatter", ("input",)),
    "_c10d_functional.reduce_scatter_tensor_out": MessageRule("reduce_scatter", ("input",)),
    "_c10d_functional.reduce_scatter_tensor_coalesced": MessageRule("reduce_scatter", ("inputs",)),
    "_c10d_functional.all_to_all_single": MessageRule("all_to_all", ("input",)),
}

# Waiting for a functional collective is a stream wait on the compute stream: no kernel, no bytes. (Its timing
# effect, the compute stream waiting for the NCCL stream, is the predict stage's.)
register_zero_cost("_c10d_functional.wait_tensor", "_c10d_functional._wrap_tensor_autograd")


def _flat(value) -> list[TensorMeta]:
    if isinstance(value, TensorMeta):
        return [value]
    if isinstance(value, tuple):
        return [t for v in value for t in _flat(v)]
    return []


def message_bytes(op: OpRecord, rule: MessageRule) -> int:
    tensors = [t for name in rule.args for t in _flat(op.args.get(name))]
    total = sum(t.nbytes for t in tensors)
    return total * op.group_size if rule.times_group_size else total


def collective_of(op: OpRecord) -> tuple[str, int] | None:
    """(collective, message bytes S) of a recorded collective; None for any other op."""
    rule = MESSAGE_RULES.get(op.packet)
    return None if rule is None else (rule.collective, message_bytes(op, rule))


def _dtype(op: OpRecord, rule: MessageRule) -> str:
    tensors = [t for name in rule.args for t in _flat(op.args.get(name))]
    return tensors[0].dtype if tensors else "float32"


def collective_cost(op: OpRecord, ctx: CostContext) -> Cost:
    """One NCCL kernel that moves S bytes among group_size ranks. A collective recorded without its group
    (a capture made before group sizes were recorded) counts as a group of one: it moves nothing."""
    rule = MESSAGE_RULES[op.packet]
    size = message_bytes(op, rule)
    group = max(op.group_size, 1)
    return Cost(bytes_read=float(size), kernels=1, math=COLLECTIVE_KIND, dtype=_dtype(op, rule),
                kind=COLLECTIVE_KIND, key=(rule.collective, size, group))


register(*MESSAGE_RULES)(collective_cost)


# FSDP2's copies around its collectives (torch.distributed.fsdp custom ops). Each reads its inputs once and
# writes as many bytes. Their CUDA work items, as torch runs them:
# - all_gather_copy_in (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, all_gather_copy_in_cuda) is
#   torch._foreach_copy_ of the rank's shards into their slices of the all-gather buffer: multi_tensor_apply's
#   launches over the shards, two lists deep (H200, torch 2.11: 2 kernels for a Llama layer's 22M bf16
#   elements, 4 for its root's 65.5M, 1 for a GPT-2 block's 3.5M fp32: validation/distributed profiles);
# - split_with_sizes_copy and chunk_cat call aten's CUDA fast paths (aten/src/ATen/native/cuda/TensorShape.cu,
#   split_with_sizes_copy_out_cuda_contiguous_no_cast and _chunk_cat_out_cuda_contiguous): their pointer and
#   size tables are packed on the host and copied to the device with a non-blocking H2D memcpy
#   (detail::pack_vecs), then one kernel runs. Two work items (H200, torch 2.11: one kernel and one
#   "Memcpy HtoD (Pinned -> Device)" per call in both models).
FSDP_COPY_ARGS = {
    "fsdp.all_gather_copy_in": "all_gather_inputs",  # the rank's shards -> its slot of the all-gather buffer
    "fsdp.split_with_sizes_copy": "out",  # the gathered buffer -> the unsharded parameters
    "fsdp.chunk_cat": "tensors",  # the gradients -> the reduce-scatter buffer
    # torch 2.15's reduce-scatter copy-in (foreach_reduce_scatter_copy_in): chunk_cat's kernels, run once per
    # gradient dtype in the group (a bf16/fp32 mix casts in the copy)
    "fsdp.chunk_cat_mixed_dtype": "tensors",
}
PACKED_TABLE_MEMCPYS = 1  # pack_vecs' H2D copy of the kernel's pointer/size tables
FOREACH_COPY_DEPTH = 2  # _foreach_copy_(dsts, srcs): two tensor lists


def fsdp_copy_work_items(op: OpRecord, tensors: list[TensorMeta], ctx: CostContext) -> int:
    """Kernels and memcpys of one FSDP2 copy op on CUDA (see FSDP_COPY_ARGS)."""
    if op.packet == "fsdp.all_gather_copy_in":
        return multi_tensor_launches([t.numel for t in tensors], FOREACH_COPY_DEPTH,
                                     large_args=ctx.multi_tensor_large_args)
    if op.packet == "fsdp.chunk_cat_mixed_dtype":
        return max(len({t.dtype for t in tensors}), 1) * (1 + PACKED_TABLE_MEMCPYS)
    return 1 + PACKED_TABLE_MEMCPYS


def fsdp_copy_cost(op: OpRecord, ctx: CostContext) -> Cost:
    tensors = [t for t in _flat(op.args.get(FSDP_COPY_ARGS[op.packet])) if t.on_gpu]
    moved = float(sum(t.nbytes for t in tensors))
    return Cost(bytes_read=moved, bytes_written=moved, kernels=fsdp_copy_work_items(op, tensors, ctx),
                dtype=tensors[0].dtype if tensors else "float32", kind="copy",
                key=(tensors[0].shape[-1] if tensors and tensors[0].shape else 1,
                     tensors[0].itemsize if tensors else 4))


register(*FSDP_COPY_ARGS)(fsdp_copy_cost)
# torch 2.15: tells the caching allocator which stream reads a gradient buffer; a no-op on CUDA (its
# CompositeExplicitAutograd default returns), no device work.
register_zero_cost("fsdp.record_grad_output_stream")
