"""Do the CPU benchmarks a run reads at its start track how fast its host-bound steps run? (issue 33)

    python3 scripts/eval/host_bench_tracking.py validation/host_spread/zoo_timing_clean_run1.json.gz \
        validation/host_spread/zoo_timing_clean_run2.json.gz validation/host_spread/zoo_timing_clean_run3.json.gz \
        validation/zoo_measured.json.gz validation/h100/zoo_measured_h100_run1.json.gz \
        validation/h100/zoo_measured_h100_run2.json.gz

Each file is one zoo run of scripts/device/zoo_measure.py on a device machine: its three CPU benchmarks
(capture/cpu_speed.py, read once at the run's start) and every workload's step time. Against the first file, per
run: the median over the host-bound workloads (kernels under HOST_SHARE of the first run's step, by the GPU time of
the first file that has one) of the step-time ratio, beside each benchmark's ratio. Were the benchmarks what moves
the host, the two would agree; kernelcast's target-host scaling (predict_capture's target_host) assumes they do.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

HOST_SHARE = 0.5
BENCHES = (("python", "python_bench_us"), ("dispatch", "dispatch_add_2000_us"), ("module", "module_call_5000_us"))


def _load(path: str) -> dict:
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        return json.load(f)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="zoo_measure.py outputs; the first is the reference")
    args = parser.parse_args()
    runs = [(Path(p).name, _load(p)) for p in args.runs]
    steps = [{w["name"]: w["measured"] for w in doc["workloads"] if "measured" in w} for _, doc in runs]
    gpu_us = next(({n: m["gpu_time_us"] for n, m in s.items() if "gpu_time_us" in m} for s in steps
                   if any("gpu_time_us" in m for m in s.values())), {})
    first = steps[0]
    host_bound = [n for n in first if n in gpu_us and gpu_us[n] < HOST_SHARE * first[n]["step_ms_median"] * 1e3]
    print(f"{len(host_bound)} host-bound workloads (kernels under {HOST_SHARE:.0%} of the step in {runs[0][0]})")
    print(f"{'run':42s} {'device':24s} {'step ratio median (q25-q75)':>28s}  " + "  ".join(f"{b:>8s}" for b, _ in BENCHES))
    bench0 = runs[0][1]["cpu_microbenchmarks"]
    for (name, doc), s in zip(runs, steps):
        ratios = sorted(s[n]["step_ms_median"] / first[n]["step_ms_median"] for n in host_bound if n in s)
        q = lambda f: ratios[int(f * (len(ratios) - 1))]  # noqa: E731
        bench = doc["cpu_microbenchmarks"]
        print(f"{name:42s} {doc['device'][:24]:24s} {statistics.median(ratios):>10.2f} ({q(0.25):.2f}-{q(0.75):.2f}, "
              f"n={len(ratios)})  " + "  ".join(f"{bench[k] / bench0[k]:8.2f}" for _, k in BENCHES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
