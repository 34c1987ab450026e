"""NCHW batch norm in training, forward and backward, as PyTorch's CUDA kernels run it: one thread block per
channel (the profile's `timings.batch_norm_blocks` and `timings.batch_norm_backward_blocks`, read by
predict/calibrated.py).

Forward: batch_norm_stats_cuda_template launches batch_norm_collect_statistics_kernel on a grid of C blocks
(Welford over the channel's N x H*W values), then a small running-stats update and the elementwise
batch_norm_transform_input_kernel; the first dominates (zoo mobilenet_train: 182 µs of 193 for
(32, 16, 112, 112) bf16) and has the backward's structure, so the same model is fitted to the forward's cases.

batch_norm_backward_cuda_template (aten/src/ATen/native/cuda/Normalization.cuh) views the input as
(N, C, H*W) and launches batch_norm_backward_kernel on a grid of C blocks of 512 threads, getNumThreads(H*W)
of them along H*W: each block reduces its channel's N x H*W values of x and dy, then writes its channel's dx.
The time is so set by the reduction length per channel and by how many blocks run at once, not by the bytes:
on the H200 a (32, 16, 112, 112) bf16 backward took 500 µs and a (32, 64, 112, 112) one, four times the bytes,
696 µs (zoo mobilenet_train). The model, fitted on the calibration's own NCHW cases (microbenchmarks only):

- a prior from that structure: floor_us + ns_per_element[item size] x N*H*W x ceil(C / (blocks_per_sm x SMs)),
  least squares on relative error, blocks_per_sm the candidate with the lowest median error;
- a correction to it, a gradient-boosted tree regressor of log(measured / prior) over log2 C, N, H*W and C per
  concurrent block (the bn_grid section shows what the prior misses: blocks slow down as more channels share
  the GPU, long H*W rows run faster than many short ones of the same count). Its 10-fold held-out error is
  stored beside the prior's.
"""

from __future__ import annotations

import math
import statistics

from kernelcast.costs import DEFAULT_CONTEXT, cost_of
from kernelcast.costs.common import is_blocks_key
from kernelcast.predict.calibrated import BATCH_NORM_CORRECTION_FEATURES, batch_norm_blocks_us as predict_us
from kernelcast.predict.calibrated import batch_norm_correction_features, batch_norm_prior_us
from kernelcast.records import OpRecord

from .time_model import new_regressor, export_regressor, relative_least_squares

BLOCKS_PER_SM_CANDIDATES = (1, 2, 3, 4, 8)
# calibration case kinds and the op whose input they key by, per pass; the kinds timed with L2 left as the
# previous call left it (microbench.BN_WARM_KINDS) are fitted apart, as the section's "l2_resident" model
PASSES = {"forward": (("batch_norm_train", "native_batch_norm"), "aten.native_batch_norm."),
          "backward": (("batch_norm_bwd", "native_batch_norm_bwd"), "aten.native_batch_norm_backward.")}
BN_WARM_KINDS = ("native_batch_norm_l2_resident", "native_batch_norm_bwd_l2_resident")  # grids.bn_grid
L2_RESIDENT_KINDS = {"forward": BN_WARM_KINDS[:1], "backward": BN_WARM_KINDS[1:]}
FOLDS = 10
MIN_CORRECTION_POINTS = 40  # fewer: the prior alone


def channel_blocks(shape: list[int], stride: list[int], dtype: str) -> tuple[int, int, int, int] | None:
    """(C, N, H x W, item size) of an NCHW batch-norm input; None for channels_last (other kernels)."""
    if len(shape) < 3 or (len(shape) == 4 and stride[1] == 1 and shape[1] > 1):
        return None
    itemsize = 4 if dtype == "float32" else 2
    return shape[1], shape[0], math.prod(shape[2:]), itemsize


def block_points(cases: list[dict], pass_: str = "backward",
                 l2_resident: bool = False) -> list[tuple[int, int, int, int, float]]:
    """(C, N, H*W, item size, device µs) of every NCHW native batch-norm case of a calibration run in training,
    forward or backward; with L2 flushed before each call, or (l2_resident) left as the previous call left it."""
    kinds, op_prefix = PASSES[pass_]
    kinds = L2_RESIDENT_KINDS[pass_] if l2_resident else kinds
    points = []
    for case in cases:
        if case.get("kind") not in kinds or "error" in case:
            continue
        ops = [o for o in case.get("ops", ()) if o["op"].startswith(op_prefix) and o["args"].get("training", True)]
        if not ops:
            continue
        x = ops[0]["args"]["input"]
        blocks = channel_blocks(x["T"], x["stride"], x["dtype"])
        if blocks is not None:
            points.append((*blocks, case["device_us"]))
    return points


# Weight normalization's fused kernels walk a row (or 16 columns) per block the same way (costs/norms.py,
# weight_norm_blocks); each kind is fitted by the same model on calibrate's weight_norm_grid cases, with the
# block count as C, N = 1 and the elements a block walks as H*W.
# The small in-place sort and top-k's single-block select also run a block per slice (costs/data_dependent.py,
# costs/scans.py), fitted the same way on calibrate's sort_grid cases.
# cuDNN's batch norm in training runs a block per channel too (costs/elementwise.py cudnn_batch_norm), fitted the
# same way on calibrate's channel_grid cases.
# The innermost- and outer-dim scans (costs/scans.py) likewise, on calibrate's shape_kinds_grid cumsum and cumprod
# cases.
BLOCK_CASE_KINDS = ("weight_norm", "weight_norm_backward",  # grids.weight_norm_grid
                    "sort_slices", "topk_slices",  # grids.sort_grid
                    "cudnn_batch_norm_train", "cudnn_batch_norm_train_bwd",  # grids.channel_grid
                    "cumsum_last", "cumsum_first", "cumprod_last")  # grids.shape_kinds_grid
