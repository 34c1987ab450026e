"""How well the calibrated shape model predicts shapes it has not seen: the shipped profile's GEMM, convolution and
attention points, held out by REGION of the shape space (not at random), each predicted from the rest.

    python3 scripts/eval/shape_model_eval.py [--profile src/kernelcast/profiles/h200.json] [--json out.json]

Regions are blocks of OCTAVES_PER_REGION octaves in each size coordinate of the kind (GEMM: M, N, K; conv: the
implicit GEMM's M, N, K and groups; attention: batch x heads, query and key length, head dim). The regions are
split into FOLDS folds; each fold's rows are predicted by a model built without them, so the nearest points left
are outside their block, as for a model shape that falls between calibrated ones. A random split would put a near
twin of most points in the training set and flatter the model. Two models on the same folds:
- nearest: the correction blended from the nearest measured shapes alone (shape_model.py);
- fitted: the nearest shapes where one is within NEAR_OCTAVES, else the tree regressor fitted on the fold's
  training rows (calibrate/time_model.py). Predictions use it for the kinds in time_model.FITTED_KINDS.
Also reported: how often the measured time falls inside the estimate's stated uncertainty.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

from kernelcast.calibrate import time_model
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.predict.shape_kinds import KEY_LENGTH
from kernelcast.records import CaptureSettings

OCTAVES_PER_REGION = time_model.OCTAVES_PER_REGION
FOLDS = time_model.FOLDS
MODELS = ("nearest", "fitted")


def evaluate(profile: dict, kind: str) -> list[dict]:
    rows = [r for r in profile["timings"].get(kind, ()) if len(r) == KEY_LENGTH[kind] + 3]
    gpu = get_gpu(profile["gpu"])
    bare = copy.copy(profile)
    bare["timings"] = {k: v for k, v in profile["timings"].items() if k != "fitted"}
    keys, features, targets = time_model.training_set(CalibratedModel(gpu, CaptureSettings(), bare, gpu), kind)
    by_key = {k: i for i, k in enumerate(keys)}
    out = []
    for train, test in time_model.region_folds(kind, [tuple(r[:KEY_LENGTH[kind]]) for r in rows]):
        trimmed = copy.copy(bare)
        trimmed["timings"] = {**bare["timings"], kind: [rows[i] for i in train]}
        nearest = CalibratedModel(gpu, CaptureSettings(), trimmed, gpu)
        fit_rows = [by_key[tuple(rows[i][:KEY_LENGTH[kind]])] for i in train
                    if tuple(rows[i][:KEY_LENGTH[kind]]) in by_key]
        reg = time_model.new_regressor().fit(np.array([features[i] for i in fit_rows]),
                                          np.array([targets[i] for i in fit_rows]))
        shipped_profile = copy.copy(trimmed)
        shipped_profile["timings"] = {**trimmed["timings"], "fitted": {kind: {
            "regressor": time_model.export_kind_regressor(reg, kind).to_dict(),
            "held_out": profile["timings"].get("fitted", {}).get(kind, {}).get("held_out", {"uncertainty": -1.0})}}}
        shipped = CalibratedModel(gpu, CaptureSettings(), shipped_profile, gpu)
        for i in test:
            r = rows[i]
            key, measured = tuple(r[:KEY_LENGTH[kind]]), r[KEY_LENGTH[kind] + 1]
            entry = {"kind": kind, "group": str(key[:3]), "key": list(key), "measured_us": measured}
            for name, model in (("nearest", nearest), ("fitted", shipped)):
                found = model._lookup_shape(kind, key)
                if found is None:
                    break
                predicted, est = found
                entry[name] = {"predicted_us": round(predicted, 3), "error": predicted / measured - 1,
                               "uncertainty": est.uncertainty, "source": est.source}
            else:
                out.append(entry)
    return out


def _stats(results: list[dict], name: str) -> dict:
    errors = sorted(abs(r[name]["error"]) for r in results)
    stated = [r for r in results if r[name]["uncertainty"] >= 0]
    return {"median_error": round(statistics.median(errors), 4), "p90_error": round(errors[int(0.9 * (len(errors) - 1))], 4),
            "inside_uncertainty": round(sum(abs(math.log1p(r[name]["error"])) <= r[name]["uncertainty"]
                                            for r in stated) / len(stated), 3) if len(stated) == len(results) else None}


def summarize(results: list[dict], label: str) -> str:
    if not results:
        return f"{label:34s} (no points)"
    line = f"{label:38s} n={len(results):5d}"
    for name in MODELS:
        errors = sorted(abs(r[name]["error"]) for r in results)
        stated = [r for r in results if r[name]["uncertainty"] >= 0]  # -1: a kind the profile ships no fit for
        covered = (f"{sum(abs(math.log1p(r[name]['error'])) <= r[name]['uncertainty'] for r in stated) / len(stated):4.0%}"
                   if len(stated) == len(results) else "  - ")
        line += (f"  {name}: median {statistics.median(errors):6.1%} p90 {errors[int(0.9 * (len(errors) - 1))]:6.1%}"
                 f" inside {covered}")
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=str(Path(__file__).resolve().parents[2]
                                                 / "src/kernelcast/profiles/h200.json"))
    parser.add_argument("--json", help="every held-out point (large)")
    parser.add_argument("--summary", help="per kind and model: median and p90 error, share inside the stated "
                                          "uncertainty (what docs/validation.md shows)")
    args = parser.parse_args()
    profile = json.loads(Path(args.profile).read_text())
    everything, summary = [], {}
    for kind in ("gemm", "conv", "attention"):
        results = evaluate(profile, kind)
        everything += results
        summary[kind] = {"points": len(results), **{name: _stats(results, name) for name in MODELS}}
        print(summarize(results, kind))
        groups = collections.defaultdict(list)
        for r in results:
            groups[r["group"]].append(r)
        for group in sorted(groups, key=lambda g: -len(groups[g]))[:8]:
            print("  " + summarize(groups[group], group))
    if args.summary:
        Path(args.summary).write_text(json.dumps({
            "command": "python3 scripts/eval/shape_model_eval.py " + " ".join(sys.argv[1:]), "folds": FOLDS,
            "octaves_per_region": OCTAVES_PER_REGION, "fitted_kinds": list(time_model.FITTED_KINDS),
            "kinds": summary}, indent=1) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 scripts/eval/shape_model_eval.py " + " ".join(sys.argv[1:]),
                                               "octaves_per_region": OCTAVES_PER_REGION, "folds": FOLDS,
                                               "points": everything}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
