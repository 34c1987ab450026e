"""Fit the GEMM and convolution launch-count classifiers from the profile's measured rows (scikit-learn, at
calibration only).

How many work items one cuBLAS GEMM launches (1: one kernel; 2: split-K with a reduce kernel, or a workspace
memset; 4: memset, scale, "largek" kernel and bias epilogue for a small fp32 output) depends on cuBLAS's closed
heuristics. A gradient-boosted tree classifier over gemm_features (dtype, layout, log2 sizes and their ratios,
leading-dimension alignment) holds better than the nearest measured shape. Fitted on the designed sweep's 3995
GEMMs and tested on 2000 held-out GEMMs at log-uniform sizes (`python3 scripts/device/probe_gemm_launches.py --evaluate
validation/h200_gemm_log_uniform_raw.json.gz`, validation/gemm_launch_model.json): 17.2% of them wrong against
23.0% for the nearest row (bf16 11.5% vs 15.7%, fp16 11.4 vs 18.6, tf32 21.7 vs 38.9, fp32 23.4 vs 24.2).
The profile's model is fitted on every measured GEMM; its 10-fold error beside the nearest row's on the same
folds is stored with it (`held_out`).

scikit-learn is needed only here; the fitted trees are stored as data and evaluated by costs/tree_model.py.
"""

from __future__ import annotations

import collections
import math

from kernelcast.costs.launch_table import (CONV_FEATURES, GEMM_FEATURES, LaunchTable, conv_features, conv_label_items,
                                           gemm_features)
from kernelcast.costs.matmul import CONV_KEY_FIELDS
from kernelcast.costs.tree_model import LEAF, Tree, TreeClassifier

# Enough trees to learn cuBLAS's few regimes, few enough that the profile stays small and a lookup fast (once
# per GEMM shape of a step). On the held-out log-uniform GEMMs, 100 iterations of 31 leaves got 343 of 2000
# wrong, 300 iterations 333, 500 330: more trees buy little. Larger trees buy more: 63 leaves got 325 wrong, and
# 559 of the profile's 5149 rows in 10 folds against 579 (the fp32 "largek" path with a bias, 4 work items, is
# a small region of three features: fp32, bias, a mid-sized output).
BOOSTING_ITERATIONS = 100
MAX_LEAF_NODES = 63
CONV_MAX_LEAF_NODES = 31
LEARNING_RATE = 0.1
# Unregularized, the trees fitted every training row (99.98% of 9149 GEMMs) and learned cuBLAS's noise: with a
# second log-uniform draw added, the fp32 largek path of a 512 x 10 x 256 addmm with a bias (4 work items, its
# nearest measured neighbours 4 too) came out as 1. An L2 penalty on the leaf values: 10 folds over the 9149
# GEMMs, 758 wrong without it, 645 with 1.0, 648 with 3.0, 660 with 10.0 (min_samples_leaf 40 instead: 679);
# over the 7398 conv passes 2833, 2795 with 1.0, 2809 with 3.0 (2775 with 1.0 once conv keys read channels_last
# as c10 does, costs/conv_layout.py).
L2_REGULARIZATION = 1.0
FOLDS = 10
# Significant digits of the leaf values kept in the profile (thresholds are kept exact); checked: the stored
# trees give scikit-learn's class on every fitted row (tests/costs/test_launch_model.py).
VALUE_DIGITS = 8
SEED = 0


def new_classifier(iterations: int = BOOSTING_ITERATIONS, leaves: int = MAX_LEAF_NODES):
    from sklearn.ensemble import HistGradientBoostingClassifier
    # no early stopping and no subsampling: the same rows always give the same trees
    return HistGradientBoostingClassifier(max_iter=iterations, max_leaf_nodes=leaves,
                                          l2_regularization=L2_REGULARIZATION, learning_rate=LEARNING_RATE,
                                          early_stopping=False, random_state=SEED)


def export_tree(predictor) -> Tree:
    """One of scikit-learn's fitted HistGradientBoosting trees (a TreePredictor) as data. Numerical splits only:
    the feature functions give no categorical or missing values."""
    nodes = predictor.nodes
    return Tree(tuple(LEAF if n["is_leaf"] else int(n["feature_idx"]) for n in nodes),
                tuple(float(n["num_threshold"]) for n in nodes),  # exact: a bin edge may equal a feature value
                tuple(int(n["left"]) for n in nodes), tuple(int(n["right"]) for n in nodes),
                tuple(float(f"{n['value']:.{VALUE_DIGITS}g}") for n in nodes))


def export_classifier(clf, features: tuple[str, ...] = GEMM_FEATURES) -> TreeClassifier:
    """The fitted scikit-learn classifier's trees as data."""
    trees = tuple(tuple(export_tree(p) for p in per_class)  # one list per iteration, one tree per class
                  for per_class in clf._predictors)
    return TreeClassifier(features, tuple(int(c) for c in clf.classes_),
                          tuple(float(b) for b in clf._baseline_prediction.ravel()), trees)


