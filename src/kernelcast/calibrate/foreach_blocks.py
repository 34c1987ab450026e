"""One thread block's time per multi_tensor_apply chunk, fitted on the device probe scripts/probe_foreach.py (the
profile's `timings.foreach_blocks`, read by predict/calibrated.py).

The fit uses the probe's single launches of at most MAX_CHUNKS chunks (every block runs at once, so the launch
lasts as long as one block): time = launch_us + elements per chunk x us_per_element, least squares over both
probed ops (in-place add, addcmul), once for lists read from HBM (L2 flushed before each launch: "cold") and
once for lists already in L2 ("warm"); a block waits on memory latency, so the two differ by about 2x.
"""

from __future__ import annotations

CHUNK_ELEMENTS = 65536
MAX_CHUNKS = 32


def fit(rows: list[dict]) -> dict:
    """{"cold": line, "warm": line}: the lists read from HBM (L2 flushed before each launch) and from L2."""
    return {l2: fit_line([r for r in rows if r.get("l2", "warm") == l2]) for l2 in ("cold", "warm")}


def fit_line(rows: list[dict]) -> dict:
    points = [(min(r["elements"], CHUNK_ELEMENTS), r["gpu_us_median"]) for r in rows
              if r["launches"] == 1 and r["chunks"] <= MAX_CHUNKS]
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return {"launch_us": round(mean_y - slope * mean_x, 4), "us_per_element": slope, "points": n}


def profile_section(probe: dict, probe_path: str) -> dict:
    """The profile's `timings.foreach_blocks`: the fit of a probe run, with where it came from."""
    return {**fit(probe["rows"]), "source": f"{probe_path} ({probe['command']}, {probe['date']})"}
