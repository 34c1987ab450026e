"""Measured kernel times matched to a prediction's ops, for measured points on the roofline.

A device run (`kernelcast measure --json`, `kernelcast validate --json`, or the zoo's
validation/zoo_measured.json.gz) lists each GPU work item with its duration and the aten ops on its launch stack.
Each kernel is attributed to the outermost op of that chain that the capture recorded as an op the step called
(the innermost op when none is: scripts/eval/zoo_validate.py attributes the same way), then matched to the predicted
ops of that op family (in-place and out-of-place variants launch the same kernels: "add_" is "add") in launch
order, each predicted op taking as many kernels as it predicts (validate.compare does the same per op class).
A predicted op then has a measured time: the sum of its matched kernels' durations.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Iterable

from kernelcast.records import PredictionRecord, root_indices


def packet(op: str) -> str:
    """"aten.mm.default" / "aten::mm" / "mm" -> "mm"."""
    parts = op.replace("aten::", "aten.").split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "aten" else op


def family(op: str) -> str:
    """In-place and out-of-place variants launch the same kernel: "add_" and "add" are one family."""
    return packet(op).rstrip("_")


def owner(chain: Iterable[str], recorded: set[str]) -> str:
    """The outermost op of a launch chain (outermost first) that the capture recorded, else the innermost."""
    chain = [packet(c) for c in chain]
    known = [op for op in chain if op in recorded]
    return known[0] if known else (chain[-1] if chain else "(no aten op)")


@dataclass(frozen=True)
class MeasuredMatch:
    time_us_by_op: dict[int, float]  # predicted op index -> measured µs of the kernels matched to it
    matched_kernels: int
    unmatched_kernels: int  # measured kernels of an op family the prediction launches fewer kernels for
    unmatched_us: float
    device: str = ""

    def caption(self) -> str:
        where = f" on the {self.device}" if self.device else ""
        left = (f"; {self.unmatched_kernels} measured kernels ({self.unmatched_us:.0f} µs) matched no predicted op"
                if self.unmatched_kernels else "")
        return (f"Measured{where}: each kernel attributed to the outermost aten op of its launch chain that the "
                f"capture recorded, and matched in launch order to the predicted ops of that op family; a point's "
                f"measured FLOP/s is its predicted FLOPs over the measured time of its {self.matched_kernels} "
                f"matched kernels{left}.")


def match_kernels(rec: PredictionRecord, kernels: Iterable[tuple[Any, float]], device: str = "") -> MeasuredMatch:
    """`kernels`: (launch chain outermost first, or the op already attributed, duration µs), in launch order."""
    recorded = {packet(op.op) for op in rec.ops if op.parent < 0}
    roots = root_indices(rec.ops)
    queues: dict[str, collections.deque] = collections.defaultdict(collections.deque)
    for op, root in zip(rec.ops, roots):
        queues[family(rec.ops[root].op)].extend([op.index] * op.kernels)
    times: dict[int, float] = collections.defaultdict(float)
    matched = unmatched = 0
    unmatched_us = 0.0
    for chain, duration_us in kernels:
        op = owner(chain, recorded) if isinstance(chain, (list, tuple)) else packet(chain)
        queue = queues.get(family(op))
        if queue:
            times[queue.popleft()] += duration_us
            matched += 1
        else:
            unmatched += 1
            unmatched_us += duration_us
    return MeasuredMatch(dict(times), matched, unmatched, unmatched_us, device)


def kernels_of(doc: dict) -> tuple[list[tuple[Any, float]], str]:
    """(kernels as match_kernels takes them, device) from a measure or validate JSON, or a zoo entry.

    Rows are [op, module, name, duration_us] (measure; a fifth element, the launch chain, where recorded) or
    [chain, module, name, duration_us] (the zoo)."""
    measured = doc.get("measured", doc)
    if not isinstance(measured, dict) or not isinstance(measured.get("kernels"), list):
        raise ValueError("no measured kernels (expected the JSON of `kernelcast measure` or `kernelcast validate`)")
    out = []
    for row in measured["kernels"]:
        if not isinstance(row, (list, tuple)) or len(row) < 4:
            raise ValueError(f"a measured kernel row is {row!r}, not [op, module, name, duration_us]")
        chain = row[4] if len(row) > 4 and isinstance(row[4], list) and row[4] else row[0]
        out.append((chain, float(row[3])))
    return out, str(measured.get("device", ""))


def measured_times(rec: PredictionRecord, measured: Any) -> tuple[dict[int, float] | None, str]:
    """(op index -> measured µs, a caption saying how they were matched) from any form a measurement comes in:
    such a mapping already, a measure or validate JSON (or a zoo entry), or a measure.Measurement or
    validate.Validation object (duck-typed: report/ does not import them)."""
    if measured is None:
        return None, ""
    if hasattr(measured, "measurement"):  # a Validation
        measured = measured.measurement
    if hasattr(measured, "kernels") and not isinstance(measured, dict):  # a Measurement
        kernels = [(list(k.chain) or k.op, k.duration_us) for k in measured.kernels]
        match = match_kernels(rec, kernels, getattr(measured, "device", ""))
        return match.time_us_by_op, match.caption()
    if isinstance(measured, dict) and ("kernels" in measured or "measured" in measured):
        kernels, device = kernels_of(measured)
        match = match_kernels(rec, kernels, device)
        return match.time_us_by_op, match.caption()
    if isinstance(measured, dict) and all(isinstance(k, int) for k in measured):
        return {k: float(v) for k, v in measured.items()}, ""
    raise TypeError(f"cannot read measured times from a {type(measured).__name__}")
