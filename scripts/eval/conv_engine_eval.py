"""Would knowing cuDNN's engine make the convolution time model hold? Measured on the H200 sweep (issue 30).

    PYTHONPATH=src python3 scripts/eval/conv_engine_eval.py      # about a minute on two cores

The profile prices a convolution by the roofline of its work times a correction that a gradient-boosted tree
fits over the sweep's shape features (calibrate/time_model.py). Held out by region of the shape space (whole
3-octave blocks of the implicit GEMM's M, N, K and groups, region_folds), that correction is 34-39% off at the
median. This script asks what is missing, on every timed conv pass of the H200's raw sweep runs
(validation/h200_conv_*_raw.json.gz but the stem draw, and the designed sweep), each with the kernels it ran:

- base: the profile's features (predict/calibrated.py SHAPE_FEATURES["conv"]);
- known engine: base plus the engine class of the pass's longest kernel (engine_class: cuDNN's legacy
  implicit-GEMM and dgrad engines, direct kernels, FFMA implicit GEMM, tensor-core xmma / CUTLASS, plain GEMM,
  FFT, Winograd, a layout transpose, other), known from the measurement: the most an engine classifier could give;
- predicted engine: base plus a classifier's class probabilities, the classifier fitted on the same training
  folds (its held-out accuracy printed beside);
- waves: base plus, for four common tile shapes, log2 tiles, the last wave's fill on 132 SMs and the tiles'
  fill of M x N, and K's fill of 32-deep steps.

Each is fitted per family (plain 1-D / 2-D; 3-D or transposed) with the profile's regressor settings and printed
as the median |predicted / measured - 1| over the held-out folds.
"""

from __future__ import annotations

import collections
import glob
import gzip
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
H200_SMS = 132
TILES = ((128, 128), (256, 64), (128, 32), (64, 64))
K_STEP = 32


def engine_class(kernels: list) -> str:
    """The class of a pass's longest kernel, from its name ([name, µs] pairs as the sweep records them)."""
    name = max(kernels, key=lambda k: k[1])[0]
    lower = name.lower()
    if any(s in name for s in ("implicit_convolve", "convolveNd_dgrad", "dgrad_engine", "wgrad_alg", "dgrad2d")):
        return "legacy"
    if "grouped_direct" in name or "depthwise" in name:
        return "direct"
    if "xmma" in name and "ffma" in name:
        return "xmma_ffma"
    if "xmma" in name or "nvjet" in name or "tensorop" in lower or "cutlass" in name:
        return "tensor"
    if "gemm" in lower or "magma" in name:
        return "gemm"
    if "fft" in lower:
        return "fft"
    if "winograd" in lower:
        return "winograd"
    if "Transpose" in name or "nchwToNhwc" in name or "nhwcToNchw" in name:
        return "transpose"
    return "other"


def rows() -> list[tuple[tuple, float, str]]:
    """(conv key, kernel µs, engine class) of every timed single-pass conv case of the raw sweep runs."""
    from kernelcast.calibrate.profile import _costs, _kernel_us, _main

    files = [f for f in sorted(glob.glob(str(ROOT / "validation" / "h200_conv_*raw.json.gz"))) if "stem" not in f]
    out = []
    for path in [*files, str(ROOT / "validation" / "h200_sweep_raw.json.gz")]:
        with gzip.open(path, "rt") as f:
            sweep = json.load(f)["sweep"]
        for case in sweep:
            if case.get("kind") != "conv" or "error" in case or not case.get("kernels"):
                continue
            cost = _main(_costs(case), {"conv"})
            if cost is not None and cost.key and cost.key[0] != "conv_bwd":
                out.append((tuple(cost.key), _kernel_us(case), engine_class(case["kernels"])))
    return out


def wave_features(key: tuple) -> list[float]:
    from kernelcast.predict.shape_kinds import conv_point

    (m, n, k, g), _ = conv_point(key)
    big_m, big_n, big_k, groups = 2 ** m, 2 ** n, 2 ** k, 2 ** g
    out = []
    for tile_m, tile_n in TILES:
        tiles = math.ceil(big_m / tile_m) * math.ceil(big_n / tile_n) * groups
        waves = math.ceil(tiles / H200_SMS)
        out += [math.log2(tiles), tiles / (waves * H200_SMS),
                big_m * big_n / (math.ceil(big_m / tile_m) * tile_m * math.ceil(big_n / tile_n) * tile_n)]
    return out + [big_k / (math.ceil(big_k / K_STEP) * K_STEP)]


def main() -> int:
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingClassifier

    from kernelcast.calibrate import time_model as tm
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.predict.shape_kinds import SHAPE_FEATURES
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    data = rows()
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    engines = sorted({e for _, _, e in data})
    keys = [k for k, _, _ in data]
    x = np.array([SHAPE_FEATURES["conv"](k) for k in keys])
    y = np.array([math.log(t / model._prior_us("conv", k)) for k, t, _ in data])
    known = np.array([[float(e == c) for c in engines] for _, _, e in data])
    waves = np.array([wave_features(k) for k in keys])
    labels = np.array([engines.index(e) for _, _, e in data])
    print(f"{len(data)} conv passes; engine classes: {dict(collections.Counter(e for _, _, e in data))}")
    print(f"{'family':16s} {'passes':>6s} {'base':>6s} {'known engine':>13s} {'predicted':>10s} {'waves':>6s}"
          f" {'classifier right':>17s}")

    def held_out(rows_: np.ndarray, features: np.ndarray, folds: list) -> float:
        out = np.zeros(len(rows_))
        for train, test in folds:
            out[test] = tm.new_regressor().fit(features[train], y[rows_][train]).predict(features[test])
        return statistics.median(abs(math.exp(p - t) - 1) for p, t in zip(out, y[rows_]))

    for family, idx in tm.fit_families("conv", keys).items():
        idx = np.array(idx)
        folds = tm.region_folds("conv", [keys[i] for i in idx])
        base = held_out(idx, x[idx], folds)
        with_known = held_out(idx, np.hstack([x[idx], known[idx]]), folds)
        with_waves = held_out(idx, np.hstack([x[idx], waves[idx]]), folds)
        out, right = np.zeros(len(idx)), []
        for train, test in folds:
            clf = HistGradientBoostingClassifier(max_iter=200, max_leaf_nodes=15, random_state=0)
            clf.fit(x[idx][train], labels[idx][train])
            proba = np.zeros((len(test), len(engines)))
            proba[:, clf.classes_] = clf.predict_proba(x[idx][test])
            reg = tm.new_regressor().fit(np.hstack([x[idx][train], known[idx][train]]), y[idx][train])
            out[test] = reg.predict(np.hstack([x[idx][test], proba]))
            right.append(float(np.mean(proba.argmax(1) == labels[idx][test])))
        predicted = statistics.median(abs(math.exp(p - t) - 1) for p, t in zip(out, y[idx]))
        print(f"{family:16s} {len(idx):6d} {base:6.1%} {with_known:13.1%} {predicted:10.1%} {with_waves:6.1%}"
              f" {statistics.mean(right):17.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
