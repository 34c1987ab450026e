"""How well the GEMM time table predicts the fp32 round-size grid (sweep section gemm_fp32_round) it now holds:
without the grid at all, and held out one size at a time.

    python3 scripts/eval/gemm_grid_holdout.py [--raw validation/h200_gemm_fp32_round_raw.json.gz] [--json out.json]

Each grid GEMM (fp32, TF32 off, batch 1-64, N and K among 16-4096, every layout) is predicted by the shipped
profile's GEMM table (calibrated shape model: prior x the nearest points' correction) in two ways:
- "without the grid": every grid row taken out of the table (what the model said before the grid was measured);
- "held out by size": for each size s, the grid rows whose N or K is s taken out, the rest of the grid kept (a
  round shape between the measured ones, as a model's shape that the grid does not hold).
Kernel durations summed per GEMM are the measured side, as in the table.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _errors(model, rows: list) -> list[float]:
    out = []
    for r in rows:
        found = model._lookup_shape("gemm", tuple(r[:7]))
        if found is not None:
            out.append(abs(found[0] / r[8] - 1))
    return out


def _summary(errors: list[float]) -> dict:
    ordered = sorted(errors)
    return {"rows": len(ordered), "median_error": round(statistics.median(ordered), 4),
            "p90_error": round(ordered[int(0.9 * (len(ordered) - 1))], 4)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", default=str(ROOT / "validation/h200_gemm_fp32_round_raw.json.gz"))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    from kernelcast.calibrate import read_raw
    from kernelcast.calibrate.profile import _sweep_rows
    from kernelcast.calibrate.sweep import FP32_ROUND_SIZES
    from kernelcast.devices import get_gpu
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    calibrated = importlib.import_module("kernelcast.predict.calibrated")  # `kernelcast.predict` is also a function
    profile = load_profile("h200").data
    grid = _sweep_rows(read_raw(args.raw).get("sweep", ()))[0]
    grid_keys = {tuple(r[:7]) for r in grid}
    gpu = get_gpu("h200")

    def model_without(keys: set):
        trimmed = copy.copy(profile)
        trimmed["timings"] = {**profile["timings"],
                              "gemm": [r for r in profile["timings"]["gemm"] if tuple(r[:7]) not in keys]}
        return calibrated.CalibratedModel(gpu, CaptureSettings(), trimmed, gpu)

    without = _errors(model_without(grid_keys), grid)
    held = []
    for size in FP32_ROUND_SIZES:
        test = [r for r in grid if size in (r[5], r[6])]
        held += _errors(model_without({tuple(r[:7]) for r in test}), test)
    result = {"command": "python3 scripts/eval/gemm_grid_holdout.py " + " ".join(argv or sys.argv[1:]),
              "without_the_grid": _summary(without), "held_out_by_size": _summary(held)}
    print(f"{len(grid)} grid GEMMs: without the grid median {result['without_the_grid']['median_error']:.1%} "
          f"p90 {result['without_the_grid']['p90_error']:.1%}; held out by size median "
          f"{result['held_out_by_size']['median_error']:.1%} p90 {result['held_out_by_size']['p90_error']:.1%}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
