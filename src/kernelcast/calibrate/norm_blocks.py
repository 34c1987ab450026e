"""NCHW batch-norm backward as PyTorch's CUDA kernel runs it: one thread block per channel (the profile's
`timings.batch_norm_backward_blocks`, read by predict/calibrated.py).

batch_norm_backward_cuda_template (aten/src/ATen/native/cuda/Normalization.cuh) views the input as
(N, C, H*W) and launches batch_norm_backward_kernel on a grid of C blocks: each block reduces its channel's
N x H*W values of x and dy, then writes its channel's dx. The time is so set by the reduction length per
channel and by how many blocks run at once, not by the bytes: on the H200 a (32, 16, 112, 112) bf16 backward
took 500 µs and a (32, 64, 112, 112) one, four times the bytes, 696 µs (zoo mobilenet_train). The model:

    time = floor_us + ns_per_element[item size] x N*H*W x ceil(C / (blocks_per_sm x SMs)) / 1000

fitted by least squares on relative error over the calibration's own NCHW batch-norm backward cases
(microbenchmarks only), for each candidate of blocks_per_sm; the candidate with the lowest median error is kept.
"""

from __future__ import annotations

import math
import statistics

from kernelcast.predict.calibrated import batch_norm_backward_us as predict_us

BLOCKS_PER_SM_CANDIDATES = (1, 2, 3, 4, 8)
CASE_KINDS = ("batch_norm_bwd", "native_batch_norm_bwd")
BACKWARD_OP = "aten.native_batch_norm_backward"


def channel_blocks(shape: list[int], stride: list[int], dtype: str) -> tuple[int, int, int] | None:
    """(C, N x H x W, item size) of an NCHW batch-norm input; None for channels_last (other kernels)."""
    if len(shape) < 3 or (len(shape) == 4 and stride[1] == 1 and shape[1] > 1):
        return None
    itemsize = 4 if dtype == "float32" else 2
    return shape[1], shape[0] * math.prod(shape[2:]), itemsize


def backward_points(cases: list[dict]) -> list[tuple[int, int, int, float]]:
    """(C, N*H*W, item size, device µs) of every NCHW native batch-norm backward case of a calibration run."""
    points = []
    for case in cases:
        if case.get("kind") not in CASE_KINDS or "error" in case:
            continue
        ops = [o for o in case.get("ops", ()) if o["op"].startswith(BACKWARD_OP)]
        if not ops:
            continue
        x = ops[0]["args"]["input"]
        blocks = channel_blocks(x["T"], x["stride"], x["dtype"])
        if blocks is not None:
            points.append((*blocks, case["device_us"]))
    return points


def _least_squares(points: list, blocks: int) -> tuple[float, dict]:
    """floor_us and ns per element by item size, minimizing the relative error (rows weighted by 1/time)."""
    import numpy as np

    sizes = sorted({p[2] for p in points})
    rows = [[1.0, *((p[1] * math.ceil(p[0] / blocks) / 1000.0) if p[2] == s else 0.0 for s in sizes)]
            for p in points]
    y = np.array([p[3] for p in points])
    coef, *_ = np.linalg.lstsq(np.array(rows) / y[:, None], np.ones(len(points)), rcond=None)
    return float(coef[0]), {str(s): float(c) for s, c in zip(sizes, coef[1:])}


def fit(cases: list[dict], sm_count: int) -> dict | None:
    """The profile's `timings.batch_norm_backward_blocks`, or None with fewer than 4 points or no numpy."""
    points = backward_points(cases)
    try:
        import numpy  # noqa: F401
    except ImportError:
        return None
    if len(points) < 4:
        return None
    best = None
    for per_sm in BLOCKS_PER_SM_CANDIDATES:
        floor_us, ns = _least_squares(points, per_sm * sm_count)
        candidate = {"blocks_per_sm": per_sm, "floor_us": round(floor_us, 4),
                     "ns_per_element": {k: round(v, 6) for k, v in ns.items()}}
        errors = [abs(predict_us(candidate, c, n, s, sm_count) / t - 1) for c, n, s, t in points]
        candidate["median_error"] = round(statistics.median(errors), 4)
        candidate["worst_error"] = round(max(errors), 4)
        if best is None or candidate["median_error"] < best["median_error"]:
            best = candidate
    return {**best, "points": len(points), "sm_count": sm_count}
