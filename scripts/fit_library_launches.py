"""Host µs per kernel a cuDNN call launches, from the device probe (scripts/probe_library_launches.py), into the
profile's host section as the case "library launch" (predict/host.py reads it).

    python3 scripts/fit_library_launches.py validation/probes/library_launches.json src/kernelcast/profiles/h200.json

Per probe row with at least MIN_ITEMS work items (where the call's fixed part is a few percent of it), the host
CPU time of the call over its items; their median. The probe host ran at its own speed: the figure is carried
to the profile's typical host by the ratio of their Python benchmarks (the profile's merged "python bench"
over the mean of the probe's before and after). Nothing here is fitted to a zoo workload.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

MIN_ITEMS = 50
CASE = "library launch"


def per_item_us(probe: dict) -> tuple[float, int]:
    """(median host µs per work item over the rows with MIN_ITEMS or more, how many rows)."""
    rates = [r["host_us_median"] / r["work_items"] for r in probe["rows"] if r["work_items"] >= MIN_ITEMS]
    if not rates:
        raise ValueError(f"no probe row launches {MIN_ITEMS} work items or more")
    return statistics.median(rates), len(rates)


def main() -> int:
    probe_path, profile_path = Path(sys.argv[1]), Path(sys.argv[2])
    probe = json.loads(probe_path.read_text())
    profile = json.loads(profile_path.read_text())
    rate, rows = per_item_us(probe)
    probe_bench = statistics.fmean([probe["cpu_bench_before"]["python_bench_us"],
                                    probe["cpu_bench_after"]["python_bench_us"]])
    typical_bench = profile["host"]["python bench"]["median_us"]
    scaled = rate * typical_bench / probe_bench
    profile["host"][CASE] = {"median_us": scaled, "min_us": scaled, "max_us": scaled,
                             "probe_us": rate, "probe_rows": rows, "speed_ratio": typical_bench / probe_bench,
                             "source": f"{probe_path} ({probe['command']}, {probe['date']})"}
    profile_path.write_text(json.dumps(profile, separators=(",", ":")) + "\n")
    print(f"{CASE}: {rate:.2f} us per work item on the probe host over {rows} rows, {scaled:.2f} us on the "
          f"profile's typical host (Python benchmark {typical_bench:.0f} vs {probe_bench:.0f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