def fit_gemm_model(rows: list[list]) -> dict | None:
    """Fit the classifier on the profile's GEMM rows (dtype, a_t, b_t, bias, M, N, K, work_items) and report its
    10-fold held-out error beside the nearest-row rule's on the same folds.

    Returns the profile's `gemm_model` section ({"classifier", "fitted_on", "held_out"}), or None where
    scikit-learn is not installed (the nearest-row rule then stays in use)."""
    try:
        import numpy as np
        from sklearn.model_selection import KFold
    except ImportError:
        return None
    rows = [tuple(r) for r in rows]
    if len(rows) < 2 * FOLDS:  # a calibration of other sections (--sections reduce_grid): nothing to fit
        return None
    x = np.array([gemm_features(*r[:7]) for r in rows], dtype=float)
    y = np.array([int(r[7]) for r in rows])
    wrong_model = wrong_nearest = 0
    for train, test in KFold(FOLDS, shuffle=True, random_state=SEED).split(x):
        clf = new_classifier().fit(x[train], y[train])
        wrong_model += int((clf.predict(x[test]) != y[test]).sum())
        nearest = LaunchTable(tuple(rows[i] for i in train), ())  # its nearest-row rule, without a classifier
        wrong_nearest += sum((nearest._lookup_gemm_items(*rows[i][:7]) or 1) != rows[i][7] for i in test)
    model = export_classifier(new_classifier().fit(x, y))
    return {"classifier": model.to_dict(), "fitted_on": f"{len(rows)} measured GEMMs (launches.gemm)",
            "held_out": {"folds": FOLDS, "rows": len(rows), "wrong_classifier": wrong_model,
                         "wrong_nearest_row": int(wrong_nearest)}}


# -- convolutions ---------------------------------------------------------------------------------------------
# cuDNN runs many grouped convolutions as one convolution per group: the same compute kernel `groups` times, each
# with its own transposes and memsets (H200, torch 2.11: 88% of the measured ones with 2 groups, 49% with 8, 15%
# with 32; validation/h200_conv_log_uniform_raw.json.gz). A label of "items per group" carries such a loop to
# other group counts, where a count of items would not.
LAYOUT_KERNELS = ("Memset", "nchwToNhwc", "nhwcToNchw")  # around the compute kernel, not the compute itself
# Classes seen on fewer rows join the nearest class of their kind (loop or not) in log2 of the items: 67 classes,
# most of one or two rows, made the boosting diverge (12% of its own training rows right).
MIN_CLASS_ROWS = 10
# A tree per class and iteration, and 17 classes: 100 iterations made 3.4 MB of profile and 0.3 s to load it, for
# 1706 of 4698 rows wrong in 10 folds; 30 iterations 1.0 MB and 1713 wrong; 50 of 15 leaves 1738.
CONV_BOOSTING_ITERATIONS = 30


# With this many groups, twice as many items as groups can only be a loop (a pass run once is at most ~10 items
# but for one batch-split outlier), even where the compute kernel alternates between two names from group to group.
LOOP_BY_COUNT_MIN_GROUPS = 8


def per_group_items(key: tuple, kernel_names: list[str]) -> int:
    """Work items per group where cuDNN ran a grouped convolution (conv_key) as one per group (a compute kernel
    launched at least `groups` times, or at least two items per group of 8 or more), else 0."""
    c_in, groups = key[3], key[8]
    if groups < 2 or groups == c_in:
        return 0
    compute = collections.Counter(n for n in kernel_names if not any(k in n for k in LAYOUT_KERNELS))
    repeated = bool(compute) and compute.most_common(1)[0][1] >= groups
    if not repeated and not (groups >= LOOP_BY_COUNT_MIN_GROUPS and len(kernel_names) >= 2 * groups):
        return 0
    return max(1, round(len(kernel_names) / groups))


def conv_label(row: tuple) -> int:
    """A conv launch row's class (costs.launch_table.conv_label_items reads it back): -items per group for a
    per-group loop, else the work items."""
    items = row[CONV_KEY_FIELDS]
    per_group = row[CONV_KEY_FIELDS + 1] if len(row) > CONV_KEY_FIELDS + 1 else 0
    return -per_group if per_group else items


def _merge_rare(labels: list[int]) -> list[int]:
    counts = collections.Counter(labels)
    common = [c for c, n in counts.items() if n >= MIN_CLASS_ROWS] or list(counts)

    def nearest(label: int) -> int:
        same_kind = [c for c in common if (c < 0) == (label < 0)] or common
        return min(same_kind, key=lambda c: (abs(math.log2(abs(c)) - math.log2(abs(label))), c))

    return [label if label in common else nearest(label) for label in labels]


def fit_conv_model(rows: list[list]) -> dict | None:
    """Fit the classifier on the profile's conv launch rows (*conv_key, work_items, per-group items) and report
    its 10-fold held-out error in work items beside the nearest-row rule's on the same folds.

    Returns the profile's `conv_model` section, or None without scikit-learn or with too few rows."""
    try:
        import numpy as np
        from sklearn.model_selection import KFold
    except ImportError:
        return None
    rows = [tuple(r) for r in rows]
    if len(rows) < 2 * FOLDS:
        return None
    x = np.array([conv_features(r[:CONV_KEY_FIELDS]) for r in rows], dtype=float)
    y = np.array(_merge_rare([conv_label(r) for r in rows]))
    wrong_model = wrong_nearest = 0
    for train, test in KFold(FOLDS, shuffle=True, random_state=SEED).split(x):
        clf = new_classifier(CONV_BOOSTING_ITERATIONS, CONV_MAX_LEAF_NODES).fit(x[train], y[train])
        wrong_model += sum(conv_label_items(int(label), rows[i][8]) != rows[i][CONV_KEY_FIELDS]
                           for i, label in zip(test, clf.predict(x[test])))
        nearest = LaunchTable((), tuple(rows[i][:13] for i in train))
        wrong_nearest += sum((nearest.conv_items(rows[i][:CONV_KEY_FIELDS]) or 1) != rows[i][CONV_KEY_FIELDS] for i in test)
    model = export_classifier(new_classifier(CONV_BOOSTING_ITERATIONS, CONV_MAX_LEAF_NODES).fit(x, y), CONV_FEATURES)
    return {"classifier": model.to_dict(), "fitted_on": f"{len(rows)} measured convolution passes (launches.conv)",
            "held_out": {"folds": FOLDS, "rows": len(rows), "wrong_classifier": int(wrong_model),
                         "wrong_nearest_row": int(wrong_nearest)}}
