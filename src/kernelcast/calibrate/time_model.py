"""Fit the kernel-time corrections of GEMMs, convolutions and attention over the whole designed sweep.

A compute-bound kernel's time is the profiled GPU's roofline for its shape (the prior) times a correction. The
correction used to come only from the few nearest measured shapes (shape_model.py), which holds where the sweep
measured something close and drifts where it did not. Here a gradient-boosted tree regressor learns
log(measured time / prior) from the shape's features (predict/calibrated.py SHAPE_FEATURES: dtype, layout, log2
sizes, implicit-GEMM sizes of a convolution, backend and pass of attention, log2 FLOPs, bytes and intensity) over
every measured shape. Near a measured shape the measurement still decides (calibrated.py).

Which kinds use it (FITTED_KINDS) was decided on two held-out sets. Held out by region of the sweep (whole
3-octave blocks of sizes left out together; `python3 scripts/eval/shape_model_eval.py`), the regressor's median error
beat the nearest points' for every kind: GEMM 8.6% vs 12.0%, convolution 26.9% vs 44.1%, attention 23.2% vs 36.8%
(attention before its backward rows were re-timed by their kernels; after: 15.0% vs 25.3%).
On the zoo's real steps (validation/zoo_measured.json.gz, per workload and op; run when the GEMM tables still
held the log-uniform GEMMs of scripts/device/probe_gemm_launches.py), it did so for convolutions only (summed |error|
over the zoo 19.5% against 58.1%, median 11.4% against 27.6%), while GEMMs (20.6% vs 18.4%) and attention
(78.1% vs 52.0%) got worse. A likely reason (not measured): the sweep's size pools hold the widths
real models use, so a real GEMM or attention shape often has a close measured one, where the nearest points are
hard to beat; a convolution's batch, image size and channels combine freely, so it seldom has one.

scikit-learn is needed only here; the trees are stored in the profile (timings.fitted) and evaluated by
costs/tree_model.py.
"""

from __future__ import annotations

import math
import statistics

from kernelcast.costs.tree_model import TreeRegressor

from .launch_model import export_tree

# Shallow trees, many small steps: the correction varies smoothly with size except at kernel changes.
BOOSTING_ITERATIONS = 200
MAX_LEAF_NODES = 15
LEARNING_RATE = 0.1
FOLDS = 10
FITTED_KINDS = ("conv",)
OCTAVES_PER_REGION = 3  # the held-out blocks: as scripts/eval/shape_model_eval.py
# The stated uncertainty of a fitted estimate: this quantile of the held-out |log error| (about one standard
# deviation's worth of the errors, as the nearest points' spread is).
UNCERTAINTY_QUANTILE = 0.68
FEATURE_NAMES = {
    "gemm": "launch_table.GEMM_FEATURES + log2 FLOPs, log2 bytes, log2 intensity",
    "conv": "pass, dtype, channels_last, implicit GEMM log2 M N K groups, log2 batch C_in C_out size, kernel, "
            "stride, dims, transposed, depthwise, native depthwise kernel, log2 FLOPs, bytes, intensity, padding, "
            "dilation, output padding, log2 output size, log2 channel alignment in and out (per group), kernel taps",
    "attention": "backend, backward, log2 batch*heads, query, key, head dim, causal, dropout, mask, log2 FLOPs, "
                 "bytes, intensity",
}


