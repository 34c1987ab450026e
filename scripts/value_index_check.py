"""Value-and-index reductions (max / min over a dim, argmax) on the H200: the kernel model against the
microbenchmark section value_index_grid (validation/h200_value_index_grid_raw.json.gz), by kind of case.

    python3 scripts/value_index_check.py                        # the shipped profile
    python3 scripts/value_index_check.py --profile /tmp/x.json  # a rebuilt one

Each case's ops are costed and timed by the calibrated model as a captured op would be; per case kind
(max_dim1, max_dim0, argmax_dim1, argmax_all, amax_dim1 beside them) the median of predicted / measured kernel
time, its median |error| and the share within 15%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "validation" / "h200_value_index_grid_raw.json.gz"
WITHIN = 0.15


def case_times(profile: dict, cases: list[dict]) -> list[tuple[str, float, float]]:
    """(case kind, predicted µs, measured µs) per case: the case's costed ops summed on the H200."""
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
    from kernelcast.costs import cost_of
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.predict import cost_context
    from kernelcast.records import Capture, CaptureSettings, OpRecord

    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), profile, gpu)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=str(ROOT / "src/kernelcast/profiles/h200.json"))
    args = parser.parse_args()
    from kernelcast.calibrate import read_raw

    profile = json.loads(Path(args.profile).read_text())
    cases = read_raw(str(RAW))["cases"]
    print(f"{'case kind':<14} {'n':>4} {'pred/meas':>10} {'median |err|':>13} {'within 15%':>11}")
    for kind, s in summary(case_times(profile, cases)).items():
        print(f"{kind:<14} {s['n']:>4} {s['median_ratio']:>10.2f} {s['median_error']:>13.1%} {s['within_15']:>11.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
