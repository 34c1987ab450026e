"""One thread block's time per multi_tensor_apply chunk, fitted on the device probe scripts/device/probe_foreach.py (the
profile's `timings.foreach_blocks`, read by predict/calibrated.py).

The fit uses the probe's single launches of at most MAX_CHUNKS chunks (every block runs at once, so the launch
lasts as long as one block): time = launch_us + elements per chunk x us_per_element, least squares over both
probed ops (in-place add, addcmul), once for lists read from HBM (L2 flushed before each launch: "cold") and
once for lists already in L2 ("warm"); a block waits on memory latency, so the two differ by about 2x.
"""

from __future__ import annotations

import statistics

from kernelcast.records import DTYPE_BYTES

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


# The lists each op of scripts/device/probe_foreach_stream.py streams, distinct reads plus the write (addcmul_ reads its
# gradient list twice: once from memory); lists of at least STREAM_MIN_BYTES, where launches are full and the rate
# is flat.
STREAM_LISTS = {"_foreach_mul_": 2, "_foreach_div_": 2, "_foreach_add_": 2, "_foreach_sqrt": 2,
                "_foreach_lerp_": 3, "_foreach_addcmul_": 3, "_foreach_addcdiv_": 4}
STREAM_MIN_BYTES = 1 << 30


def stream_section(probe: dict, probe_path: str) -> dict:
    """The profile's `timings.foreach_stream`: bytes per µs multi_tensor_apply streams over optimizer-sized
    lists, by item size and then by the lists an op streams (the median over the probe's ops on lists of
    STREAM_MIN_BYTES or more). On the H200 (torch 2.11): bf16 about 2.8 TB/s over 2 lists, 3.4 over 3, 3.6 over 4;
    fp32 3.4, 3.8, 3.9; the pointwise curve streams 4.2."""
    rates: dict[str, dict[str, list[float]]] = {}
    for row in probe["rows"]:
        lists = STREAM_LISTS.get(row["op"])
        if lists and row["list_bytes"] >= STREAM_MIN_BYTES:
            by_lists = rates.setdefault(str(DTYPE_BYTES[row["dtype"]]), {})
            by_lists.setdefault(str(lists), []).append(lists * row["list_bytes"] / (row["ms"] * 1e3))
    return {"bytes_per_us": {size: {n: round(statistics.median(v), 1) for n, v in sorted(by.items())}
                             for size, by in sorted(rates.items())},
            "source": f"{probe_path} ({probe['command']}, {probe['date']})"}
