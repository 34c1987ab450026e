"""Fit the GEMM launch-count classifier from the profile's measured GEMMs (scikit-learn, at calibration only).

How many work items one cuBLAS GEMM launches (1: one kernel; 2: split-K with a reduce kernel, or a workspace
memset; 4: memset, scale, "largek" kernel and bias epilogue for a small fp32 output) depends on cuBLAS's closed
heuristics. A gradient-boosted tree classifier over gemm_features (dtype, layout, log2 sizes and their ratios,
leading-dimension alignment) holds better than the nearest measured shape. Fitted on the designed sweep's 3995
GEMMs and tested on 2000 held-out GEMMs at log-uniform sizes (`python3 scripts/probe_gemm_launches.py --evaluate
validation/h200_gemm_log_uniform_raw.json.gz`, validation/gemm_launch_model.json): 17.2% of them wrong against
23.0% for the nearest row (bf16 11.5% vs 15.7%, fp16 11.4 vs 18.6, tf32 21.7 vs 38.9, fp32 23.4 vs 24.2).
The profile's model is fitted on every measured GEMM; its 10-fold error beside the nearest row's on the same
folds is stored with it (`held_out`).

scikit-learn is needed only here; the fitted trees are stored as data and evaluated by costs/tree_model.py.
"""

from __future__ import annotations

from kernelcast.costs.launch_table import GEMM_FEATURES, LaunchTable, gemm_features
from kernelcast.costs.tree_model import LEAF, Tree, TreeClassifier

# Enough trees to learn cuBLAS's few regimes, few enough that the profile stays small (about 0.7 MB of JSON)
# and a lookup about 0.2 ms (once per GEMM shape of a step). On the held-out log-uniform GEMMs, 100 iterations
# of 31 leaves got 343 of 2000 wrong, 300 iterations 333, 500 330: more trees buy little.
BOOSTING_ITERATIONS = 100
MAX_LEAF_NODES = 31
LEARNING_RATE = 0.1
FOLDS = 10
# Significant digits of the leaf values kept in the profile (thresholds are kept exact); checked: the stored
# trees give scikit-learn's class on every fitted row (tests/test_launch_model.py).
VALUE_DIGITS = 8
SEED = 0


def _classifier():
    from sklearn.ensemble import HistGradientBoostingClassifier
    # no early stopping and no subsampling: the same rows always give the same trees
    return HistGradientBoostingClassifier(max_iter=BOOSTING_ITERATIONS, max_leaf_nodes=MAX_LEAF_NODES,
                                          learning_rate=LEARNING_RATE, early_stopping=False, random_state=SEED)


def export_tree(predictor) -> Tree:
    """One of scikit-learn's fitted HistGradientBoosting trees (a TreePredictor) as data. Numerical splits only:
    the feature functions give no categorical or missing values."""
    nodes = predictor.nodes
    return Tree(tuple(LEAF if n["is_leaf"] else int(n["feature_idx"]) for n in nodes),
                tuple(float(n["num_threshold"]) for n in nodes),  # exact: a bin edge may equal a feature value
                tuple(int(n["left"]) for n in nodes), tuple(int(n["right"]) for n in nodes),
                tuple(float(f"{n['value']:.{VALUE_DIGITS}g}") for n in nodes))


def _export(clf) -> TreeClassifier:
    """The fitted scikit-learn classifier's trees as data."""
    trees = tuple(tuple(export_tree(p) for p in per_class)  # one list per iteration, one tree per class
                  for per_class in clf._predictors)
    return TreeClassifier(GEMM_FEATURES, tuple(int(c) for c in clf.classes_),
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
        clf = _classifier().fit(x[train], y[train])
        wrong_model += int((clf.predict(x[test]) != y[test]).sum())
        nearest = LaunchTable(tuple(rows[i] for i in train), ())  # its nearest-row rule, without a classifier
        wrong_nearest += sum((nearest._lookup_gemm_items(*rows[i][:7]) or 1) != rows[i][7] for i in test)
    model = _export(_classifier().fit(x, y))
    return {"classifier": model.to_dict(), "fitted_on": f"{len(rows)} measured GEMMs (launches.gemm)",
            "held_out": {"folds": FOLDS, "rows": len(rows), "wrong_classifier": wrong_model,
                         "wrong_nearest_row": int(wrong_nearest)}}
