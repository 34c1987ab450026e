"""Windowed pooling kernels timed by their window's taps, outputs, inputs and bytes (the profile's
`timings.pool_windows`, read by predict/calibrated.py for costs keyed costs.pooling.WINDOW_KEY).

PyTorch's NC(D)HW pooling kernels run a thread per output (forward: max_pool_forward_nchw, avg_pool2d_out_cuda_frame,
max_pool3d_with_indices_single_out_frame, avg_pool3d_cuda_update_output) or per gradient element (backward: the
3-D kernels scatter into a zero-filled input gradient), each walking its window. Their time is then

    time = floor_us + us_per_tap x (outputs x window taps) + us_per_output x outputs
           + us_per_input x input elements + us_per_byte x bytes,

a non-negative least-squares fit on relative error per pooling op (forward and backward apart). On the H200's
grid (validation/h200_shape_kinds_grid_raw.json.gz: windows 2 to 11, strides 1 to 5, fp32 and bf16, 2-D and 3-D,
and the extras2 ResNet-stem pools) the bytes alone missed by a median 42-67% per op; leave-one-out errors of this
fit are stored beside its coefficients (`loo_median_error`).
"""

from __future__ import annotations

import math
import statistics

from kernelcast.costs.pooling import WINDOW_KEY
from kernelcast.predict.window_time import FEATURES, window_features

MIN_POINTS = 10  # fewer cases than this for an op: no fit (its byte curve prices it)


def _nnls_relative(rows: list[list[float]], times: list[float]) -> list[float]:
    import numpy as np
    from scipy.optimize import nnls

    a = np.array(rows, dtype=float) / np.array(times, dtype=float)[:, None]
    coef, _ = nnls(a, np.ones(len(times)))
    return [float(c) for c in coef]


def fit_one(points: list[tuple[list[float], float]], features: tuple[str, ...] = FEATURES) -> dict:
    """A non-negative least-squares fit on relative error of (feature row, measured µs) points, with its own
    and its leave-one-out median and worst errors (calibrate/spatial_rates.py fits its kernels the same way)."""
    rows, times = [p[0] for p in points], [p[1] for p in points]
    coef = _nnls_relative(rows, times)
    errors = [abs(sum(c * x for c, x in zip(coef, r)) / t - 1) for r, t in points]
    held_out = []
    for i, (row, t) in enumerate(points):
        rest = points[:i] + points[i + 1:]
        c = _nnls_relative([p[0] for p in rest], [p[1] for p in rest])
        held_out.append(abs(sum(a * x for a, x in zip(c, row)) / t - 1))
    return {"features": list(features), "coefficients": coef, "points": len(points),
            "median_error": round(statistics.median(errors), 4), "worst_error": round(max(errors), 4),
            "loo_median_error": round(statistics.median(held_out), 4), "loo_worst_error": round(max(held_out), 4)}


def fit(cases: list[tuple[object, float]]) -> dict:
    """{pool op: fit} from (Cost, measured µs) pairs of cases that ran one windowed pooling op and nothing else;
    an op with fewer than MIN_POINTS cases is left out. Needs numpy and scipy (absent: {})."""
    try:
        import scipy  # noqa: F401
    except ImportError:
        return {}
    by_pool: dict[str, list] = {}
    for cost, time_us in cases:
        _, pool, taps, outputs, inputs, _, _ = cost.key
        if time_us > 0 and math.isfinite(time_us):
            by_pool.setdefault(pool, []).append((window_features(taps, outputs, inputs, cost.bytes), time_us))
    return {pool: fit_one(points) for pool, points in sorted(by_pool.items()) if len(points) >= MIN_POINTS}


def is_window(cost) -> bool:
    return bool(cost.key) and cost.key[0] == WINDOW_KEY