BLOCK_FIT_KINDS = ("weight_norm_rows", "weight_norm_rows_backward", "weight_norm_columns",
                   "weight_norm_columns_backward", "sort_slices", "topk_slices", "cudnn_batch_norm",
                   "cudnn_batch_norm_backward", "scan_rows", "scan_outer")


def cost_block_points(cases: list[dict], kind: str) -> list[tuple[int, int, int, int, float]]:
    """(blocks, N, elements per block, item size, device µs) of each block case (BLOCK_CASE_KINDS) whose op the
    cost registry prices as `kind` (its cost key: costs.common.blocks_key)."""
    points = []
    for case in cases:
        if case.get("kind") not in BLOCK_CASE_KINDS or "error" in case:
            continue
        costs = [cost_of(OpRecord.from_json(o), DEFAULT_CONTEXT) for o in case.get("ops", ())]
        keys = [c.key for c in costs if c is not None and c.kind == kind and is_blocks_key(c.key)]
        if len(keys) == 1:
            points.append((*keys[0][1:], case["device_us"]))
    return points


def fit_cost_blocks(cases: list[dict], sm_count: int) -> dict[str, dict]:
    """{kind: fit} for each block kind the run measured (the profile's `timings.<kind>_blocks`)."""
    fits = {kind: fit_points(cost_block_points(cases, kind), sm_count) for kind in BLOCK_FIT_KINDS}
    return {kind: fit for kind, fit in fits.items() if fit}


def _least_squares(points: list, concurrent: int) -> tuple[float, dict]:
    """floor_us and ns per element by item size, minimizing the relative error."""
    sizes = sorted({p[3] for p in points})
    rows = [[1.0, *((p[1] * p[2] * math.ceil(p[0] / concurrent) / 1000.0) if p[3] == s else 0.0 for s in sizes)]
            for p in points]
    coef = relative_least_squares(rows, [p[4] for p in points])
    return coef[0], {str(s): c for s, c in zip(sizes, coef[1:])}


def fit_prior(points: list, sm_count: int) -> dict:
    best = None
    for per_sm in BLOCKS_PER_SM_CANDIDATES:
        floor_us, ns = _least_squares(points, per_sm * sm_count)
        candidate = {"blocks_per_sm": per_sm, "floor_us": round(floor_us, 4),
                     "ns_per_element": {k: round(v, 6) for k, v in ns.items()}}
        errors = [abs(batch_norm_prior_us(candidate, c, n, hw, s, sm_count) / t - 1) for c, n, hw, s, t in points]
        if best is None or statistics.median(errors) < best[0]:
            best = (statistics.median(errors), candidate)
    return best[1]


def _correction(prior: dict, points: list, sm_count: int):
    import numpy as np

    x = np.array([batch_norm_correction_features(prior, c, n, hw, s, sm_count) for c, n, hw, s, _ in points])
    y = np.array([math.log(t / batch_norm_prior_us(prior, c, n, hw, s, sm_count)) for c, n, hw, s, t in points])
    return x, y


def fit(cases: list[dict], sm_count: int, pass_: str = "backward") -> dict | None:
    """The profile's `timings.batch_norm_backward_blocks` (pass_ "backward") or `timings.batch_norm_blocks`
    ("forward"): the fit on inputs read from HBM, with the fit on L2-resident inputs under "l2_resident" where
    the run measured them; None with fewer than 4 points or no numpy."""
    section = fit_points(block_points(cases, pass_), sm_count)
    resident = fit_points(block_points(cases, pass_, l2_resident=True), sm_count)
    if section and resident:
        section["l2_resident"] = resident
    return section


def fit_points(points: list, sm_count: int) -> dict | None:
    try:
        import numpy as np
    except ImportError:
        return None
    if len(points) < 4:
        return None
    prior = fit_prior(points, sm_count)
    section = {**prior, "points": len(points), "sm_count": sm_count}
    prior_errors = [abs(batch_norm_prior_us(prior, c, n, hw, s, sm_count) / t - 1) for c, n, hw, s, t in points]
    section["prior_median_error"] = round(statistics.median(prior_errors), 4)
    try:
        from sklearn.model_selection import KFold
    except ImportError:
        return section
    if len(points) < MIN_CORRECTION_POINTS:
        return section
    x, y = _correction(prior, points, sm_count)
    held = np.zeros(len(points))
    for train, test in KFold(FOLDS, shuffle=True, random_state=0).split(x):
        held[test] = new_regressor().fit(x[train], y[train]).predict(x[test])
    held_errors = [abs(math.exp(h - t) - 1) for h, t in zip(held, y)]  # predicted / measured - 1
    section["held_out"] = {"folds": FOLDS, "prior_median_error": section["prior_median_error"],
                           "median_error": round(statistics.median(held_errors), 4),
                           "p90_error": round(sorted(held_errors)[int(0.9 * len(held_errors))], 4)}
    if section["held_out"]["median_error"] >= section["prior_median_error"]:
        return section  # the correction does not hold out better than the prior: the prior alone
    section["correction"] = export_regressor(new_regressor().fit(x, y), BATCH_NORM_CORRECTION_FEATURES).to_dict()
    check = [abs(predict_us(section, c, n, hw, s, sm_count) / t - 1) for c, n, hw, s, t in points]
    section["fitted_median_error"] = round(statistics.median(check), 4)
    return section
