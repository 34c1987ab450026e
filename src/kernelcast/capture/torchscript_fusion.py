"""TorchScript's fusion of elementwise chains (NNC), applied to the ops a captured step's script modules ran.

A torch.jit.script'ed module runs under the profiling graph executor: its first calls run the graph's aten ops one
by one while recording shapes, then the TensorExpr fuser (torch/csrc/jit/passes/tensorexpr_fuser.cpp) replaces
each connected chain of elementwise ops on one GPU with one generated kernel (a `prim::TensorExprGroup`, compiled
by NNC through NVRTC), so in steady state a chain costs one launch that reads its inputs and writes what leaves
it. Measured on an H100 (validation/h100/user_kinds_dec08, scripts/device/probe_user_kinds.py and the zoo's
torchscript_mlp_forward): a Linear's output through sigmoid, multiplies and adds ran one `fused_sigmoid_mul_...`
kernel per block beside the GEMM, 16 kernels for 8 blocks where the aten ops are 48.

A capture cannot compile NNC's kernels (NVRTC needs a GPU), so the fuser is off and the ops are recorded one by
one, tagged TORCHSCRIPT_TAG; this pass then forms the groups as the fuser would in steady state: maximal runs
of consecutive elementwise ops (torch's pointwise tag, out of place, on the GPU, one output shape) inside one
call of a script module (TORCHSCRIPT_CALL_TAG marks each call's first op), at least MIN_GROUP_SIZE of them,
across ops that launch nothing (views, an op CUDA runs as its children). Each member is tagged FUSED_MEMBER_TAG
(no kernel of its own); the last carries the group's kernel (FUSION_GROUP_TAG) and what it reads from outside
the group and writes that is read after it or is its last result (args FUSION_READS / FUSION_WRITES), which
costs/fused.py prices as one pointwise kernel and predict/l2.py follows as that kernel's reads and writes.

Not modelled: the fuser's type checks (it fuses float, half and bfloat16 on CUDA; an op it cannot lower, such
as a random one, ends a group here only if torch does not tag it pointwise), and its reductions (off by default).
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import (DECOMPOSED_TAG, FUSED_MEMBER_TAG, FUSION_GROUP_OP, FUSION_GROUP_TAG, FUSION_OPS,
                                FUSION_READS, FUSION_WRITES, TORCHSCRIPT_CALL_TAG, TORCHSCRIPT_TAG, OpRecord,
                                TensorMeta)

# tensorexpr_fuser.cpp: a group of fewer ops than the fuser's minimum group size (FLAGS_torch_jit_te_min_group_size's
# default, 2) is not fused
MIN_GROUP_SIZE = 2
_TRANSPARENT_TAGS = ("view", DECOMPOSED_TAG, "host")


def _fusible(op: OpRecord) -> bool:
    outs = op.tensors_out()
    return ("pointwise" in op.tags and TORCHSCRIPT_TAG in op.tags and not op.decomposed
            and not op.name.endswith("_") and len(outs) == 1 and outs[0].on_gpu)


def _transparent(op: OpRecord) -> bool:
    """An op that launches nothing of its own: a view, an op whose children launch its kernels, a host marker."""
    return any(tag in op.tags for tag in _TRANSPARENT_TAGS)


def fusion_groups(ops: tuple[OpRecord, ...]) -> list[list[int]]:
    """Indices of each group's members, in order (see the module docstring)."""
    groups: list[list[int]] = []
    run: list[int] = []

    def close() -> None:
        if len(run) >= MIN_GROUP_SIZE:
            groups.append(list(run))
        run.clear()

    for op in ops:
        if TORCHSCRIPT_CALL_TAG in op.tags:  # another call of a script module: its own graph, its own groups
            close()
        if _fusible(op):
            if run and (ops[run[0]].tensors_out()[0].shape != op.tensors_out()[0].shape
                        or ops[run[0]].phase != op.phase):
                close()
            run.append(op.index)
        elif not (_transparent(op) and TORCHSCRIPT_TAG in op.tags):
            close()
    close()
    return groups


def _read_later(ops: tuple[OpRecord, ...], after: int, storages: set[int]) -> set[int]:
    """Which of `storages` an op after index `after` reads before any op makes a new tensor there (a storage id the
    caching allocator gave a freed tensor's memory again names another tensor from then on). A view reads nothing:
    the op that reads the view does."""
    alive, read = set(storages), set()
    for op in ops[after + 1:]:
        if not alive:
            break
        if op.is_view:  # allocates nothing either
            continue
        ins = alive & {t.storage for t in op.tensors_in()}
        read |= ins
        alive -= ins | {t.storage for t in op.tensors_out()}
    return read


def _group_io(ops: tuple[OpRecord, ...], members: list[int]) -> tuple[tuple[TensorMeta, ...], tuple[TensorMeta, ...]]:
    """(tensors the group reads from outside it, tensors it writes that are read after it or are its last
    result), each storage once, GPU tensors only. In member order: a storage an earlier member wrote is the group's
    own (the caching allocator hands a freed intermediate's memory to a later one, so the same storage can hold an
    outside input first and a member's result after), and of a storage written twice only the last tensor
    can leave the group."""
    reads: dict[int, TensorMeta] = {}
    final: dict[int, tuple[int, TensorMeta]] = {}  # storage -> (member, the last tensor a member wrote there)
    for i in members:
        for t in ops[i].tensors_in():
            if t.on_gpu and t.storage not in final:
                reads.setdefault(t.storage, t)
        for t in ops[i].tensors_out():
            if t.on_gpu:
                final[t.storage] = (i, t)
    later = _read_later(ops, members[-1], set(final))
    writes = tuple(t for storage, (i, t) in final.items() if storage in later or i == members[-1])
    return tuple(reads.values()), writes


def with_fusion(ops: tuple[OpRecord, ...]) -> tuple[OpRecord, ...]:
    """The ops with TorchScript's fusion groups marked (indices and everything else unchanged)."""
    out = list(ops)
    for members in fusion_groups(ops):
        reads, writes = _group_io(ops, members)
        for i in members[:-1]:
            out[i] = dataclasses.replace(ops[i], tags=(*ops[i].tags, FUSED_MEMBER_TAG))
        last = ops[members[-1]]
        # recorded as the group's kernel (FUSION_GROUP_OP), not as the aten op it ends with: reports name it so
        out[members[-1]] = dataclasses.replace(last, op=FUSION_GROUP_OP, tags=(*last.tags, FUSION_GROUP_TAG),
                                               args={**last.args, FUSION_READS: reads, FUSION_WRITES: writes,
                                                     FUSION_OPS: len(members)})
    return tuple(out)
