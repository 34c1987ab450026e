"""torch._grouped_mm on CUTLASS's grouped GEMM (MoE experts): a launch floor plus the larger of its FLOPs at a
sustained matrix rate and its bytes at a sustained bandwidth (the profile's `timings.grouped_gemm`, read by
predict/calibrated.py).

The CUTLASS path (GroupedBlas.cpp) runs a kernel that writes the per-group problem table, then the grouped GEMM;
its tiles cover every group, so the time follows the whole problem's FLOPs and bytes, not one cuBLAS GEMM's
(zoo mixtral_forward on the H200: 24-30 us per call, where the single-GEMM roofline gave ~7 us). Fitted on the
calibration's grouped_mm_grid cases (microbenchmarks only): the two rates and the floor by grid search for the
lowest median |predicted / measured - 1|, in the roofline's max form, which keeps both rates physical (a sum
form fitted a matrix rate above the datasheet peak).
"""

from __future__ import annotations

import itertools

from kernelcast.predict.calibrated import grouped_gemm_us

CASE_KINDS = ("grouped_mm", "grouped_mm_weight_grad")  # calibrate/grids.py, grouped_mm_grid
FLOPS_RATES_TFLOPS = tuple(400.0 + 10.0 * i for i in range(60))  # 400-990 TFLOP/s: up to the bf16 peak
BYTES_RATES_TBS = tuple(1.5 + 0.05 * i for i in range(61))  # 1.5-4.5 TB/s
FLOORS_US = tuple(0.5 * i for i in range(31))  # 0-15 µs
MIN_POINTS = 8


def points(cases: list[dict]) -> list[tuple[float, float, float]]:
    """(FLOPs, bytes, device µs) of each grouped_mm_grid case: 2 x tokens x K x N FLOPs; the tokens, the weights
    and the output (or, for the weight gradient, the two operands and the per-group weights) once each in bf16."""
    out = []
    for case in cases:
        if case.get("kind") not in CASE_KINDS or "error" in case:
            continue
        g, t, k, n = case["groups"], case["tokens_per_group"], case["k"], case["n"]
        out.append((2.0 * g * t * k * n, 2.0 * (g * t * k + g * k * n + g * t * n), case["device_us"]))
    return out


def fit(cases: list[dict]) -> dict | None:
    """The profile's `timings.grouped_gemm`, or None with fewer than MIN_POINTS cases or without numpy."""
    try:
        import numpy as np
    except ImportError:
        return None
    pts = points(cases)
    if len(pts) < MIN_POINTS:
        return None
    flops, nbytes, measured = (np.array(column) for column in zip(*pts))
    floors = np.array(FLOORS_US)[:, None]
    best = None
    for tflops, tbs in itertools.product(FLOPS_RATES_TFLOPS, BYTES_RATES_TBS):
        work = np.maximum(flops / (tflops * 1e6), nbytes / (tbs * 1e6))
        medians = np.median(np.abs((floors + work) / measured - 1), axis=1)  # one per floor
        i = int(np.argmin(medians))
        if best is None or medians[i] < best[0]:
            best = (float(medians[i]), {"floor_us": FLOORS_US[i], "flops_per_us": tflops * 1e6,
                                        "bytes_per_us": tbs * 1e6})
    median, candidate = best
    errors = sorted(abs(grouped_gemm_us(candidate, f, b) / t - 1) for f, b, t in pts)
    return {**candidate, "points": len(pts), "median_error": round(median, 4),
            "p90_error": round(errors[int(0.9 * len(errors))], 4), "source": "calibrate/grouped_gemm.py"}
