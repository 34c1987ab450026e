"""Per-element arithmetic rates of the pointwise ops that their math can bound (the profile's `arithmetic_caps`).

Read off scripts/device/probe_pointwise_math.py's run (validation/probes/pointwise_math_probe.json): each op at its
largest size in bf16 and fp16, where 4 bytes move per element and an op with enough math per element runs
below the streaming rate; the cap is its elements per second there (the median of the two dtypes). The math
is done in fp32 whatever the storage dtype, so the cap holds for every dtype; in fp32 (8 bytes per element)
memory binds first. An op within STREAMING_SHARE of the fastest op's rate is left out: it streams.
"""

from __future__ import annotations

import statistics

LOW_PRECISION = ("bfloat16", "float16")
STREAMING_SHARE = 0.95


def arithmetic_caps(probe: dict, source: str) -> dict:
    """{"g_elements_per_s": {op: rate}, "source": ...} from the probe's rows (op, dtype, elements, us)."""
    largest = max(r["elements"] for r in probe["rows"])
    rates: dict[str, list[float]] = {}
    for r in probe["rows"]:
        if r["elements"] == largest and r["dtype"] in LOW_PRECISION:
            rates.setdefault(r["op"], []).append(r["elements"] / r["us"] / 1e3)
    rate = {op: statistics.median(v) for op, v in rates.items()}
    fastest = max(rate.values())
    caps = {op: round(v, 1) for op, v in sorted(rate.items()) if v < STREAMING_SHARE * fastest}
    return {"g_elements_per_s": caps, "elements": largest,
            "source": f"{source}: {probe['meta']['command']} ({probe['meta']['device']}, torch {probe['meta']['torch']})"}
