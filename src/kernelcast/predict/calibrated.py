"""Calibrated kernel model: kernel times looked up in a device profile measured with `kernelcast calibrate`.

- GEMM, convolution, attention: the achieved FLOP/s of the nearest measured shapes (inverse-distance weighting
  of log FLOP/s over the K nearest, distance in log2 of the sizes), times the op's FLOPs.
- Memory-bound classes (pointwise, copy, reduction, norm, softmax, loss, fill, foreach, ...): time against bytes
  moved, interpolated log-log between the class's measured sizes; each GPU work item beyond those the
  measurement had adds the measured per-item floor.
- An op the profile has nothing for falls back to the datasheet roofline, and says so in its roof.

On a GPU other than the profiled one, times carry over by datasheet ratios (compute-bound: peak FLOP/s of the
roof; memory-bound: bandwidth), and the prediction is labelled unvalidated.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from kernelcast.costs import Cost
from kernelcast.costs.common import TRANSFER_KINDS
from kernelcast.costs.launch_table import same_alignment
from kernelcast.costs.launch_table import log2_size as _log2
from kernelcast.devices import GPU
from kernelcast.records import CaptureSettings

from .kernel_model import NO_KERNEL, KernelEstimate, RooflineModel

NEAREST = 4  # shapes blended per lookup
COMPUTE_KINDS = {"gemm", "conv", "attention", ""}  # looked up by shape; without a shape: the datasheet
SHAPE_MISMATCH_PENALTY = 100.0  # a different conv kernel/stride or causal flag: a different kind of kernel
MIN_CURVE_POINTS = 2


def _interp(curve: list[tuple[float, float]], x: float) -> float:
    """Piecewise-linear y at x on points sorted by x, held flat beyond the ends."""
    xs = [cx for cx, _ in curve]
    if x <= xs[0]:
        return curve[0][1]
    if x >= xs[-1]:
        return curve[-1][1]
    i = bisect.bisect_left(xs, x)
    (x0, y0), (x1, y1) = curve[i - 1], curve[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _rate_on_curve(curve: list, nbytes: float) -> float:
    """Bytes/s at this size: log-linear between measured sizes, flat beyond them."""
    return math.exp(_interp([(_log2(size), math.log(rate)) for size, rate in curve], _log2(nbytes)))


# Fused attention kernels walk queries and keys in tiles of this many rows on sm90 (FlashAttention-3, Shah et
# al. 2024, section 3: 128-row blocks for head dims 64-128; cuDNN's fused kernels likewise): a sequence
# length that is not a multiple computes its last tile in full.
ATTENTION_TILE = 128


def _padded(length: int) -> int:
    return -(-length // ATTENTION_TILE) * ATTENTION_TILE


def _tile_waste(sq: int, sk: int) -> float:
    """(query, key) pairs the tiles compute over the pairs the op needs (1 for multiples of the tile)."""
    return _padded(sq) * _padded(sk) / (sq * sk)


# Attention shapes are compared by the work the tiles do (batch x heads x padded query x padded key rows), the
# query length at half weight, and the head dim. Left-one-out over the calibration's attention points
# (scripts/loo_calibration.py): median error 15.5% (lengths that are multiples of the tile) and 12.5% (odd
# lengths); comparing batch x heads, query, key and head dim one by one gave 18%, and 20% on odd lengths
# without the padding.
ATTENTION_QUERY_WEIGHT = 0.5


def _attention_point(bh: int, sq: int, sk: int, d: int) -> tuple[float, float, float]:
    return (_log2(bh * _padded(sq) * _padded(sk)), ATTENTION_QUERY_WEIGHT * _log2(_padded(sq)), _log2(d))


def _blend(candidates: list[tuple[float, float]]) -> float:
    """Inverse-distance-weighted mean of log values: [(distance, log value)] -> value."""
    candidates = sorted(candidates)[:NEAREST]
    exact = [v for d, v in candidates if d == 0.0]
    if exact:  # measured at exactly this shape (maybe more than once): their mean
        return math.exp(sum(exact) / len(exact))
    weights = [1.0 / d for d, _ in candidates]
    return math.exp(sum(w * v for w, (_, v) in zip(weights, candidates)) / sum(weights))


# Memory-bound lookups: distance in log2 of bytes moved and item size; for kernels that work row by row
# (norms, softmax, losses, reductions) the row length (innermost dim) counts too, at a lower weight.
INNER_DIM_WEIGHT = 0.5
ITEMSIZE_WEIGHT = 1.0
ROW_KINDS = {"norm", "norm_backward", "softmax", "softmax_backward", "loss", "reduction", "reduction_outer"}
# Row-wise kernels that pick their implementation by row length (softmax: a warp per row up to 2048 elements,
# then a block per row; norms likewise): looked up along the size curve of rows within this many octaves of
# the op's row length. Left-one-out over the calibration points, median error: norm 16% -> 11%, norm
# backward 16% -> 13%, softmax 10% -> 9%; reductions did better with the blend and keep it.
ROW_REGIME_KINDS = {"norm", "norm_backward", "softmax", "softmax_backward", "loss"}
ROW_LENGTH_OCTAVES = 1.0
# Kernels that stream their inputs once, as the add whose warm/cold ratio calibration measures; row-wise and
# reduction kernels did not show that gain in the suite's first run, so they keep the cold rate.
L2_STREAMING_KINDS = {"pointwise", "pointwise_cast", "pointwise_strided", "copy", "copy_cast", "fill"}
# Where a kind has no measurements of its own, the kinds that stand in for it, in order.
MEMORY_FALLBACK = {
    "pointwise_transpose": ("copy_transpose", "pointwise"), "copy_transpose": ("copy",),
    "pointwise_cast": ("copy_cast", "pointwise"), "copy_cast": ("copy",), "pointwise_strided": ("pointwise",),
    "reduction_outer": ("reduction",), "softmax_backward": ("softmax", "pointwise"),
    "batch_norm_backward": ("batch_norm", "norm_backward"), "memcpy": ("fill",), "fill": ("pointwise",),
    "batch_norm_channels_last": ("batch_norm",), "batch_norm_backward_channels_last": ("batch_norm_backward",),
}


def _along_bytes(points: list["_MemoryPoint"], log_bytes: float, log_itemsize: float) -> float:
    """Log rate at this size, interpolated linearly in log bytes along the class's measured curve (points of
    the same item size when there are any; points at one size averaged), and held flat beyond its ends.

    For streaming kinds, whose rate depends on size alone, this beats blending the nearest points: over the
    calibration's own points, left out one at a time, the median error fell from 15% to 10% (pointwise),
    45% to 8% (copy_cast) and 28% to 3% (pointwise_cast) on the profile of the day
    (scripts/loo_calibration.py prints the current figures). Reductions keep the blend, which did better."""
    same = [p for p in points if p.log_itemsize == log_itemsize] or points
    by_size: dict[float, list[float]] = {}
    for p in same:
        by_size.setdefault(p.log_bytes, []).append(p.log_rate)
    return _interp(sorted((x, sum(ys) / len(ys)) for x, ys in by_size.items()), log_bytes)


@dataclass(frozen=True)
class _MemoryPoint:
    log_bytes: float
    log_inner: float
    log_itemsize: float
    log_rate: float  # log of bytes per µs of the main kernel (extra work items taken out)


def _memory_points(points: list, floor_us: float) -> list[_MemoryPoint]:
    out = []
    for nbytes, items, time_us, inner, itemsize in points:
        single = max(time_us - (items - 1) * floor_us, floor_us)
        if nbytes > 0:
            out.append(_MemoryPoint(_log2(nbytes), _log2(inner), _log2(itemsize), math.log(nbytes / single)))
    return out


@dataclass
class CalibratedModel:
    gpu: GPU
    settings: CaptureSettings
    profile: dict
    profiled_gpu: GPU
    source: str = ""
    _memory: dict = field(default_factory=dict)
    _gemm_rates: dict = field(default_factory=dict)  # by key: a step repeats its few GEMM shapes many times

    def __post_init__(self) -> None:
        timings = self.profile["timings"]
        self.floor_us = float(timings["work_item_floor_us"])
        self._fallback = RooflineModel(self.gpu, self.settings)
        self._profiled_roofline = RooflineModel(self.profiled_gpu, self.settings)
        for kind, points in timings["memory"].items():
            parsed = _memory_points(points, self.floor_us)
            if len(parsed) >= MIN_CURVE_POINTS:
                self._memory[kind] = parsed
        self.transferred = self.gpu.id != self.profiled_gpu.id
        torch_version = self.profile["torch"].split("+")[0]
        if self.transferred:
            self.source = (f"calibrated on {self.profile['gpu']} (torch {torch_version}), scaled to this GPU by "
                           "datasheet ratios: unvalidated")
        else:
            self.source = f"calibrated ({self.profile['gpu']} profile, torch {torch_version}, {self.profile['date']})"

    # -- lookups on the profiled GPU ----------------------------------------------------------------------
    def _gemm_flops_per_us(self, key: tuple) -> float | None:
        if key not in self._gemm_rates:
            self._gemm_rates[key] = self._lookup_gemm_flops_per_us(key)
        return self._gemm_rates[key]

    def _lookup_gemm_flops_per_us(self, key: tuple) -> float | None:
        dtype, a_t, b_t, bias, m, n, k = key
        if dtype == "float32" and self.settings.matmul_allow_tf32:
            dtype = "tf32"
        rows = [r for r in self.profile["timings"]["gemm"] if r[0] == dtype]
        # the same alignment first (a different kernel family otherwise), then the same layout
        rows = same_alignment(rows, (dtype, a_t, b_t, bias, m, n, k))
        same_layout = [r for r in rows if (r[1], r[2], r[3]) == (a_t, b_t, bias)] or \
            [r for r in rows if (r[1], r[2]) == (a_t, b_t)] or rows
        if not same_layout:
            return None
        return _blend([(math.dist((_log2(r[4]), _log2(r[5]), _log2(r[6])), (_log2(m), _log2(n), _log2(k))),
                        math.log(r[-1] / r[-2])) for r in same_layout])

    def _conv_flops_per_us(self, cost: Cost) -> float | None:
        kind, dtype, cl, c_in, c_out, kernel, stride, size = cost.key
        rows = [r for r in self.profile["timings"]["conv"] if r[0] == kind and r[1] == dtype and r[2] == cl]
        if not rows:
            return None
        scored = []
        for r in rows:
            penalty = SHAPE_MISMATCH_PENALTY * ((r[5] != kernel) + (r[6] != stride))
            distance = penalty + math.dist((_log2(r[3]), _log2(r[4]), _log2(r[7])),
                                           (_log2(c_in), _log2(c_out), _log2(size)))
            scored.append((distance, math.log(r[-1] / r[-2])))
        return _blend(scored)

    def _attention_flops_per_us(self, cost: Cost) -> float | None:
        """FLOP/s of the nearest measured shapes, counted over sequence lengths padded to the kernels' tiles,
        then scaled back to this op's unpadded FLOPs (a 197-token sequence costs two 128-row tiles)."""
        backend, pass_, bh, sq, sk, d, causal, dropout, mask = cost.key
        rows = [r for r in self.profile["timings"]["attention"] if r[0] == backend and r[1] == pass_]
        if not rows:
            return None
        scored = []
        here = _attention_point(bh, sq, sk, d)
        for r in rows:
            has_mask = r[8] if len(r) > 11 else False  # profiles before masks were measured: no mask
            distance = SHAPE_MISMATCH_PENALTY * ((r[6] != causal) + (r[7] != dropout) + (has_mask != mask)) + math.dist(
                _attention_point(r[2], r[3], r[4], r[5]), here)
            scored.append((distance, math.log(r[-1] * _tile_waste(r[3], r[4]) / r[-2])))
        return _blend(scored) / _tile_waste(sq, sk)

    def _memory_time_us(self, cost: Cost) -> float | None:
        """Bytes over the achieved rate of the nearest measured sizes of this kind of kernel."""
        points = next((self._memory[k] for k in (cost.kind, *MEMORY_FALLBACK.get(cost.kind, ()), "pointwise")
                       if k in self._memory), None)
        if points is None or cost.bytes <= 0:
            return None
        inner, itemsize = cost.key if len(cost.key) == 2 else (1, 4)
        if cost.kind in ROW_REGIME_KINDS:  # the kernel changes with row length: rows of about this length
            near = [p for p in points if abs(p.log_inner - _log2(inner)) <= ROW_LENGTH_OCTAVES]
            rate = math.exp(_along_bytes(near if len(near) >= MIN_CURVE_POINTS else points, _log2(cost.bytes),
                                         _log2(itemsize)))
        elif cost.kind in ROW_KINDS:
            here = (_log2(cost.bytes), INNER_DIM_WEIGHT * _log2(inner), ITEMSIZE_WEIGHT * _log2(itemsize))
            rate = _blend([(math.dist((p.log_bytes, INNER_DIM_WEIGHT * p.log_inner,
                                       ITEMSIZE_WEIGHT * p.log_itemsize), here), p.log_rate) for p in points])
        else:
            rate = math.exp(_along_bytes(points, _log2(cost.bytes), _log2(itemsize)))
        return max(cost.bytes / rate, self.floor_us) + (cost.kernels - 1) * self.floor_us

    # -- the model -----------------------------------------------------------------------------------------
    def l2_speedup(self, nbytes: float) -> float:
        """How much faster a memory-bound kernel of this size runs with its inputs in L2 (1 beyond L2)."""
        table = self.profile["timings"].get("l2_speedup") or []
        if not table or nbytes <= 0:
            return 1.0
        return _interp([(_log2(b), speedup) for b, speedup in table], _log2(nbytes))

    def estimate(self, cost: Cost, l2_warm: float = 0.0) -> KernelEstimate:
        if cost.kernels == 0:
            return NO_KERNEL
        roofline = self._fallback.estimate(cost)
        time_us = None
        if cost.kind in TRANSFER_KINDS:
            copies = self.profile.get("host", {}).get("copies", {})
            curve = copies.get(f"{cost.kind}_curve")
            rate = _rate_on_curve(curve, cost.bytes) if curve else copies.get(f"{cost.kind}_bytes_per_s")
            if not rate or self.transferred:  # another machine's host link says little about this one's
                return roofline
            link_us = cost.bytes / rate * 1e6
            return KernelEstimate(max(link_us, self.floor_us), "host link", "measured host link", 0.0, link_us)
        if cost.kind == "gemm" and cost.key:
            rate = self._gemm_flops_per_us(cost.key)
            time_us = cost.flops / rate * self._compute_ratio(cost) if rate else None
        elif cost.kind == "conv" and cost.key:
            rate = self._conv_flops_per_us(cost)
            time_us = cost.flops / rate * self._compute_ratio(cost) if rate else None
        elif cost.kind == "attention" and cost.key:
            rate = self._attention_flops_per_us(cost)
            time_us = cost.flops / rate * self._compute_ratio(cost) if rate else None
        elif cost.kind not in COMPUTE_KINDS:
            t = self._memory_time_us(cost)
            if t is not None:
                if l2_warm > 0 and cost.kind in L2_STREAMING_KINDS and cost.bytes:
                    # measured cold; the warm share of the bytes read comes at the L2-resident speed
                    warm = l2_warm * cost.bytes_read / cost.bytes
                    t = t * (1.0 - warm + warm / self.l2_speedup(cost.bytes))
                time_us = self.floor_us + (t - self.floor_us) * self._bandwidth_ratio() if self.transferred else t
        if time_us is None:
            return KernelEstimate(roofline.time_us, roofline.bound, f"datasheet:{roofline.roof}",
                                  roofline.compute_us, roofline.memory_us)
        time_us = max(time_us, cost.kernels * self.floor_us)
        if time_us <= cost.kernels * self.floor_us * 1.05:
            bound = "latency"
        else:
            bound = "compute" if roofline.compute_us >= roofline.memory_us else "memory"
        return KernelEstimate(time_us, bound, roofline.roof, roofline.compute_us, roofline.memory_us)

    def _compute_ratio(self, cost: Cost) -> float:
        """Profiled GPU's peak over this GPU's, for the op's roof (1 on the profiled GPU)."""
        if not self.transferred:
            return 1.0
        return self._profiled_roofline.peak(cost)[0] / self._fallback.peak(cost)[0]

    def _bandwidth_ratio(self) -> float:
        return self.profiled_gpu.mem_bw_bytes_per_s / self.gpu.mem_bw_bytes_per_s
