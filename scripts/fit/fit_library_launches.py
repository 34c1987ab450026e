"""Host µs per kernel a cuDNN call launches, from the device probe (scripts/device/probe_library_launches.py), into the
profile's host section as the case "library launch" (predict/host.py reads it).

    python3 scripts/fit/fit_library_launches.py validation/probes/library_launches.json src/kernelcast/profiles/h200.json

Per probe row with at least MIN_ITEMS work items (where the call's fixed part is a few percent of it), the host
CPU time of the call over its items; their median. The probe host ran at its own speed: the figure is carried
to the profile's typical host by the ratio of their Python benchmarks (the profile's merged "python bench"
over the mean of the probe's before and after). Nothing here is fitted to a zoo workload. The arithmetic is
kernelcast.calibrate.host_merge library_launch_case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelcast.calibrate.host_merge import LIBRARY_CASE, library_launch_case


def main() -> int:
    probe_path, profile_path = Path(sys.argv[1]), Path(sys.argv[2])
    probe = json.loads(probe_path.read_text())
    profile = json.loads(profile_path.read_text())
    typical_bench = profile["host"]["python bench"]["median_us"]
    case = library_launch_case(probe, typical_bench, str(probe_path))
    profile["host"][LIBRARY_CASE] = case
    profile_path.write_text(json.dumps(profile, separators=(",", ":")) + "\n")
    print(f"{LIBRARY_CASE}: {case['probe_us']:.2f} us per work item on the probe host over {case['probe_rows']} rows, "
          f"{case['median_us']:.2f} us on the profile's typical host (speed ratio {case['speed_ratio']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
