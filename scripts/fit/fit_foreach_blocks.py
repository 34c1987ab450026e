"""One thread block's time per multi_tensor_apply chunk, from the device probe (scripts/device/probe_foreach.py), into the
profile's `timings.foreach_blocks` (predict/calibrated.py reads it).

    python3 scripts/fit/fit_foreach_blocks.py validation/probes/foreach_probe.json src/kernelcast/profiles/h200.json

The fit is kernelcast.calibrate.foreach_blocks.fit. Nothing here is fitted to a zoo workload.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelcast.calibrate.foreach_blocks import profile_section


def main() -> int:
    probe_path, profile_path = Path(sys.argv[1]), Path(sys.argv[2])
    probe = json.loads(probe_path.read_text())
    profile = json.loads(profile_path.read_text())
    section = profile_section(probe, str(probe_path))
    profile["timings"]["foreach_blocks"] = section
    profile_path.write_text(json.dumps(profile, separators=(",", ":")) + "\n")
    for l2 in ("cold", "warm"):
        line = section[l2]
        print(f"foreach_blocks, L2 {l2}: {line['launch_us']:.3f} us + {line['us_per_element'] * 1e6:.1f} ps per "
              f"element of the largest chunk ({line['points']} probe launches)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
