"""A GPU's fitted rates against the same GPU timed with a current torch: do they carry torch 2.5 (issue 30)?

    python3 scripts/eval/torch_era_check.py validation/h100/kernelbench_call_times_h100_run*.json --gpu h100-sxm

The achieved-rate factors (devices/achieved.json) are fitted to KernelBench's published timings, taken with torch
2.5; our own runs of the same programs on the device machine (scripts/device/kernelbench_call_times.py, torch
2.11) time them with a current torch. Over the programs that keep the H200 busy (kernelbench_validate.py's rule),
each call's predicted time (build/kernelbench/rates_predicted.json, `scripts/fit/fit_gpu_rates.py predict`) with
the GPU's fitted factors and with none (the datasheet carry alone) against the runs' mean call: median |error|
and the share within 15% of each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts

from fit_gpu_rates import PREDICTED, _busy_row  # noqa: E402
from kernelbench_validate import _ours  # noqa: E402

from kernelcast.calibrate.gpu_rates import scaled_us  # noqa: E402
from kernelcast.devices.achieved import _data  # noqa: E402

WITHIN = 0.15


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="kernelbench_call_times.py files of one GPU")
    parser.add_argument("--gpu", required=True, help="kernelcast's id of the GPU they ran on")
    args = parser.parse_args()

    runs = [json.loads(Path(p).read_text())["problems"] for p in args.runs]
    predicted = json.loads(PREDICTED.read_text())["programs"]
    reference = _ours()
    fitted = _data()["fitted"][args.gpu]["factors"]
    errors: dict[str, list[float]] = {"datasheet carry alone": [], "fitted factors (torch 2.5)": []}
    for name, row in predicted.items():
        times = [r[name]["mean_ms"] for r in runs if "mean_ms" in r.get(name, {})]
        if not times or name not in reference or not _busy_row(reference[name]) or args.gpu not in row:
            continue
        measured_us = statistics.fmean(times) * 1000.0
        for label, factors in zip(errors, ({}, fitted)):
            errors[label].append(abs(scaled_us(row, args.gpu, factors) / measured_us - 1.0))
    print(f"{args.gpu}: {len(next(iter(errors.values())))} GPU-busy programs, mean call over {len(runs)} runs "
          f"({', '.join(args.runs)})")
    for label, errs in errors.items():
        print(f"  {label:28s} median |error| {statistics.median(errs):.1%}, within 15% "
              f"{sum(e <= WITHIN for e in errs) / len(errs):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
