"""Windowed pooling's kernel time from the profile's fit (timings `pool_windows`, calibrate/window_rates.py).

PyTorch's NC(D)HW pooling kernels run a thread per output, or per gradient element backward, each walking its
window (aten/src/ATen/native/cuda/DilatedMaxPool2d.cu, AveragePool2d.cu, DilatedMaxPool3d.cu, AveragePool3d.cu),
so the walk's time is

    floor_us + us_per_tap x (outputs x window taps) + us_per_output x outputs + us_per_input x input elements
    + us_per_byte x bytes.
"""

from __future__ import annotations

FEATURES = ("floor", "taps", "outputs", "inputs", "bytes")


def window_features(taps: int, outputs: int, inputs: int, nbytes: float) -> list[float]:
    """The fit's inputs for one kernel: 1, outputs x window taps, outputs, input elements, bytes moved."""
    return [1.0, float(taps) * outputs, float(outputs), float(inputs), float(nbytes)]


def window_us(fit: dict, taps: int, outputs: int, inputs: int, nbytes: float) -> float:
    """µs of one windowed pooling op on the profiled GPU by its fit (its `coefficients`, in FEATURES order)."""
    return sum(c * x for c, x in zip(fit["coefficients"], window_features(taps, outputs, inputs, nbytes)))
