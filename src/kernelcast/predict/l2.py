"""Which bytes an op reads from the L2 cache rather than from device memory.

Memory-bound kernels run up to ~2x faster when their inputs are still in L2 (calibration measures both). The
tracker follows tensor storages through the op sequence: what an op reads and writes becomes most recently
used; the least recently used storages leave once the total exceeds the L2 size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from kernelcast.records import FUSED_MEMBER_TAG, FUSION_GROUP_TAG, FUSION_READS, FUSION_WRITES, OpRecord, TensorMeta


def _storage_bytes(t: TensorMeta) -> int:
    return t.touched_bytes


def _reads(op: OpRecord) -> list[TensorMeta]:
    """What the op's kernels read: a TorchScript fusion group's kernel reads only what enters the group
    (capture/torchscript_fusion.py); its members' intermediates stay in registers."""
    return list(op.args.get(FUSION_READS, ())) if FUSION_GROUP_TAG in op.tags else op.tensors_in()


def _touched(op: OpRecord) -> list[TensorMeta]:
    if FUSED_MEMBER_TAG in op.tags:  # fused: its tensors never reach memory
        return []
    if FUSION_GROUP_TAG in op.tags:
        return [*op.args.get(FUSION_READS, ()), *op.args.get(FUSION_WRITES, ())]
    return [*op.tensors_in(), *op.tensors_out()]


class L2Tracker:
    def __init__(self, capacity_bytes: float) -> None:
        self.capacity = capacity_bytes
        self._resident: OrderedDict[int, int] = OrderedDict()
        self._total = 0

    def warm_fraction(self, op: OpRecord) -> float:
        """Share of the op's input bytes that are resident in L2 when it starts."""
        inputs = [t for t in _reads(op) if t.on_gpu and t.numel]
        total = sum(_storage_bytes(t) for t in inputs)
        if not total:
            return 0.0
        warm = sum(min(_storage_bytes(t), self._resident.get(t.storage, 0)) for t in inputs if t.storage)
        return min(warm / total, 1.0)

    def touch(self, op: OpRecord) -> None:
        for t in _touched(op):
            if not (t.on_gpu and t.storage and t.numel):
                continue
            size = _storage_bytes(t)
            self._total -= self._resident.pop(t.storage, 0)
            if size > self.capacity:
                continue
            self._resident[t.storage] = size
            self._total += size
        while self._total > self.capacity and self._resident:
            _, size = self._resident.popitem(last=False)
            self._total -= size


def warm_shares(ops: Sequence[OpRecord], capacity_bytes: float) -> list[float]:
    """Per op, the share of its input bytes resident in L2 when it starts (0 to 1), the tracker run over the ops in
    order from an empty cache; an op its parent decomposed leaves the tracker to its children (predict_capture and
    scripts/eval/foreach_warm_check.py read the same shares)."""
    tracker = L2Tracker(capacity_bytes)
    shares = []
    for op in ops:
        shares.append(tracker.warm_fraction(op))
        if not op.decomposed:  # its children read and write its tensors
            tracker.touch(op)
    return shares
