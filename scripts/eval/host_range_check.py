"""Do the printed step ranges hold the measured step? (issue 33)

    python3 scripts/eval/host_range_check.py validation/zoo_repredicted.json \
        validation/host_spread/zoo_timing_clean_run1.json.gz [--gpu-times validation/zoo_measured.json.gz]

For every workload predicted host-bound in the first file (scripts/eval/zoo_validate.py's output: the point
prediction, the model Python's range `step_time_range_us`, this host's calibration runs' range
`step_time_run_range_us` and the step's range with both at once, `step_range_us`, the one the summary prints),
whether each range holds the step time measured in each timing file
(scripts/device/zoo_measure.py, --timing-only or not: `step_ms_median`), and the point prediction's error. With more
than one timing file, the same against each workload's median over the files (issue 33's truth: the median of
separate fresh-process runs). With --gpu-times (scripts/device/zoo_measure.py's full run, which profiled each step's
kernels), the verdicts too: each step's measured verdict in each timing run (its kernels' time over the step,
predict.step_verdict's thresholds), and the predicted verdict against the steps whose measured verdict is clear
(gpu or host in every run).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys


def _load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("predicted", help="scripts/eval/zoo_validate.py --out JSON")
    parser.add_argument("measured", nargs="+", help="scripts/device/zoo_measure.py outputs (json.gz)")
    parser.add_argument("--gpu-times", help="scripts/device/zoo_measure.py output with each step's kernel time "
                        "(gpu_time_us): judge the verdicts too")
    args = parser.parse_args()
    predicted = {w["name"]: w["predicted"] for w in _load(args.predicted)["workloads"] if "predicted" in w}
    truths = []
    for path in args.measured:
        doc = _load(path)
        truths.append((f"{path} ({doc.get('date', '?')})",
                       {w["name"]: w["measured"]["step_ms_median"] * 1e3 for w in doc["workloads"] if "measured" in w}))
    if len(truths) > 1:
        common = set.intersection(*(set(t) for _, t in truths))
        truths.append((f"median of the {len(truths)} runs", {n: statistics.median(t[n] for _, t in truths)
                                                            for n in common}))
    for label, truth in truths:
        rows = [(n, p, truth[n]) for n, p in predicted.items() if n in truth and p.get("bound") == "host"
                and p.get("step_time_run_range_us")]
        if not rows:
            print(f"{label}: no host-bound workload predicted with a range")
            continue
        inside_python = sum(p["step_time_range_us"][0] <= t <= p["step_time_range_us"][1] for _, p, t in rows)
        inside_runs = sum(p["step_time_run_range_us"][0] <= t <= p["step_time_run_range_us"][1] for _, p, t in rows)
        both = [(p["step_range_us"], t) for _, p, t in rows if p.get("step_range_us")]
        inside_both = sum(low <= t <= high for (low, high), t in both)
        widths = [high / low for (low, high), _ in both if low > 0]
        errors = [p["step_time_us"] / t - 1.0 for _, p, t in rows]
        print(f"{label}: {len(rows)} workloads predicted host-bound; point prediction median "
              f"error {statistics.median(abs(e) for e in errors):.1%} (signed {statistics.median(errors):+.1%}); "
              f"measured step inside the model-Python range {inside_python}, inside this host's calibration-run "
              f"range {inside_runs}" + (f", inside the step's range (both at once) {inside_both} of {len(both)} "
                                        f"(its high / low: median x{statistics.median(widths):.2f})" if widths else ""))
    if args.gpu_times:
        verdicts(args.predicted, args.gpu_times, truths[:len(args.measured)])
    return 0


def verdicts(predicted_path: str, gpu_path: str, truths: list) -> None:
    """Print the predicted verdict against each step's measured one where it is clear in every timing run."""
    import kernelcast  # noqa: F401  (before torch)
    from kernelcast.predict import step_verdict  # the thresholds the prediction's own verdict uses

    predicted = {w["name"]: w["predicted"] for w in _load(predicted_path)["workloads"] if "predicted" in w}
    gpu_us = {w["name"]: w["measured"].get("gpu_time_us") for w in _load(gpu_path)["workloads"] if "measured" in w}
    clear, wrong = 0, []
    for name, pred in predicted.items():
        steps = [t[name] for _, t in truths if name in t]
        if not gpu_us.get(name) or len(steps) < len(truths):
            continue
        measured = {step_verdict(gpu_us[name], step) for step in steps}
        if len(measured) == 1 and measured != {"mixed"}:
            clear += 1
            if pred.get("bound") != next(iter(measured)):
                wrong.append(f"{name} (predicted {pred.get('bound')}, measured {next(iter(measured))})")
    print(f"verdicts: right on {clear - len(wrong)} of {clear} steps whose measured verdict is clear in every run"
          + (f"; wrong: {', '.join(wrong)}" if wrong else ""))


if __name__ == "__main__":
    sys.exit(main())
