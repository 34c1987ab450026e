"""Time models of the sparse-gradient kernels (the profile's `timings.sparse`, read by predict/calibrated.py),
fitted on calibrate's sparse_grid cases (microbenchmarks only; the zoo's sparse recommenders and
scripts/device/probe_sparse.py's cases are the check, scripts/eval/sparse_check.py).

- coalesce (_coalesce_sparse_cuda, costs/sparse.py): a fixed chain of small kernels, then CUB's merge sort, whose
  passes are each a partition and a merge kernel at a latency-bound time, and whose keys cost a little per key
  and per key and pass. Linear in (1, merge passes, nnz, nnz x passes, value bytes), least squares on the
  relative error. On the H200's grid, held out one nnz at a time: 13% median (calibrate output prints it).
- nn.EmbeddingBag's forward (one gather-and-reduce kernel): a launch floor plus the larger of a time per
  index gathered and the bytes at a sustained bandwidth, by grid search for the lowest median |error| (the form
  of the row gathers, calibrate/unit_rates.py, whose fit on index_select priced these up to 3x: the bag kernel
  walks its bag's rows with a warp per row slice).
"""

from __future__ import annotations

import itertools
import statistics

from kernelcast.predict.sparse_time import coalesce_features, embedding_bag_bytes, embedding_bag_us
from kernelcast.records import DTYPE_BYTES

from .time_model import relative_least_squares

COALESCE_FEATURES = ("1", "merge passes", "nnz", "nnz x passes", "value bytes")
EMBEDDING_BAG_FLOORS_US = tuple(1.0 + 0.25 * i for i in range(17))  # 1-5 µs
EMBEDDING_BAG_PS_PER_INDEX = tuple(10.0 + 5.0 * i for i in range(39))  # 10-200 ps
EMBEDDING_BAG_TBS = tuple(0.5 + 0.05 * i for i in range(71))  # 0.5-4.0 TB/s
MIN_POINTS = 8
MEAN_TIE_BREAK = 1e-3


def _coalesce_points(cases: list[dict]) -> list[tuple[int, list[float], float]]:
    out = []
    for c in cases:
        if c.get("kind") == "coalesce" and "error" not in c and c["nnz"] >= 2:
            value_bytes = c["nnz"] * c["dim"] * DTYPE_BYTES.get(c["dtype"], 4)
            out.append((c["nnz"], coalesce_features(c["nnz"], value_bytes), c["device_us"]))
    return out


def _embedding_bag_points(cases: list[dict]) -> list[tuple[tuple, int, float, float]]:
    out = []
    for c in cases:
        if c.get("kind") == "embedding_bag_fwd" and "error" not in c and "mode" in c:
            indices = c["batch"] * c["bag"]
            out.append(((c["batch"], c["bag"]), indices, embedding_bag_bytes(indices, c["batch"], c["dim"], 4),
                        c["device_us"]))
    return out


def _linear_fit(points: list[tuple[int, list[float], float]]) -> list[float]:
    return relative_least_squares([f for _, f, _ in points], [t for _, _, t in points])


def _errors(pred: list[float], measured: list[float]) -> dict:
    errs = sorted(abs(p / m - 1) for p, m in zip(pred, measured))
    return {"median_error": round(statistics.median(errs), 4), "p90_error": round(errs[int(0.9 * len(errs))], 4),
            "worst_error": round(errs[-1], 4)}


def fit_coalesce(cases: list[dict]) -> dict | None:
    points = _coalesce_points(cases)
    if len(points) < MIN_POINTS:
        return None
    coef = _linear_fit(points)
    held_pred, held_meas = [], []
    for nnz in sorted({n for n, _, _ in points}):  # held out one nnz (all its widths and tables) at a time
        train = [p for p in points if p[0] != nnz]
        c = _linear_fit(train)
        for _, f, t in (p for p in points if p[0] == nnz):
            held_pred.append(sum(a * b for a, b in zip(c, f)))
            held_meas.append(t)
    return {"features": list(COALESCE_FEATURES), "coefficients": [round(c, 9) for c in coef],
            "points": len(points), "held_out_by_nnz": _errors(held_pred, held_meas)}


def _grid_fit(points) -> dict:
    """The grid point of lowest score (fit_embedding_bag has checked that numpy is there)."""
    import numpy as np

    idx = np.array([p[1] for p in points], float)
    nbytes = np.array([p[2] for p in points], float)
    measured = np.array([p[3] for p in points], float)
    floors = np.array(EMBEDDING_BAG_FLOORS_US)[:, None]
    best = None
    for ps, tbs in itertools.product(EMBEDDING_BAG_PS_PER_INDEX, EMBEDDING_BAG_TBS):
        work = np.maximum(idx * ps * 1e-6, nbytes / (tbs * 1e6))
        errors = np.abs((floors + work) / measured - 1)
        # the lowest median |error|; among equal medians the lowest mean (a rate no case binds is not kept)
        scores = np.median(errors, axis=1) + MEAN_TIE_BREAK * np.mean(errors, axis=1)
        i = int(np.argmin(scores))
        if best is None or scores[i] < best[0]:
            best = (float(scores[i]), {"floor_us": EMBEDDING_BAG_FLOORS_US[i], "us_per_index": ps * 1e-6,
                                       "bytes_per_us": tbs * 1e6})
    return best[1]


def fit_embedding_bag(cases: list[dict]) -> dict | None:
    points = _embedding_bag_points(cases)
    if len(points) < MIN_POINTS:
        return None
    try:
        import numpy  # noqa: F401
    except ImportError:
        return None
    fit = _grid_fit(points)
    held_pred, held_meas = [], []
    for shape in sorted({p[0] for p in points}):  # held out one (bags, bag size) at a time
        f = _grid_fit([p for p in points if p[0] != shape])
        for _, indices, nbytes, t in (p for p in points if p[0] == shape):
            held_pred.append(embedding_bag_us(f, indices, nbytes))
            held_meas.append(t)
    return {**fit, "points": len(points), "held_out_by_bag_shape": _errors(held_pred, held_meas)}


def fit(cases: list[dict]) -> dict:
    """The profile's `timings.sparse`: whichever of the two models the cases allow ({} for neither)."""
    out = {}
    coalesce = fit_coalesce(cases)
    if coalesce:
        out["coalesce"] = coalesce
    bag = fit_embedding_bag(cases)
    if bag:
        out["embedding_bag"] = bag
    if out:
        out["source"] = "calibrate/sparse_fit.py on calibrate section sparse_grid"
    return out

