"""Kernel time of compute-bound ops (GEMM, convolution, attention) interpolated over a calibrated shape sweep.

time = prior(op) x correction, where the prior is the roofline of the profiled GPU, max(FLOPs / peak, bytes /
bandwidth) + the measured floor, and the correction (measured time over the prior) is interpolated in log space
from the nearest measured shapes of the same kind of kernel: an inverse-distance-weighted mean of the log
corrections of the NEAREST points, distance in log2 of the sizes. Interpolating the correction rather than the
achieved FLOP/s keeps the roofline's regimes (memory-bound at small M, compute-bound at large) out of what has to
be interpolated: on the H200 sweep, held out by region of the shape space (blocks of 3 octaves in M, N and K),
the median GEMM error fell from 27.6% (nearest achieved FLOP/s) to 10.1% (scripts/eval/shape_model_eval.py prints the
current figures).

Every estimate says where it came from (SOURCES) and how sure it is: the relative uncertainty is the weighted
spread of the neighbours' corrections plus UNCERTAINTY_PER_OCTAVE for each octave to the nearest one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

NEAREST = 4
# Within this distance (log2 units) of a measured shape the estimate is "measured-near".
NEAR_OCTAVES = 0.35
# Relative uncertainty added per octave of distance to the nearest measured shape (a modelling assumption; the
# held-out-by-region evaluation in scripts/eval/shape_model_eval.py reports how well it covers the real errors).
UNCERTAINTY_PER_OCTAVE = 0.10
SOURCES = ("measured-near", "interpolated", "extrapolated", "datasheet")


@dataclass(frozen=True)
class ShapePoint:
    coords: tuple[float, ...]  # log2 sizes
    kind: tuple  # what must match to be the same kind of kernel (compared with a penalty, not filtered)
    log_correction: float  # log(measured time / prior)


@dataclass(frozen=True)
class ShapeEstimate:
    correction: float
    source: str
    uncertainty: float  # relative (0.1 = +-10%)


KIND_MISMATCH_PENALTY = 100.0  # a different kind of kernel counts as farther than any size difference


class ShapeTable:
    """Measured points of one class (e.g. bf16 GEMMs with B transposed and 16-byte-aligned leading dims)."""

    def __init__(self, points: Sequence[ShapePoint]) -> None:
        self.points = tuple(points)
        dims = len(self.points[0].coords) if self.points else 0
        self._low = tuple(min(p.coords[i] for p in self.points) for i in range(dims))
        self._high = tuple(max(p.coords[i] for p in self.points) for i in range(dims))

    def estimate(self, coords: tuple[float, ...], kind: tuple = ()) -> ShapeEstimate:
        scored = sorted((math.dist(p.coords, coords) + KIND_MISMATCH_PENALTY * sum(a != b for a, b in zip(p.kind, kind)),
                         p.log_correction) for p in self.points)[:NEAREST]
        nearest = scored[0][0]
        exact = [v for d, v in scored if d == 0.0]
        if exact:
            log_c, spread = sum(exact) / len(exact), _spread([(1.0, v) for v in exact])
        else:
            weighted = [(1.0 / d, v) for d, v in scored]
            log_c = sum(w * v for w, v in weighted) / sum(w for w, _ in weighted)
            spread = _spread(weighted)
        if nearest <= NEAR_OCTAVES:
            source = "measured-near"
        elif all(lo <= c <= hi for lo, c, hi in zip(self._low, coords, self._high)) and nearest < KIND_MISMATCH_PENALTY:
            source = "interpolated"
        else:
            source = "extrapolated"
        distance = nearest % KIND_MISMATCH_PENALTY
        return ShapeEstimate(math.exp(log_c), source, round(spread + UNCERTAINTY_PER_OCTAVE * distance, 3))


def _spread(weighted: list[tuple[float, float]]) -> float:
    """Weighted standard deviation of log corrections, as a relative spread."""
    total = sum(w for w, _ in weighted)
    mean = sum(w * v for w, v in weighted) / total
    return math.sqrt(sum(w * (v - mean) ** 2 for w, v in weighted) / total)


def build_tables(rows: Sequence[tuple], group_of: Callable[[tuple], tuple], point_of: Callable[[tuple], ShapePoint]
                 ) -> dict[tuple, ShapeTable]:
    """Rows of a profile section -> one table per group."""
    grouped: dict[tuple, list[ShapePoint]] = {}
    for row in rows:
        point = point_of(row)
        if point is not None:
            grouped.setdefault(group_of(row), []).append(point)
    return {group: ShapeTable(points) for group, points in grouped.items()}
