"""Held-out check of the generated-kernel (Triton) rates on the compiled zoo: each workload's generated kernels,
measured on the H200, predicted by the profile's rates (a launch floor and bandwidth per class fitted to the
grid of compiled microbenchmarks, calibrate/triton_grid.py: no zoo kernel is in the fit), beside the same
line fitted to the other zoo workloads (held out by workload) and the eager pointwise curve (the stand-in
before either, predict/calibrated.py MEMORY_FALLBACK).

    python3 scripts/eval/triton_rates_eval.py validation/compile/compile_measured.json.gz [--json OUT]

Per kind (triton_pointwise, triton_reduction, triton_persistent_reduction) and per workload: median and 90th
percentile |error| of kernel time, and the summed time of the workload's generated kernels, predicted vs measured.
Bytes are Inductor's own count per kernel (calibrate/generated.py); a kernel is one point per profiled launch.
Kernels that add atomically are priced by their atomics (not checked here: the profile does not name them).
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

ROOT = Path(__file__).resolve().parents[2]
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
    grid = timings["generated"]
    errors: dict[str, dict[str, list[float]]] = {}
    per_workload = []
    for workload in measured["workloads"]:
        name = workload["name"]
        held_out = generated_fits(measured, leave_out=name)
        sums = {"measured_us": 0.0, "grid_us": 0.0, "held_out_us": 0.0, "stand_in_us": 0.0, "kernels": 0}
        for kind, (nbytes, _items, time_us, _inner, itemsize) in generated_points(workload):
            standin = streaming_time_us(stand_in, nbytes, itemsize, floor_us)
            fit = held_out.get(kind)
            fitted = fit["launch_us"] + nbytes / fit["bytes_per_us"] if fit else standin
            fit = grid.get(kind)
            by_grid = fit["launch_us"] + nbytes / fit["bytes_per_us"] if fit else standin
            e = errors.setdefault(kind, {"grid": [], "held_out": [], "stand_in": []})
            e["grid"].append(abs(by_grid - time_us) / time_us)
            e["held_out"].append(abs(fitted - time_us) / time_us)
            e["stand_in"].append(abs(standin - time_us) / time_us)
            sums["measured_us"] += time_us
            sums["grid_us"] += by_grid
            sums["held_out_us"] += fitted
            sums["stand_in_us"] += standin
            sums["kernels"] += 1
        if sums["kernels"]:
            per_workload.append({"workload": name, "family": workload.get("family", ""), **sums})
    models = ("grid", "held_out", "stand_in")
    print(f"{'kind':30s} {'kernels':>7s}" + "".join(f" {m + ' median':>16s} {'p90':>5s}" for m in models))
    summary = {}
    for kind, e in sorted(errors.items()):
        summary[kind] = {"kernels": len(e["grid"])}
        for m in models:
            summary[kind][m + "_median"] = statistics.median(e[m])
            summary[kind][m + "_p90"] = _quantile(e[m], 0.9)
        s = summary[kind]
        print(f"{kind:30s} {s['kernels']:7d}" + "".join(f" {s[m + '_median']:16.1%} {s[m + '_p90']:5.0%}"
                                                     for m in models))
    print(f"\n{'workload (generated kernels summed)':40s} {'n':>4s} {'measured':>9s}" + "".join(f" {m:>9s}" for m in models))
    for w in per_workload:
        print(f"{w['workload'][:40]:40s} {w['kernels']:4d} {w['measured_us']:8.0f}u" + "".join(
            f" {(w[m + '_us'] - w['measured_us']) / w['measured_us']:+9.1%}" for m in models))
    for m in models:
        sum_err = [abs(w[m + "_us"] - w["measured_us"]) / w["measured_us"] for w in per_workload]
        print(f"summed per workload, {m}: median |error| {statistics.median(sum_err):.1%}, worst {max(sum_err):.1%}")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python3 scripts/eval/triton_rates_eval.py " + args.measured,
                                               "by_kind": summary, "by_workload": per_workload}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
