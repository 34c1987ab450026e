"""How a calibration case is recorded on the GPU: the op records taken from the call, and the profiled calls'
work items and device time (kernelcast.measure kernel_durations: the L2 flush before each call and the profiler's
kernel times, the protocol every measurement shares).
"""

from __future__ import annotations

import statistics
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelcast.capture.recorder import OpSchema, output_metas
from kernelcast.measure import kernel_durations
from kernelcast.records import OpRecord

aten = torch.ops.aten
REPEATS = 3
DEV = "cuda"
# The L2 flush before each call and the profiled timing are the measurement module's (kernelcast.measure: one
# protocol for every measurement on a GPU).


class OpSnapshot(TorchDispatchMode):
    """Records the aten ops one call dispatches, as the capture would (minus module and source)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[OpRecord] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace == "aten" and not func.is_view:
            schema = OpSchema(func)
            self.ops.append(OpRecord(index=len(self.ops), op=str(func), args=schema.bind(args, kwargs),
                                     outputs=output_metas(out), tags=schema.tags))
        return out


def _profile_calls(fn: Callable, repeats: int = REPEATS, flush: bool = True) -> list[dict]:
    return [{"items": [name[:90] for name, _ in items], "device_us": sum(us for _, us in items),
             "items_us": [us for _, us in items]} for items in kernel_durations(fn, repeats, flush)]


def record(results: list, kind: str, params: dict, fn: Callable, flush: bool = True, per_item: bool = False) -> None:
    """One case: the aten ops one call dispatches, and its kernels' time per call (the median over REPEATS calls,
    each after the L2 flush unless `flush` is off); with `per_item`, each work item's median too ("items_us",
    in the order they ran), where a call's kernels must be told apart (a zero fill before the kernel timed)."""
    try:
        snapshot = OpSnapshot()
        with snapshot:
            fn()
        calls = _profile_calls(fn, flush=flush)
        row = {"kind": kind, **params, "ops": [op.to_json() for op in snapshot.ops],
               "items": calls[-1]["items"], "n_items": len(calls[-1]["items"]),
               "device_us": statistics.median(c["device_us"] for c in calls),
               "device_us_all": [round(c["device_us"], 3) for c in calls]}
        if per_item:
            same = [c["items_us"] for c in calls if len(c["items_us"]) == len(calls[-1]["items_us"])]
            row["items_us"] = [round(statistics.median(us), 3) for us in zip(*same)]
        results.append(row)
    except Exception as exc:  # keep sweeping; the failure is data too
        results.append({"kind": kind, **params, "error": f"{type(exc).__name__}: {exc}"[:300]})


def randn(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=dtype)
