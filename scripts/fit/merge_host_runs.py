"""Put the per-case median of several host calibrations into a profile's host section.

    python3 scripts/fit/merge_host_runs.py validation/host_calibration_runs.json src/kernelcast/profiles/h200.json

The arithmetic is kernelcast.calibrate.host_merge (its docstring says how); this edits a profile in place, where
scripts/fit/build_h200_profile.py builds the same section from validation/ alone.
Host-side costs on the workplace's H200 machines swing up to 2x between runs (the same case, minutes apart:
validation/host_calibration_runs.json), far more than kernel times. One run's host section is one draw from
that spread; the median over runs is the typical host, and the profile keeps every run's values beside it.
Every case is a microbenchmark of calibrate/host.py: nothing here is fitted to a workload.

A case that only some runs measured (one added later: the cuDNN/cuSOLVER library calls) would be one draw from
a host whose speed may sit anywhere in that spread; it is carried to the typical host by its runs' ratio of the
plain launch (REFERENCE_CASE, measured by every run) to that case's median over all runs.
The calibrated host's three CPU benchmarks ("cpu bench") are left out for the same reason: they were read by
one run, and the target-host scaling reads the merged "python bench" instead (predict/host.py calibration_bench).

    python3 scripts/fit/merge_host_runs.py validation/host_calibration_runs.json src/kernelcast/profiles/h200.json \
        [--add RUN.json[.gz] "NAME"]   # a new run's host section, appended first

The last run added (session 17): validation/h200_host_costs_run2.json.gz, made on the H200 by
`python3 -c "from kernelcast.calibrate.host import host_costs; ..."` (the command is in the file).
"""

import gzip
import json
import sys
from pathlib import Path

from kernelcast.calibrate.host_merge import merge

# Kept from the profile as it is: the host's CPU (recorded by the zoo run, not a calibration) and the host-link
# copy curves (scripts/fit/build_h200_profile.py takes them from the sweep run).
KEPT_KEYS = ("cpu", "cpu_source", "copies", "library launch")  # the last: scripts/fit/fit_library_launches.py


def main() -> None:
    runs_path = Path(sys.argv[1])
    data = json.loads(runs_path.read_text())
    if len(sys.argv) == 6 and sys.argv[3] == "--add":
        path = Path(sys.argv[4])
        new = json.loads(gzip.open(path).read() if path.suffix == ".gz" else path.read_text())
        data["runs"].append({"run": sys.argv[5], "host": new["host"]})
        runs_path.write_text(json.dumps(data, indent=1) + "\n")
    runs = data["runs"]
    profile_path = Path(sys.argv[2])
    profile = json.loads(profile_path.read_text())
    kept = {k: v for k, v in profile.get("host", {}).items() if k in KEPT_KEYS}
    profile["host"] = {**merge(runs), **kept}
    profile_path.write_text(json.dumps(profile, separators=(",", ":")) + "\n")
    print(f"host section of {profile_path}: per-case medians of {len(runs)} runs")


if __name__ == "__main__":
    main()
