"""`kernelcast sweep`: the step predicted over a range of one build() argument (the batch), each value captured
again, and where the step turns GPU-bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kernelcast.errors import KernelcastError


@dataclass(frozen=True)
class SweepPoint:
    value: int
    step_us: float
    gpu_us: float
    bound: str
    fits: bool | None  # None: no memory prediction

    def throughput(self) -> float:
        """values per second (samples per second when the argument is the batch)."""
        return self.value / (self.step_us / 1e6) if self.step_us else 0.0


def sweep_values(low: int, high: int) -> tuple[int, ...]:
    """low, then powers of two above it, then high: the values a sweep captures."""
    if low < 1 or high < low:
        raise KernelcastError(f"the range {low}..{high} is empty (it must be 1 or more, low to high)")
    values, v = [low], 1
    while v <= high:
        if v > low:
            values.append(v)
        v *= 2
    if values[-1] != high:
        values.append(high)
    return tuple(values)


def sweep(spec: str, gpu: str, name: str, low: int, high: int, args: dict | None = None,
          progress: Callable[[SweepPoint], None] | None = None) -> tuple[SweepPoint, ...]:
    """The step predicted at each of sweep_values(low, high) for build() argument `name`."""
    from kernelcast.api import capture_file
    from kernelcast.predict import predict_capture

    points = []
    for value in sweep_values(low, high):
        pred = predict_capture(capture_file(spec, gpu, 1, {**(args or {}), name: value}), gpu)
        fit = pred.memory.fit if pred.memory is not None else None
        point = SweepPoint(value, pred.step_time_us, pred.gpu_time_us, pred.bound, None if fit is None else fit.fits)
        points.append(point)
        if progress is not None:
            progress(point)
    return tuple(points)


def turns_gpu_bound(points: tuple[SweepPoint, ...]) -> int | None:
    """The smallest value from which every larger one is predicted GPU-bound (None: never)."""
    first = None
    for p in points:
        if p.bound == "gpu":
            first = p.value if first is None else first
        else:
            first = None
    return first
