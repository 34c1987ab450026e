"""How well the calibrated shape model predicts shapes it has not seen: the shipped profile's GEMM, convolution and
attention points, held out by REGION of the shape space (not at random), each predicted from the rest.

    python3 scripts/shape_model_eval.py [--profile src/kernelcast/profiles/h200.json] [--json out.json]

Regions are blocks of OCTAVES_PER_REGION octaves in each size coordinate of the kind (GEMM: M, N, K; conv: batch,
C_in, C_out, size; attention: batch x heads, query and key length, head dim). Holding out a whole block means the
nearest points left are outside it, as for a model shape that falls between calibrated ones. A random left-one-out
split would put a near twin of most points in the training set and flatter the model.
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

from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import _KEY_LENGTH, _POINTS, CalibratedModel
from kernelcast.records import CaptureSettings

OCTAVES_PER_REGION = 3


def region(kind: str, key: tuple) -> tuple:
    coords, _ = _POINTS[kind](key)
    return tuple(int(c // OCTAVES_PER_REGION) for c in coords[:4])


def evaluate(profile: dict, kind: str) -> list[dict]:
    rows = [r for r in profile["timings"].get(kind, ()) if len(r) == _KEY_LENGTH[kind] + 3]
    gpu = get_gpu(profile["gpu"])
    by_region: dict[tuple, list] = collections.defaultdict(list)
    for r in rows:
        by_region[region(kind, tuple(r[:_KEY_LENGTH[kind]]))].append(r)
    out = []
    for held, test in by_region.items():
        trimmed = copy.copy(profile)
        trimmed["timings"] = {**profile["timings"], kind: [r for r in rows if r not in test]}
        model = CalibratedModel(gpu, CaptureSettings(), trimmed, gpu)
        for r in test:
            key, measured = tuple(r[:_KEY_LENGTH[kind]]), r[_KEY_LENGTH[kind] + 1]
            found = model._lookup_shape(kind, key)
            if found is None:
                continue
            predicted, est = found
            out.append({"kind": kind, "group": str(key[:3]), "key": list(key), "measured_us": measured,
                        "predicted_us": round(predicted, 3), "error": predicted / measured - 1,
                        "uncertainty": est.uncertainty, "source": est.source})
    return out


def summarize(results: list[dict], label: str) -> str:
    if not results:
        return f"{label:34s} (no points)"
    errors = sorted(abs(r["error"]) for r in results)
    covered = sum(abs(math.log1p(r["error"])) <= r["uncertainty"] for r in results) / len(results)
    return (f"{label:34s} n={len(errors):5d}  median {statistics.median(errors):6.1%}  "
            f"p90 {errors[int(0.9 * (len(errors) - 1))]:6.1%}  inside stated uncertainty {covered:5.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=str(Path(__file__).resolve().parent.parent
                                                 / "src/kernelcast/profiles/h200.json"))
    parser.add_argument("--json")
    args = parser.parse_args()
    profile = json.loads(Path(args.profile).read_text())
    everything = []
    for kind in ("gemm", "conv", "attention"):
        results = evaluate(profile, kind)
        everything += results
        print(summarize(results, kind))
        groups = collections.defaultdict(list)
        for r in results:
            groups[r["group"]].append(r)
        for group in sorted(groups, key=lambda g: -len(groups[g]))[:8]:
            print("  " + summarize(groups[group], group))
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 scripts/shape_model_eval.py " + " ".join(sys.argv[1:]),
                                               "octaves_per_region": OCTAVES_PER_REGION, "points": everything}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
