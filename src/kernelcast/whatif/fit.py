"""`kernelcast fit`: the largest value of a build() argument (the batch size) whose step fits in a GPU's memory.

The search is over captures: each candidate value is a capture of the workload built with it and a memory
prediction (predict/memory.py). It doubles from the low end until a value does not fit (or the high end is
reached), then bisects between the last value that fit and the first that did not. Memory grows with the batch
(more activations), which is what makes the bisection valid; a step whose memory does not is searched all the
same and the answer says which values were tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kernelcast.errors import KernelcastError


@dataclass(frozen=True)
class FitSearch:
    max_fit: int | None  # the largest value tried that fits (None: not even the low end)
    first_oom: int | None  # the smallest value tried above it that does not (None: the high end fits)
    tried: tuple[tuple[int, bool], ...] = field(default_factory=tuple)  # (value, fits) in the order tried


def check_range(low: int, high: int) -> None:
    """Raises KernelcastError for a range with no value to try (below 1, or high below low)."""
    if low < 1 or high < low:
        why = "it must start at 1 or more" if low < 1 else "low to high, please"
        raise KernelcastError(f"the range {low}..{high} has no value to try ({why})")


def largest_fitting(fits: Callable[[int], bool], low: int, high: int) -> FitSearch:
    """Doubling from `low`, then bisection: the largest value in [low, high] for which fits() holds."""
    check_range(low, high)
    tried: list[tuple[int, bool]] = []

    def check(value: int) -> bool:
        ok = fits(value)
        tried.append((value, ok))
        return ok

    if not check(low):
        return FitSearch(None, low, tuple(tried))
    good, bad = low, None
    while bad is None:
        if good == high:
            return FitSearch(high, None, tuple(tried))
        value = min(good * 2, high)
        if check(value):
            good = value
        else:
            bad = value
    while bad - good > 1:
        middle = (good + bad) // 2
        if check(middle):
            good = middle
        else:
            bad = middle
    return FitSearch(good, bad, tuple(tried))


def parse_range(text: str) -> tuple[str, int, int]:
    """"batch=1..1024" -> ("batch", 1, 1024)."""
    name, sep, span = text.partition("=")
    low, dots, high = span.partition("..")
    try:
        if not sep or not dots or not name.strip().isidentifier():
            raise ValueError
        return name.strip(), int(low), int(high)
    except ValueError:
        raise KernelcastError(f"--arg-range {text!r} is not NAME=LOW..HIGH with whole numbers "
                              "(e.g. --arg-range batch=1..1024)") from None


@dataclass(frozen=True)
class FitResult:
    name: str
    search: FitSearch
    prediction: object | None  # the Prediction at max_fit (kernelcast.predict.Prediction)
    gpu: str

    @property
    def throughput(self) -> float | None:
        """max_fit per second at the predicted step time (samples per second when the argument is the batch)."""
        pred = self.prediction
        if pred is None or self.search.max_fit is None or not pred.step_time_us:
            return None
        return self.search.max_fit / (pred.step_time_us / 1e6)


# The share of the usable memory a step must leave free to count as fitting: what the memory prediction can miss.
# Measured against the allocator: the held-out zoo's peak memory, worst 2.9% (docs/accuracy.md); a cuDNN
# convolution's workspace class is wrong for 19% of convolutions (predict/conv_workspace.py), a copy of its
# operands either way; the CUDA context's size is assumed, not measured. 5% holds the zoo's worst miss.
FIT_MARGIN = 0.05


def check_margin(margin: float) -> None:
    """Raises KernelcastError for a margin outside [0, 1)."""
    if not 0.0 <= margin < 1.0:
        raise KernelcastError(f"the margin {margin:.0%} must be at least 0% and below 100%")


def fits_with_margin(fit, margin: float) -> bool:
    """Whether a memory verdict (predict/memory.py Fit) fits with `margin` of its usable memory left free."""
    return bool(fit and fit.fits and fit.peak_reserved_bytes <= (1.0 - margin) * fit.usable_bytes)


def fit_workload(spec: str, gpu: str, name: str, low: int, high: int, args: dict | None = None,
                 world_size: int = 1, interconnect: str | None = None,
                 expandable_segments: bool = False, progress: Callable[[int, bool, object], None] | None = None,
                 margin: float = FIT_MARGIN) -> FitResult:
    """The largest `name` in [low, high] whose step fits on `gpu` with `margin` (a share, 0.05 = 5%) of the usable
    memory left free, with the prediction there. Raises KernelcastError for an empty range or a bad margin."""
    check_margin(margin)
    from kernelcast.api import capture_file
    from kernelcast.predict import predict_capture

    predictions: dict[int, object] = {}

    def fits(value: int) -> bool:
        cap = capture_file(spec, gpu, world_size, {**(args or {}), name: value})
        pred = predict_capture(cap, gpu, interconnect=interconnect, expandable_segments=expandable_segments)
        predictions[value] = pred
        ok = bool(pred.memory) and fits_with_margin(pred.memory.fit, margin)
        if progress is not None:
            progress(value, ok, pred)
        return ok

    search = largest_fitting(fits, low, high)
    return FitResult(name, search, predictions.get(search.max_fit) if search.max_fit is not None else None, gpu)
