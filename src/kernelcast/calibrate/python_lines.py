"""The model's Python priced per counted line, fitted to steps measured on the device's host (issue 33).

The capture counts the Python lines the model runs (capture/host_clock.py LineCounter) instead of relying on
the CPU time it reads for them, which moved 12-24% between idle processes on the same machine. The host model
prices a line at `per_line_us` on the calibrated host (predict/host.py HostModel.python_line_us). This module
fits it; scripts/fit/fit_python_lines.py captures the zoo's workloads and makes the rows.

A row is one host-bound workload measured on the device: its predicted step with no model Python priced
(`step0_us`), how much the step grows per µs of per-line cost (`slope`: the step predicted at a trial per-line
cost, less step0_us, over that cost; for a host-bound step it is the counted lines), and the measured step
(`measured_us`, the median of separate fresh-process runs). Each row alone asks for the per-line cost
a_i = (measured_us - step0_us) / slope; the fit takes the weighted median of the a_i with weights slope /
measured_us, which is the cost minimising the summed relative error of the steps |step0 + a * slope - measured| /
measured (least absolute deviations in one parameter: a few workloads whose host time is not the model's Python,
such as a cuDNN RNN's host-side setup, do not pull it). Held out: each row predicted with the cost fitted without
it. The range: the 10th and 90th percentile of what each held-out row's model Python would have had to be
multiplied by to meet its measured step, over the rows where it is at least RANGE_MIN_SHARE of the step; the host
model applies them to the counted part as the printed range.
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

RANGE_QUANTILES = (0.1, 0.9)
# A row speaks for the range when its counted Python is at least this share of its measured step: below it the
# step's error is the rest of the host model's (a cuDNN RNN's setup, a linalg call's), and the factor that would
# put it on the model's Python alone runs to -65x or +42x (the zoo, 2026-12-05).
RANGE_MIN_SHARE = 0.15
MIN_ROWS = 5  # fewer rows: no fit


class Row(NamedTuple):
    name: str
    step0_us: float  # predicted step with the model's Python at 0 µs per line
    slope: float  # d(step µs) / d(µs per line)
    measured_us: float


def weighted_median(values: list[float], weights: list[float]) -> float:
    """The value at which half the total weight lies on either side (the lower one at a tie)."""
    pairs = sorted(zip(values, weights))
    half, seen = sum(weights) / 2.0, 0.0
    for value, weight in pairs:
        seen += weight
        if seen >= half:
            return value
    return pairs[-1][0]


def per_line_us(rows: list[Row]) -> float:
    """The per-line cost minimising the summed relative step error over the rows (module docstring). Raises
    ValueError with fewer than MIN_ROWS rows of positive slope."""
    usable = [r for r in rows if r.slope > 0]
    if len(usable) < MIN_ROWS:
        raise ValueError(f"{len(usable)} host-bound workloads with counted lines: at least {MIN_ROWS} are needed")
    return max(weighted_median([(r.measured_us - r.step0_us) / r.slope for r in usable],
                               [r.slope / r.measured_us for r in usable]), 0.0)


def fit(rows: list[Row]) -> dict:
    """{per_line_us, range, held_out: {median_error, signed_median_error, within_15, rows}, per_row} from rows:
    the cost on all rows, each row's step error with the cost fitted without it, and the range factors."""
    cost = per_line_us(rows)
    errors, factors, per_row = [], [], {}
    for row in rows:
        held = per_line_us([r for r in rows if r is not row])
        predicted = row.step0_us + held * row.slope
        errors.append(predicted / row.measured_us - 1.0)
        if held > 0 and held * row.slope >= RANGE_MIN_SHARE * row.measured_us:
            factors.append((row.measured_us - row.step0_us) / (held * row.slope))
        per_row[row.name] = {"held_out_error": round(errors[-1], 4), "lines_us_per_unit": round(row.slope, 1)}
    qs = statistics.quantiles(factors, n=100, method="inclusive") if len(factors) > 1 else [1.0] * 99
    low, high = (max(qs[int(q * 100) - 1], 0.0) for q in RANGE_QUANTILES)
    return {"per_line_us": round(cost, 5), "range": [round(min(low, 1.0), 3), round(max(high, 1.0), 3)],
            "held_out": {"by": "workload (leave one out)", "rows": len(rows),
                         "median_error": round(statistics.median(abs(e) for e in errors), 4),
                         "signed_median_error": round(statistics.median(errors), 4),
                         "within_15": round(sum(abs(e) <= 0.15 for e in errors) / len(errors), 3)},
            "per_row": per_row}
