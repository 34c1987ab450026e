"""Held-out check of the generated-kernel (Triton) rates: each compiled zoo workload's generated kernels,
measured on the H200, predicted from a launch floor and bandwidth per class fitted to the other workloads only
(calibrate/generated.py), beside the stand-in the profile used before (the eager pointwise curve,
predict/calibrated.py MEMORY_FALLBACK).

    python3 scripts/triton_rates_eval.py validation/compile/compile_measured.json.gz [--json OUT]

Per kind (triton_pointwise, triton_reduction, triton_persistent_reduction) and per workload: median and 90th
percentile |error| of kernel time, and the summed time of the workload's generated kernels, predicted vs measured.
Bytes are Inductor's own count per kernel (calibrate/generated.py); a kernel is one point per profiled launch.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

from kernelcast.calibrate.generated import generated_fits, generated_points
from kernelcast.predict.calibrated import streaming_time_us

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "src/kernelcast/profiles/h200.json"
STAND_IN = "pointwise"


def _quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(int(q * len(values)), len(values) - 1)] if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measured")
    parser.add_argument("--json")
    args = parser.parse_args()
    measured = json.loads(gzip.open(args.measured).read())
    timings = json.loads(PROFILE.read_text())["timings"]
    floor_us = float(timings["work_item_floor_us"])
    stand_in = timings["memory"][STAND_IN]
    errors: dict[str, dict[str, list[float]]] = {}
    per_workload = []
    for workload in measured["workloads"]:
        name = workload["name"]
        held_out = generated_fits(measured, leave_out=name)
        sums = {"measured_us": 0.0, "held_out_us": 0.0, "stand_in_us": 0.0, "kernels": 0}
        for kind, (nbytes, _items, time_us, _inner, itemsize) in generated_points(workload):
            fit = held_out.get(kind)
            fitted = fit["launch_us"] + nbytes / fit["bytes_per_us"] if fit else \
                streaming_time_us(stand_in, nbytes, itemsize, floor_us)
            standin = streaming_time_us(stand_in, nbytes, itemsize, floor_us)
            e = errors.setdefault(kind, {"held_out": [], "stand_in": []})
            e["held_out"].append(abs(fitted - time_us) / time_us)
            e["stand_in"].append(abs(standin - time_us) / time_us)
            sums["measured_us"] += time_us
            sums["held_out_us"] += fitted
            sums["stand_in_us"] += standin
            sums["kernels"] += 1
        if sums["kernels"]:
            per_workload.append({"workload": name, "family": workload.get("family", ""), **sums})
    print(f"{'kind':30s} {'kernels':>7s} {'held-out median':>16s} {'p90':>6s} {'stand-in median':>16s} {'p90':>6s}")
    summary = {}
    for kind, e in sorted(errors.items()):
        summary[kind] = {"kernels": len(e["held_out"]),
                         "held_out_median": statistics.median(e["held_out"]), "held_out_p90": _quantile(e["held_out"], 0.9),
                         "stand_in_median": statistics.median(e["stand_in"]), "stand_in_p90": _quantile(e["stand_in"], 0.9)}
        s = summary[kind]
        print(f"{kind:30s} {s['kernels']:7d} {s['held_out_median']:15.1%} {s['held_out_p90']:6.0%} "
              f"{s['stand_in_median']:15.1%} {s['stand_in_p90']:6.0%}")
    print(f"\n{'workload (generated kernels summed)':52s} {'n':>4s} {'measured':>9s} {'held-out':>9s} {'stand-in':>9s}")
    for w in per_workload:
        print(f"{w['workload'][:52]:52s} {w['kernels']:4d} {w['measured_us']:8.0f}u "
              f"{(w['held_out_us'] - w['measured_us']) / w['measured_us']:+9.1%} "
              f"{(w['stand_in_us'] - w['measured_us']) / w['measured_us']:+9.1%}")
    sum_err = [abs(w["held_out_us"] - w["measured_us"]) / w["measured_us"] for w in per_workload]
    sum_err_standin = [abs(w["stand_in_us"] - w["measured_us"]) / w["measured_us"] for w in per_workload]
    print(f"\nsummed per workload, median |error|: held-out {statistics.median(sum_err):.1%} "
          f"(worst {max(sum_err):.1%}); stand-in {statistics.median(sum_err_standin):.1%} (worst {max(sum_err_standin):.1%})")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 scripts/triton_rates_eval.py " + args.measured,
                                               "by_kind": summary, "by_workload": per_workload}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
