"""Value-and-index reductions (max / min over a dim, argmax) on the H200: the kernel model against the
microbenchmark section value_index_grid (validation/h200_value_index_grid_raw.json.gz), by kind of case.

    python3 scripts/eval/value_index_check.py                        # the shipped profile
    python3 scripts/eval/value_index_check.py --profile /tmp/x.json  # a rebuilt one
    python3 scripts/eval/value_index_check.py --holdout              # factors fitted on alternate shapes only
    python3 scripts/eval/value_index_check.py --raw validation/h100/h100_middle_reduce_grid_raw.json.gz --gpu h100
                                                                # another section, measured on another GPU

Each case's ops are costed and timed by the calibrated model as a captured op would be; per case kind
(max_dim1, max_dim0, argmax_dim1, argmax_all, amax_dim1 beside them) the median of predicted / measured kernel
time, its median |error| and the share within 15%. With --holdout, the grid's shapes (rows, cols) in sorted order
are split alternately: the factors (calibrate/value_index.py fit) are fitted on one half with the profile's
value-only curves and the other half is priced with them, beside the same half priced as value-only kinds (the
model before the factors). The shipped profile's curves never held the value-index cases (their amax is kept off
them too: scripts/fit/build_h200_profile.py UNUSED_FROM), so the held-out half is unseen by both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "validation" / "h200_value_index_grid_raw.json.gz"
WITHIN = 0.15


def case_times(profile: dict, cases: list[dict], gpu_id: str = "h200") -> list[tuple[str, float, float]]:
    """(case kind, predicted µs, measured µs) per case: the case's costed ops summed on `gpu_id` (the H200
    profile carried to it as predict does, where it is another GPU)."""
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
    from kernelcast.costs import cost_of
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.predict import cost_context
    from kernelcast.records import Capture, CaptureSettings, OpRecord

    gpu = get_gpu(gpu_id)
    model = CalibratedModel(gpu, CaptureSettings(), profile, get_gpu("h200"))
    ctx = cost_context(gpu, Capture(ops=()))
    out = []
    for case in cases:
        if "error" in case:
            continue
        costs = [cost_of(OpRecord.from_json(o), ctx) for o in case["ops"]]
        predicted = sum(model.estimate(c).time_us for c in costs if c is not None and c.kernels)
        out.append((case["kind"], predicted, case["device_us"]))
    return out


def summary(rows: list[tuple[str, float, float]]) -> dict[str, dict]:
    by_kind: dict[str, list[float]] = {}
    for kind, predicted, measured in rows:
        by_kind.setdefault(kind, []).append(predicted / measured)
    return {kind: {"n": len(r), "median_ratio": statistics.median(r),
                   "median_error": statistics.median(abs(x - 1) for x in r),
                   "within_15": sum(abs(x - 1) <= WITHIN for x in r) / len(r)} for kind, r in sorted(by_kind.items())}


def holdout(profile: dict, cases: list[dict]) -> None:
    """Print, per case kind, the held-out half's errors with factors fitted on the other half, and as value-only."""
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
    from kernelcast.calibrate.profile import _costs
    from kernelcast.calibrate.value_index import fit

    shapes = sorted({(c["rows"], c["cols"]) for c in cases if "error" not in c})
    train_shapes = set(shapes[::2])
    train = [c for c in cases if "error" not in c and (c["rows"], c["cols"]) in train_shapes]
    test = [c for c in cases if "error" not in c and (c["rows"], c["cols"]) not in train_shapes]
    without = {**profile, "timings": {k: v for k, v in profile["timings"].items() if k != "value_index"}}
    factors = fit(without, [(c, _costs(c)) for c in train])
    with_half = {**without, "timings": {**without["timings"], "value_index": factors}}
    for label, prof in (("factors fitted on the other half", with_half), ("as value-only kinds", without)):
        print(f"held-out half ({len(test)} cases), {label}")
        for kind, s in summary(case_times(prof, test)).items():
            print(f"  {kind:<14} {s['n']:>4} {s['median_ratio']:>10.2f} {s['median_error']:>13.1%} "
                  f"{s['within_15']:>11.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=str(ROOT / "src/kernelcast/profiles/h200.json"))
    parser.add_argument("--holdout", action="store_true", help="fit the factors on alternate shapes, price the rest")
    parser.add_argument("--raw", default=str(RAW), help="a microbenchmark section's raw results (any section: the "
                        "model against its cases, by case kind)")
    parser.add_argument("--gpu", default="h200", help="the GPU the raw section was measured on (its meta's device): "
                        "the H200 profile is carried to it as `kernelcast predict --gpu` carries it")
    args = parser.parse_args()
    from kernelcast.calibrate import read_raw

    profile = json.loads(Path(args.profile).read_text())
    cases = read_raw(args.raw)["cases"]
    if args.holdout:
        holdout(profile, cases)
        return 0
    print(f"{'case kind':<14} {'n':>4} {'pred/meas':>10} {'median |err|':>13} {'within 15%':>11}")
    for kind, s in summary(case_times(profile, cases, args.gpu)).items():
        print(f"{kind:<14} {s['n']:>4} {s['median_ratio']:>10.2f} {s['median_error']:>13.1%} {s['within_15']:>11.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
