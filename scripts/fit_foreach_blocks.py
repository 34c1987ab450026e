"""One thread block's time per multi_tensor_apply chunk, from the device probe (scripts/probe_foreach.py), into the
profile's `timings.foreach_blocks` (predict/calibrated.py reads it).

    python3 scripts/fit_foreach_blocks.py validation/probes/foreach_probe.json src/kernelcast/profiles/h200.json

The fit uses the probe's single launches of at most MAX_CHUNKS chunks (every block runs at once, so the launch
lasts as long as one block): time = launch_us + elements per chunk x us_per_element, least squares over both
probed ops (in-place add, addcmul). Nothing here is fitted to a zoo workload.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CHUNK_ELEMENTS = 65536
MAX_CHUNKS = 32


def fit(rows: list[dict]) -> dict:
    points = [(min(r["elements"], CHUNK_ELEMENTS), r["gpu_us_median"]) for r in rows
              if r["launches"] == 1 and r["chunks"] <= MAX_CHUNKS]
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return {"launch_us": round(mean_y - slope * mean_x, 4), "us_per_element": slope, "points": n}


def main() -> int:
    probe_path, profile_path = Path(sys.argv[1]), Path(sys.argv[2])
    probe = json.loads(probe_path.read_text())
    profile = json.loads(profile_path.read_text())
    section = {**fit(probe["rows"]), "source": f"{probe_path} ({probe['command']}, {probe['date']})"}
    profile["timings"]["foreach_blocks"] = section
    profile_path.write_text(json.dumps(profile, separators=(",", ":")) + "\n")
    print(f"foreach_blocks: {section['launch_us']:.3f} us + {section['us_per_element'] * 1e6:.1f} ps per element "
          f"of the largest chunk ({section['points']} probe launches)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
