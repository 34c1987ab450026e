"""Dense linear algebra's kernel time from the profile's measured table.

The table (profile timings `linalg`, calibrate/profile.py): per aten op, [n, matrices, µs] rows, every call's
kernels summed, from torch.linalg's calls over n = 4-2048 and batches of 1, 16 and 256 fp32 matrices (H200,
validation/h200_norm_layout_linalg_raw.json.gz, section linalg_grid). On the H200 a 32x32 solve took 67 µs and
a 2048x2048 one 4.8 ms: small factorizations are chains of latency-bound panel kernels, so a FLOP roofline says
nothing about them. Another GPU is given the profiled GPU's times as they are (labelled scaled, unvalidated).
"""

from __future__ import annotations

import math

# Beyond the largest measured n, time grows as it did between the last two measured sizes, at least linearly and
# at most as a factorization's FLOPs do (n^3, LAPACK's counts): left out, the largest size of each batch was
# priced 42-134% off (median per op) by n^3 alone, small solves being far from their FLOPs
# (scripts/eval/linalg_holdout.py).
MIN_EXPONENT, FLOPS_EXPONENT = 1.0, 3.0


def _along_n(points: list[tuple[int, float]], n: int) -> float:
    """µs at n, linear in log n and log time between the measured sizes; the smallest size's time below them,
    the largest's scaled above by (n / n_max) to the last two sizes' log slope (between 1 and 3)."""
    if n <= points[0][0]:
        return points[0][1]
    if n >= points[-1][0]:
        exponent = FLOPS_EXPONENT
        if len(points) > 1:
            (n0, t0), (n1, t1) = points[-2], points[-1]
            exponent = min(max(math.log(t1 / t0) / math.log(n1 / n0), MIN_EXPONENT), FLOPS_EXPONENT)
        return points[-1][1] * (n / points[-1][0]) ** exponent
    for (n0, t0), (n1, t1) in zip(points, points[1:]):
        if n0 <= n <= n1:
            share = (math.log(n) - math.log(n0)) / (math.log(n1) - math.log(n0))
            return math.exp((1.0 - share) * math.log(t0) + share * math.log(t1))
    return points[-1][1]


def linalg_time_us(rows: list[list[float]], n: int, matrices: int) -> float | None:
    """µs of one call on `matrices` n x n matrices from its op's measured rows ([n, matrices, µs]).

    Along n at the measured batch sizes either side of `matrices` (_along_n), then linear in log batch and log
    time between them; fewer matrices than the smallest measured batch take its time, more than the largest
    take it scaled linearly by the count. None without rows."""
    by_batch: dict[int, list[tuple[int, float]]] = {}
    for row_n, row_batch, us in rows:
        by_batch.setdefault(int(row_batch), []).append((int(row_n), float(us)))
    if not by_batch or n <= 0 or matrices <= 0:
        return None
    for points in by_batch.values():
        points.sort()
    batches = sorted(by_batch)
    below = max((b for b in batches if b <= matrices), default=None)
    above = min((b for b in batches if b >= matrices), default=None)
    if below is None:
        return _along_n(by_batch[above], n)
    if above is None:
        return _along_n(by_batch[below], n) * matrices / below
    if below == above:
        return _along_n(by_batch[below], n)
    share = (math.log(matrices) - math.log(below)) / (math.log(above) - math.log(below))
    return math.exp((1.0 - share) * math.log(_along_n(by_batch[below], n))
                    + share * math.log(_along_n(by_batch[above], n)))
