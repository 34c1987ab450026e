"""Softmax over a dim that is not the last, timed by its launch geometry (the profile's `timings.spatial_softmax`,
read by predict/calibrated.py for costs keyed costs.elementwise.SPATIAL_SOFTMAX_KEY; the geometry and why:
predict/spatial_softmax_time.py).

Fitted per pass (forward: softmax and log_softmax; backward) on calibrate's channel_grid cases (dims 3-1024 over
16-65536 inner positions, 1 M-128 M elements, fp32 and bf16), the serial visits computed for the profiled GPU's
SMs and compute capability; a non-negative least-squares fit on relative error, with its leave-one-out error
beside it (window_rates.fit_one). On the H200 (validation/h200_channel_grid_raw.json.gz) the forward's
leave-one-out median is 19% (26% before the L2 terms: predict/spatial_softmax_time.py FEATURES), the backward's 12%, where the byte curve of last-dim softmax had priced
KernelBench's softmax over dim 1 of 5-D maps at a third of measured.
"""

from __future__ import annotations

import math

from kernelcast.costs.elementwise import SPATIAL_SOFTMAX_KEY
from kernelcast.predict.spatial_softmax_time import FEATURES, spatial_features

from .window_rates import fit_one

MIN_POINTS = 10  # fewer cases than this for a pass: no fit (the softmax byte curves price it)


def is_spatial(cost) -> bool:
    return bool(cost.key) and cost.key[0] == SPATIAL_SOFTMAX_KEY


def fit(cases: list[tuple[object, float]], sm_count: int, capability: str, l2_bytes: float) -> dict:
    """{pass: fit} from (Cost, measured µs) pairs of cases that ran one spatial softmax and nothing else, on a GPU
    of sm_count SMs, this compute capability and l2_bytes of L2; a pass with fewer than MIN_POINTS cases is left
    out. Needs scipy (absent: {})."""
    try:
        import scipy  # noqa: F401
    except ImportError:
        return {}
    by_pass: dict[str, list] = {}
    for cost, time_us in cases:
        _, pass_, outer, dim, inner, _, itemsize = cost.key
        if time_us > 0 and math.isfinite(time_us):
            features = spatial_features(outer, dim, inner, cost.bytes, itemsize, sm_count, capability, l2_bytes)
            by_pass.setdefault(pass_, []).append(([features[name] for name in FEATURES], time_us))
    return {pass_: fit_one(points, FEATURES) for pass_, points in sorted(by_pass.items())
            if len(points) >= MIN_POINTS}