def region_of(kind: str, key: tuple) -> tuple:
    """The block of the shape space a measured shape belongs to (OCTAVES_PER_REGION octaves per size)."""
    from kernelcast.predict.shape_kinds import SHAPE_POINTS

    coords, _ = SHAPE_POINTS[kind](key)
    return tuple(int(c // OCTAVES_PER_REGION) for c in coords[:4])


def region_folds(kind: str, keys: list[tuple]) -> list[tuple]:
    """(train, test) index arrays of FOLDS folds that keep each region's shapes together (GroupKFold)."""
    import numpy as np
    from sklearn.model_selection import GroupKFold

    regions = {r: i for i, r in enumerate(sorted({region_of(kind, k) for k in keys}))}
    groups = np.array([regions[region_of(kind, k)] for k in keys])
    return list(GroupKFold(min(FOLDS, len(regions))).split(np.zeros(len(keys)), groups=groups))


def new_regressor():
    from sklearn.ensemble import HistGradientBoostingRegressor
    return HistGradientBoostingRegressor(max_iter=BOOSTING_ITERATIONS, max_leaf_nodes=MAX_LEAF_NODES,
                                         learning_rate=LEARNING_RATE, early_stopping=False, random_state=0)


def export_regressor(reg, features: tuple[str, ...]) -> TreeRegressor:
    """A fitted scikit-learn HistGradientBoostingRegressor's trees as data."""
    return TreeRegressor(features, float(reg._baseline_prediction.ravel()[0]),
                         tuple(export_tree(per_iteration[0]) for per_iteration in reg._predictors))


def export_kind_regressor(reg, kind: str) -> TreeRegressor:
    return export_regressor(reg, (FEATURE_NAMES[kind],))


def relative_least_squares(rows: list[list[float]], times: list[float]) -> list[float]:
    """Coefficients c minimizing sum((rows . c) / time - 1)^2: least squares on the relative error, so that
    microsecond and millisecond measurements count alike."""
    import numpy as np

    y = np.array(times, dtype=float)
    coef, *_ = np.linalg.lstsq(np.array(rows, dtype=float) / y[:, None], np.ones(len(times)), rcond=None)
    return [float(c) for c in coef]


def training_set(model, kind: str) -> tuple[list[tuple], list[list[float]], list[float]]:
    """(keys, features, log corrections) of the profile's measured rows of a kind, against `model`'s priors
    (a CalibratedModel of the profiled GPU)."""
    from kernelcast.predict.shape_kinds import KEY_LENGTH, SHAPE_FEATURES

    length = KEY_LENGTH[kind]
    keys, features, targets = [], [], []
    for row in model.profile["timings"].get(kind, ()):
        if len(row) != length + 3 or row[length + 1] <= 0:
            continue
        key = tuple(row[:length])
        prior = model._prior_us(kind, key)
        if prior <= 0:
            continue
        keys.append(key)
        features.append(SHAPE_FEATURES[kind](key))
        targets.append(math.log(row[length + 1] / prior))
    return keys, features, targets


def held_out_predictions(kind: str, keys: list[tuple], features: list[list[float]], targets: list[float]) -> list:
    """Each row's fitted log correction from a fit without its region's fold (GroupKFold over regions)."""
    import numpy as np

    x, y = np.array(features), np.array(targets)
    out = np.zeros(len(y))
    for train, test in region_folds(kind, keys):
        out[test] = new_regressor().fit(x[train], y[train]).predict(x[test])
    return list(out)


def fit_families(kind: str, keys: list[tuple]) -> dict[str, list[int]]:
    """Row indices per fitted model of a kind: convolutions split into the plain 1-D / 2-D ones and the 3-D or
    transposed ones (predict/calibrated.py fitted_name), each its own regressor. One regressor over both had
    moved the 2-D convolutions' corrections once 1200 volumetric and transposed passes joined the table (their
    cuDNN kernels differ: fallback direct kernels of 76 ms beside implicit GEMMs of 100 us; KernelBench's
    level 1 2-D convolutions went from +29% to +67% at the median, level 2's 2-D chains from 6% to 15%, on the
    H200 with the profile of 2026-12-03). Ungrouped 1-D / 2-D stems and heads (fewer than 8 channels on one side)
    are a third: cuDNN runs CUDA-core or channel-padding engines for them, and their own fit took KernelBench's 29
    single-stem programs on the H200 from 17.7% to 8.4% median error (scripts/fit/build_h200_profile.py says what
    it cost the zoo's convolutions). Grouped 1-D / 2-D convolutions that are not depthwise (1 < groups < C_in)
    are a fourth: cuDNN runs native grouped kernels for some and loops or falls back to slow ones for others,
    so their measured corrections over the roofline spread from 2x to 400x on the H200, where the ungrouped
    ones' stay within a few x; held out by region over the H200's conv rows (10 folds), a family of their own
    took the other 1-D / 2-D convolutions from 30.9% to 27.5% median error and left the grouped ones at 57.0% ->
    57.9% (2026-12-07)."""
    from kernelcast.predict.shape_kinds import fitted_name

    out: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(fitted_name(kind, key), []).append(i)
    return out


def fit_time_models(model) -> dict:
    """{kind: {"regressor", "fitted_on", "held_out"}} for the kinds the profile measured; {} without
    scikit-learn (the nearest points then price every shape). `model`: a CalibratedModel of the profiled GPU
    on this profile, for the priors."""
    try:
        import numpy as np
        import sklearn  # noqa: F401
    except ImportError:
        return {}
    out = {}
    for kind in FITTED_KINDS:
        every_key, every_feature, every_target = training_set(model, kind)
        for name, rows in fit_families(kind, every_key).items():
            fitted = _fit_one(kind, name, [every_key[i] for i in rows], [every_feature[i] for i in rows],
                              [every_target[i] for i in rows])
            if fitted is not None:
                out[name] = fitted
    return out


def _fit_one(kind: str, name: str, keys: list[tuple], features: list[list[float]], targets: list[float]) -> dict | None:
    """One regressor over these rows with its held-out errors (region folds); None with too few rows."""
    import numpy as np

    if len(keys) < 2 * FOLDS:
        return None
    predicted = held_out_predictions(kind, keys, features, targets)
    log_errors = sorted(abs(p - t) for p, t in zip(predicted, targets))
    relative = sorted(abs(math.exp(p - t) - 1.0) for p, t in zip(predicted, targets))
    reg = new_regressor().fit(np.array(features), np.array(targets))
    return {
        "regressor": export_kind_regressor(reg, kind).to_dict(),
        "fitted_on": f"{len(keys)} measured {kind} shapes (timings.{kind}, {name})",
        "held_out": {"folds": FOLDS, "by": f"regions of {OCTAVES_PER_REGION} octaves",
                     "median_error": round(statistics.median(relative), 4),
                     "p90_error": round(relative[int(0.9 * (len(relative) - 1))], 4),
                     "uncertainty": round(log_errors[int(UNCERTAINTY_QUANTILE * (len(log_errors) - 1))], 3)},
    }
