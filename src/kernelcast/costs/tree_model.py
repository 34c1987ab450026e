"""Fitted tree ensembles stored as data, evaluated without scikit-learn.

The launch-count model of GEMMs (costs/launch_table.py) is a gradient-boosted tree classifier, and the kernel
time corrections of GEMMs, convolutions and attention (predict/calibrated.py) are gradient-boosted tree
regressors, fitted at calibration time by scikit-learn (calibrate/launch_model.py, calibrate/time_model.py).
Their trees are written into the profile as plain lists, so a prediction needs neither scikit-learn nor a
pickle. Prediction follows scikit-learn's HistGradientBoosting models for numerical features without missing
values: a raw score is the baseline plus, per boosting iteration, the value of the leaf the sample reaches, going
left where feature <= threshold (sklearn/ensemble/_hist_gradient_boosting/_predictor.pyx); a regressor returns
the score, a classifier the class of the largest score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LEAF = -1  # the feature index that marks a leaf


@dataclass(frozen=True)
class Tree:
    """One regression tree as parallel node lists: a node is a leaf where feature == LEAF."""
    feature: tuple[int, ...]
    threshold: tuple[float, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    value: tuple[float, ...]

    def value_at(self, x: list[float]) -> float:
        node = 0
        while self.feature[node] != LEAF:
            node = self.left[node] if x[self.feature[node]] <= self.threshold[node] else self.right[node]
        return self.value[node]

    def to_dict(self) -> dict:
        return {"f": list(self.feature), "t": list(self.threshold), "l": list(self.left), "r": list(self.right),
                "v": list(self.value)}

    @staticmethod
    def from_dict(d: dict) -> "Tree":
        return Tree(tuple(d["f"]), tuple(d["t"]), tuple(d["l"]), tuple(d["r"]), tuple(d["v"]))


@dataclass(frozen=True)
class TreeClassifier:
    """classes[i] scores baseline[i] + sum of trees[iteration][i] over the iterations. With two classes there is
    one score (the log-odds of classes[1]), as scikit-learn fits it."""
    features: tuple[str, ...]  # names of the feature vector's entries, for the reader
    classes: tuple[int, ...]
    baseline: tuple[float, ...]
    trees: tuple[tuple[Tree, ...], ...]  # per boosting iteration, one tree per class

    def _scores(self, x: list[float]) -> list[float]:
        scores = list(self.baseline)
        for per_class in self.trees:
            for i, tree in enumerate(per_class):
                scores[i] += tree.value_at(x)
        return scores

    def predict(self, x: list[float]) -> int:
        """The class of one feature vector (len(x) == len(features))."""
        scores = self._scores(x)
        if len(scores) == 1:
            return self.classes[1] if scores[0] > 0 else self.classes[0]
        return self.classes[max(range(len(scores)), key=scores.__getitem__)]

    def probabilities(self, x: list[float]) -> dict[int, float]:
        """{class: probability} of one feature vector: the softmax of the scores (the logistic of the one score
        with two classes), as scikit-learn's predict_proba gives them."""
        scores = self._scores(x)
        if len(scores) == 1:
            p = 1.0 / (1.0 + math.exp(-scores[0]))
            return {self.classes[0]: 1.0 - p, self.classes[1]: p}
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        total = sum(weights)
        return {c: w / total for c, w in zip(self.classes, weights)}

    def to_dict(self) -> dict:
        return {"features": list(self.features), "classes": list(self.classes), "baseline": list(self.baseline),
                "trees": [[t.to_dict() for t in per_class] for per_class in self.trees]}

    @staticmethod
    def from_dict(d: dict) -> "TreeClassifier":
        return TreeClassifier(tuple(d["features"]), tuple(d["classes"]), tuple(d["baseline"]),
                              tuple(tuple(Tree.from_dict(t) for t in per_class) for per_class in d["trees"]))


@dataclass(frozen=True)
class TreeRegressor:
    """baseline + the sum of one tree per boosting iteration (squared-error loss: the score is the value)."""
    features: tuple[str, ...]
    baseline: float
    trees: tuple[Tree, ...]

    def predict(self, x: list[float]) -> float:
        return self.baseline + sum(tree.value_at(x) for tree in self.trees)

    def to_dict(self) -> dict:
        return {"features": list(self.features), "baseline": self.baseline, "trees": [t.to_dict() for t in self.trees]}

    @staticmethod
    def from_dict(d: dict) -> "TreeRegressor":
        return TreeRegressor(tuple(d["features"]), float(d["baseline"]), tuple(Tree.from_dict(t) for t in d["trees"]))
