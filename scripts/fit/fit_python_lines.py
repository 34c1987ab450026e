"""Fit the host cost of the model's Python per counted line to the zoo's steps measured on the H200's host.

    PYTHONPATH=/work/tf517 python3 scripts/fit/fit_python_lines.py validation/zoo_measured.json.gz \
        validation/host_spread/zoo_timing_clean_run*.json.gz [--out validation/host_python_lines_fit.json]

Each zoo workload is captured here (its model's Python lines counted, capture/host_clock.py) and predicted on
the H200 with the model Python priced at 0 and at TRIAL_LINE_US per line; the workloads predicted host-bound at
the trial cost, with a step measured in every timing file (scripts/device/zoo_measure.py --timing-only: separate
fresh-process runs on device machines), are the rows, their measured step the median over the files.
calibrate/python_lines.py fits the per-line cost and its held-out error and range; this script writes them, and
scripts/fit/build_h200_profile.py puts them in the profile's host section as `model python` (predict/host.py). The
transformers models must be built as the device built them: put the device's transformers first on the path
(scripts/eval/zoo_validate.py says so when they differ). About 3 minutes on two cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import time
from pathlib import Path

import kernelcast  # noqa: F401  (before torch)

from kernelcast.calibrate.python_lines import Row, fit

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts
OUT = ROOT / "validation" / "host_python_lines_fit.json"
TRIAL_LINE_US = 0.1  # µs per line for the trial prediction (near the fit: the slope is exact for host-bound steps)


def row_for(entry: dict, measured_us: float) -> tuple[Row | None, dict]:
    """One workload captured and predicted at 0 and TRIAL_LINE_US per line: its Row where the trial step is
    host-bound, and what was found."""
    from kernelcast.capture import capture_workload
    from kernelcast.capture.workload import load_build, on_sys_path
    from kernelcast.devices import get_gpu
    from kernelcast.predict import host_model_for, predict_capture

    path, func = entry["workload"].split(":")
    build, folder = load_build(f"{ROOT / path}:{func}")
    with on_sys_path(folder):
        cap = capture_workload(build, "h200", workload=entry["workload"])
    host = host_model_for(get_gpu("h200"), cap)
    steps = {}
    for cost in (0.0, TRIAL_LINE_US):
        # every stretch by its lines (no stretch priced as read: at 0 µs per line each would be)
        pred = predict_capture(cap, "h200", host_model=dataclasses.replace(
            host, price_lines=True, python_line_us=cost, heavy_stretch_min_us=math.inf))
        steps[cost] = pred
    trial = steps[TRIAL_LINE_US]
    found = {"lines": sum(op.python_lines for op in cap.ops), "bound": trial.bound,
             "step0_us": round(steps[0.0].step_time_us, 1), "trial_step_us": round(trial.step_time_us, 1),
             "measured_us": round(measured_us, 1)}
    slope = (trial.step_time_us - steps[0.0].step_time_us) / TRIAL_LINE_US
    if trial.bound != "host" or slope <= 0:
        return None, found
    return Row(entry["name"], steps[0.0].step_time_us, slope, measured_us), found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("zoo", help="scripts/device/zoo_measure.py output naming the workloads (json.gz)")
    parser.add_argument("timings", nargs="+", help="scripts/device/zoo_measure.py --timing-only runs: the measured steps")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    from zoo_measure import backend_flags, restore_backend_flags
    from zoo_validate import load_measured

    runs = [{w["name"]: w["measured"]["step_ms_median"] * 1e3 for w in load_measured(p)["workloads"]
             if "measured" in w} for p in args.timings]
    rows, found, start = [], {}, time.perf_counter()
    for entry in load_measured(args.zoo)["workloads"]:
        if "measured" not in entry or not all(entry["name"] in r for r in runs):
            continue
        flags = backend_flags()
        try:
            row, found[entry["name"]] = row_for(entry, statistics.median(r[entry["name"]] for r in runs))
        except Exception as exc:  # a workload that does not capture here is left out, and said
            found[entry["name"]] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            row = None
        restore_backend_flags(flags)
        if row is not None:
            rows.append(row)
        print(f"{entry['name']:32s} {found[entry['name']]}", flush=True)
    result = fit(rows)
    doc = {"command": "python3 scripts/fit/fit_python_lines.py " + " ".join(sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d"), "seconds": round(time.perf_counter() - start, 1),
           "truth": f"median step over {len(runs)} timing runs ({', '.join(Path(p).name for p in args.timings)})",
           **result, "workloads": found}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    held = result["held_out"]
    print(f"\n{len(rows)} host-bound workloads: {result['per_line_us']} µs per line, range x{result['range'][0]}"
          f"-{result['range'][1]}; held out median error {held['median_error']:.1%} (signed "
          f"{held['signed_median_error']:+.1%}), within 15% {held['within_15']:.0%}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
