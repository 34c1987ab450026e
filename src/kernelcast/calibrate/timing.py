"""How a calibration case is measured on the GPU: the L2 flush between calls, the op records taken from the call,
and the profiled calls' work items and device time (the timing protocol calibrate's sections and sweep share).
"""

from __future__ import annotations

import statistics
from typing import Callable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from kernelcast.capture.recorder import OpSchema, output_metas
from kernelcast.records import OpRecord

aten = torch.ops.aten
REPEATS = 3
DEV = "cuda"
# Between calls the L2 cache is flushed by inverting a buffer larger than any L2 (as triton.testing.do_bench
# does), so small inputs are not served from a warm cache; the flush kernel's name keeps it out of the counts.
FLUSH_BYTES = 256 << 20
FLUSH_KERNEL = "bitwise_not"
_flush_buffer: torch.Tensor | None = None


def flush_l2() -> None:
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = torch.zeros(FLUSH_BYTES, dtype=torch.uint8, device=DEV)
    _flush_buffer.bitwise_not_()


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
    fn()
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            if flush:
                flush_l2()
            fn()
            torch.cuda.synchronize()
    items = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA and FLUSH_KERNEL not in e.name),
                   key=lambda e: e.time_range.start)
    per_call = max(1, len(items) // repeats)
    return [{"items": [e.name[:90] for e in items[r * per_call:(r + 1) * per_call]],
             "device_us": sum(e.time_range.end - e.time_range.start for e in items[r * per_call:(r + 1) * per_call])}
            for r in range(repeats)]


def record(results: list, kind: str, params: dict, fn: Callable, flush: bool = True) -> None:
    try:
        snapshot = OpSnapshot()
        with snapshot:
            fn()
        calls = _profile_calls(fn, flush=flush)
        results.append({"kind": kind, **params, "ops": [op.to_json() for op in snapshot.ops],
                        "items": calls[-1]["items"], "n_items": len(calls[-1]["items"]),
                        "device_us": statistics.median(c["device_us"] for c in calls),
                        "device_us_all": [round(c["device_us"], 3) for c in calls]})
    except Exception as exc:  # keep sweeping; the failure is data too
        results.append({"kind": kind, **params, "error": f"{type(exc).__name__}: {exc}"[:300]})


def randn(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=dtype)
