"""Measured GPU work items per GEMM and convolution shape, looked up by the nearest measured shape.

cuBLAS and cuDNN pick kernels per shape: a split-K GEMM adds a reduce kernel, a cooperative one a workspace
memset; a cuDNN convolution may add layout transforms and memsets. The table comes from a device profile
(`kernelcast calibrate`). The nearest row is the one closest in log2 of the
sizes, among rows of the same dtype and layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# A different kernel size or stride is a different kind of convolution: weigh it above any size difference.
CONV_SHAPE_MISMATCH_PENALTY = 100.0


def log2_size(x: float) -> float:
    """log2 of a size, for distances between shapes (sizes below 1 count as 1)."""
    return math.log2(max(x, 1))


@dataclass(frozen=True)
class LaunchTable:
    gemm: tuple[tuple, ...]  # (dtype, a_transposed, b_transposed, bias, M, N, K, work_items)
    conv: tuple[tuple, ...]  # (pass, dtype, channels_last, c_in, c_out, kernel, stride, size, work_items)
    source: str = ""

    @staticmethod
    def from_profile(section: dict) -> "LaunchTable":
        return LaunchTable(tuple(tuple(r) for r in section.get("gemm", ())),
                           tuple(tuple(r) for r in section.get("conv", ())), section.get("source", ""))

    def gemm_items(self, dtype: str, a_t: bool, b_t: bool, bias: bool, m: int, n: int, k: int) -> int | None:
        def same(row, with_bias: bool) -> bool:
            return row[0] == dtype and row[1] == a_t and row[2] == b_t and (row[3] == bias or not with_bias)

        for with_bias in (True, False):
            rows = [r for r in self.gemm if same(r, with_bias)]
            if rows:
                here = (log2_size(m), log2_size(n), log2_size(k))
                best = min(rows, key=lambda r: math.dist((log2_size(r[4]), log2_size(r[5]), log2_size(r[6])), here))
                return int(best[7])
        return None

    def conv_items(self, backward: bool, dtype: str, channels_last: bool, c_in: int, c_out: int, kernel: int,
                   stride: int, size: int) -> int | None:
        kind = "conv_bwd" if backward else "conv_fwd"
        rows = [r for r in self.conv if r[0] == kind and r[1] == dtype and r[2] == channels_last]
        if not rows:
            return None

        def distance(r) -> float:
            shape = (r[5] != kernel) + (r[6] != stride)
            return (shape * CONV_SHAPE_MISMATCH_PENALTY + (log2_size(r[3]) - log2_size(c_in)) ** 2
                    + (log2_size(r[4]) - log2_size(c_out)) ** 2 + (log2_size(r[7]) - log2_size(size)) ** 2)

        return int(min(rows, key=distance)[8])
