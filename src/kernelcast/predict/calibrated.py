"""Calibrated kernel model: kernel times looked up in a device profile measured with `kernelcast calibrate`.

- GEMM, convolution, attention: the profiled GPU's roofline for the op's shape times a correction: the nearest
  measured shapes' where one is within NEAR_OCTAVES (shape_model.py), else a tree regressor's fitted over the
  whole designed sweep where the profile has one (calibrate/time_model.py), else interpolated from the nearest
  shapes; with the source of the estimate (measured-near / fitted / interpolated / extrapolated / datasheet) and
  its uncertainty.
- cuDNN RNN calls: their launches as parts (costs/rnn.py), the GEMMs through the GEMM tables and the per-step
  and persistent kernels by the fit of the profile's `rnn` section (predict/rnn_time.py).
- Memory-bound classes (pointwise, copy, reduction, norm, softmax, loss, fill, foreach, ...): time against bytes
  moved, interpolated log-log between the class's measured sizes; each GPU work item beyond those the
  measurement had adds the measured per-item floor.
- An op the profile has nothing for falls back to the datasheet roofline, and says so in its roof.
Each kind of model is one TimeModel of KERNEL_TIME_MODELS (the end of this file), asked in order.

On a GPU other than the profiled one, a kernel's profiled time carries over part by part, as the roofline
splits it: the part its FLOPs at the peak of its roof or its bytes at the streaming rate explain by the two
datasheets' peaks or bandwidths, the time beyond that (few blocks, a serial walk, a library kernel far from the
roof) by SMs x clock; then times the GPU's achieved-rate factor for the kernel's class (devices/achieved.py),
fitted to KernelBench timings where there are any. The label says where the factors come from.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

from kernelcast.costs import Cost
from kernelcast.costs.common import INTO_SUFFIX, TRANSFER_KINDS, is_blocks_key
from kernelcast.costs.elementwise import ARITHMETIC_KIND, INDEX_SUFFIX, base_kind, factor_key
from kernelcast.costs.embedding import EMBEDDING_BAG_KEY
from kernelcast.costs.gather import ELEMENTS_KEY, ROWS_KEY, SMALL_INDEX_ADD_KEY, SMALL_INDEX_KEY
from kernelcast.costs.generated import GENERATED_ATOMICS_KEY, atomics_time_us
from kernelcast.costs.indexing import ATOMICS_KEY
from kernelcast.costs.pooling import WINDOW_KEY
from kernelcast.costs.elementwise import SPATIAL_SOFTMAX_KEY
from kernelcast.costs.matmul import kernel_family
from kernelcast.costs.foreach import CHUNK_ELEMENTS
from kernelcast.costs.linalg import SOLVER_KEY
from kernelcast.costs.launch_table import log2_size as _log2
from kernelcast.costs.losses import NLL_WALK_KEY
from kernelcast.costs.rnn import RnnPart, part_from_key
from kernelcast.costs.sparse import COALESCE_KEY, SPMM_KEY, SPMM_PARTITION_KEY
from kernelcast.costs.tree_model import TreeRegressor
from kernelcast.devices import GPU
from kernelcast.devices.achieved import BLOCKS, DATASHEET, MEMORY, AchievedRates, achieved_rates, rate_class
from kernelcast.records import DTYPE_BYTES, CaptureSettings

from .kernel_model import NO_KERNEL, KernelEstimate, RooflineModel, combined
from .linalg_time import linalg_time_us
from .rnn_time import bias_grad_time_us, persist_time_us, step_time_us
from .shape_kinds import (KEY_LENGTH, SHAPE_FEATURES, SHAPE_GROUPS, SHAPE_POINTS, SHAPE_WORK, dtype_itemsize,
                          fitted_fallback, fitted_name)
from .shape_model import ShapeEstimate, ShapePoint, ShapeTable, build_tables
from .sparse_time import (SPMM_FLOOR_US, SPMM_PARTITION_FLOOR_US, coalesce_us, embedding_bag_bytes, embedding_bag_us,
                          spmm_partition_us, spmm_product_us)
from .window_time import window_us
from .spatial_softmax_time import spatial_features, spatial_softmax_us

NEAREST = 4  # shapes blended per lookup
COMPUTE_KINDS = {"gemm", "conv", "attention", "grouped_gemm", ""}  # looked up by shape; without a shape: the datasheet
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



def _blend(candidates: list[tuple[float, float]]) -> float:
    """Inverse-distance-weighted mean of log values: [(distance, log value)] -> value."""
    candidates = sorted(candidates)[:NEAREST]
    exact = [v for d, v in candidates if d == 0.0]
    if exact:  # measured at exactly this shape (maybe more than once): their mean
        return math.exp(sum(exact) / len(exact))
    weights = [1.0 / d for d, _ in candidates]
    return math.exp(sum(w * v for w, (_, v) in zip(weights, candidates)) / sum(weights))


SOURCE_ORDER = ("measured-near", "fitted", "interpolated", "extrapolated", "datasheet")
# Relative uncertainty of a memory-bound kernel read off its class's size curve: the calibration's own
# left-one-out median error for these classes was 3-16% (scripts/eval/loo_calibration.py); the datasheet's is
# unknown, so wide.
MEMORY_CURVE_UNCERTAINTY = 0.15
# A cuDNN RNN call priced by the probe fit (predict/rnn_time.py): the fit's own median error on the probe's rows
# was 2-3% a pass, the zoo's held-out RNN workloads within about 10-20% (scripts/fit/fit_rnn_times.py, docs).
RNN_FIT_UNCERTAINTY = 0.15
DATASHEET_UNCERTAINTY = 0.5
# A kernel within this share of its launch floor is latency-bound: its work is too small to show a roof.
LATENCY_BOUND_MARGIN = 1.05
# An Inductor-generated kernel timed by its class's launch floor and bandwidth fitted to the grid of compiled
# microbenchmarks: on the H200's compiled zoo (none of it fitted on) per-kernel median error was 23-31% by class,
# the summed generated time per workload 20% (scripts/eval/triton_rates_eval.py).
GENERATED_FIT_UNCERTAINTY = 0.3
# A multi_tensor_apply launch's bytes are read off the pointwise curve's 4-byte points (optimizer state is fp32
# in the zoo's steps; the foreach cost key carries chunking, not an item size).
FOREACH_CURVE_ITEMSIZE = 4
GENERATED_FIT_NOTE = ("Inductor's Triton kernels are timed from Inductor's own byte counts by a launch floor and a "
                      "sustained bandwidth per kernel class (pointwise, reduction, persistent reduction) and kernels "
                      "that add atomically by their atomics, fitted to the {gpu}'s compiled microbenchmarks (on its "
                      "compiled zoo steps: 23-31% median error per kernel, 20% per step's generated kernels summed); "
                      "foreach kernels at the eager foreach rate and templates by their FLOPs, stand-ins")
# How a transferred model's source reads, by where the GPU's achieved-rate factors come from.
ACHIEVED_LABEL = {"fitted": "datasheet ratios and this GPU's rates fitted to {timings}",
                  "prior": "datasheet ratios and its architecture's rates fitted to {timings}",
                  "datasheet": "datasheet ratios: unvalidated"}


# The share of a foreach op's input bytes the L2 tracker must hold for its blocks to run at the L2-resident line:
# all of them, short of rounding (calibrated.py _foreach_time_us says why).
FOREACH_ALL_WARM = 0.999


def _walk_line_us(line: dict, units: float, l2_warm: float) -> float:
    """A unit-rate line's time (calibrate/unit_rates.py: floor_us + us_per_unit x units), moved toward its
    L2-resident line ("l2_resident", where measured) by the share of the input still in L2."""
    time_us = line["floor_us"] + line["us_per_unit"] * units
    warm = line.get("l2_resident")
    if warm and l2_warm > 0:
        time_us += (warm["floor_us"] + warm["us_per_unit"] * units - time_us) * l2_warm
    return time_us


def _curve_key(key: tuple) -> tuple[int, int]:
    """(innermost dim, item size) by which a byte curve is read: a memory key itself, a pooling window key's or a
    spatial softmax key's last two (costs/pooling.py window_key, costs/elementwise.py spatial_softmax_key), else
    (1, 4)."""
    if key[:1] in ((WINDOW_KEY,), (SPATIAL_SOFTMAX_KEY,)):
        return key[-2], key[-1]
    return key if len(key) == 2 else (1, 4)


def _row_blocks(cost: Cost) -> int | None:
    """The thread blocks of a row-wise kernel read off a width curve (a layer or RMS norm's block per row, group
    norm's per group): its output's elements over the row width; None for other kinds."""
    if cost.kind not in WIDTH_CURVE_KINDS or len(cost.key) != 2 or not cost.key[0] or not cost.bytes_written:
        return None
    width, itemsize = cost.key
    return max(1, round(cost.bytes_written / (width * itemsize)))



# Keys of ops priced by a count of units as well as their bytes (calibrate/unit_rates.py, costs/gather.py ROWS_KEY,
# costs/indexing.py ATOMICS_KEY)
UNIT_KEYS = ((ROWS_KEY,), (ATOMICS_KEY,), (ELEMENTS_KEY,), (SMALL_INDEX_KEY,), (SMALL_INDEX_ADD_KEY,))
# The profile's unit_rates section of each small-index kernel's lines (calibrate/unit_rates.py)
SMALL_INDEX_SECTIONS = {SMALL_INDEX_KEY: "small_index", SMALL_INDEX_ADD_KEY: "small_index_add"}
# Keys of the sparse-gradient kernels with fits of their own (costs/sparse.py, costs/embedding.py): the profile's
# `timings.sparse` section that prices each.
SPARSE_SECTIONS = {COALESCE_KEY: "coalesce", EMBEDDING_BAG_KEY: "embedding_bag"}
SPARSE_KEYS = tuple((k,) for k in SPARSE_SECTIONS)
# Kernels whose time follows a block's serial walk and how many blocks run at once (calibrate/norm_blocks.py),
# keyed costs.common.blocks_key: the profile section fitted for each kind.
BLOCK_KINDS = ("batch_norm", "batch_norm_backward", "weight_norm_rows", "weight_norm_rows_backward",
               "weight_norm_columns", "weight_norm_columns_backward", "sort_slices", "topk_slices",
               "cudnn_batch_norm", "cudnn_batch_norm_backward", "scan_rows", "scan_outer")
BLOCK_SECTIONS = {kind: f"{kind}_blocks" for kind in BLOCK_KINDS}
BATCH_NORM_CORRECTION_FEATURES = ("log2 C", "log2 N", "log2 H*W", "2-byte elements", "log2 C / concurrent blocks")
_BN_CORRECTIONS: dict[int, tuple[dict, TreeRegressor]] = {}  # parsed once per profile section


def grouped_gemm_us(fit: dict, flops: float, nbytes: float, flops_ratio: float = 1.0,
                    bytes_ratio: float = 1.0) -> float:
    """µs of one torch._grouped_mm on CUTLASS's grouped GEMM by the profile's fit (calibrate/grouped_gemm.py):
    floor + max(FLOPs / rate, bytes / rate). On another GPU the rates are scaled by the datasheets' ratios
    (flops_ratio, bytes_ratio: the profiled GPU's peak or bandwidth over this one's)."""
    return fit["floor_us"] + max(flops / fit["flops_per_us"] * flops_ratio, nbytes / fit["bytes_per_us"] * bytes_ratio)


def batch_norm_prior_us(fit: dict, channels: int, n: int, hw: int, itemsize: int, sm_count: int) -> float:
    """The structural part of calibrate/norm_blocks.py's model: floor + ns per element x N*H*W x waves of
    blocks (C blocks, blocks_per_sm x sm_count at once)."""
    ns = fit["ns_per_element"].get(str(itemsize)) or fit["ns_per_element"]["4"]
    waves = math.ceil(channels / (fit["blocks_per_sm"] * sm_count))
    return fit["floor_us"] + ns * n * hw * waves / 1000.0


def batch_norm_correction_features(fit: dict, channels: int, n: int, hw: int, itemsize: int,
                                   sm_count: int) -> list[float]:
    return [_log2(channels), _log2(n), _log2(hw), float(itemsize == 2),
            math.log2(channels / (fit["blocks_per_sm"] * sm_count))]


def batch_norm_blocks_us(fit: dict, channels: int, n: int, hw: int, itemsize: int, sm_count: int,
                         l2_warm: float = 0.0) -> float:
    """µs of an NCHW batch norm in training (forward or backward: a block per channel over N x H*W values) on a
    GPU with sm_count SMs, by the profile's fit (calibrate/norm_blocks.py): the structural prior times its fitted
    correction; with l2_warm of its input bytes still in L2, that share at the L2-resident fit's time. On another
    GPU the waves are counted on its SMs here; CalibratedModel._carried_blocks_us carries a block's pace and
    bounds it by that GPU's bandwidth."""
    cold = _blocks_us(fit, channels, n, hw, itemsize, sm_count)
    if l2_warm <= 0 or "l2_resident" not in fit:
        return cold
    return cold + (_blocks_us(fit["l2_resident"], channels, n, hw, itemsize, sm_count) - cold) * l2_warm


def _blocks_us(fit: dict, channels: int, n: int, hw: int, itemsize: int, sm_count: int) -> float:
    prior = batch_norm_prior_us(fit, channels, n, hw, itemsize, sm_count)
    if "correction" not in fit:
        return prior
    cached = _BN_CORRECTIONS.get(id(fit))
    if cached is None or cached[0] is not fit:
        cached = _BN_CORRECTIONS[id(fit)] = (fit, TreeRegressor.from_dict(fit["correction"]))
    features = batch_norm_correction_features(fit, channels, n, hw, itemsize, sm_count)
    return prior * math.exp(cached[1].predict(features))



def _nearest_table(tables: dict[tuple, ShapeTable], group: tuple) -> ShapeTable | None:
    """The group's table; else, for a GEMM, the same dtype and layout at the nearest alignment class, then any
    layout of the dtype; for other kinds the group must match."""
    if group in tables:
        return tables[group]
    if group[0] != "gemm":
        return None
    _, dtype, a_t, b_t, bias, alignment = group
    candidates = [g for g in tables if g[1] == dtype]
    if not candidates:
        return None

    def rank(g):
        return ((g[2], g[3]) != (a_t, b_t), abs(math.log2(g[5]) - math.log2(alignment)), g[4] != bias)

    return tables[min(candidates, key=rank)]


# Memory-bound lookups: distance in log2 of bytes moved and item size; for kernels that work row by row
# (norms, softmax, losses, reductions) the row length (innermost dim) counts too, at a lower weight.
INNER_DIM_WEIGHT = 0.5
ITEMSIZE_WEIGHT = 1.0
ROW_KINDS = {"norm", "norm_backward", "softmax", "softmax_backward", "loss", "reduction", "reduction_outer",
             "reduction_all", "reduction_index", "reduction_outer_index", "reduction_all_index"}
# Row-wise kernels that pick their implementation by row length (softmax: a warp per row up to 2048 elements,
# then a block per row; norms likewise): looked up along the size curve of rows within this many octaves of
# the op's row length. Left-one-out over the calibration points, median error: norm 16% -> 11%, norm
# backward 16% -> 13%, softmax 10% -> 9%; reductions did better with the blend and keep it.
ROW_REGIME_KINDS = {"norm", "norm_backward", "softmax", "softmax_backward", "loss", "rms_norm", "rms_norm_backward",
                    "norm_unvectorized", "copy_transpose"}
ROW_LENGTH_OCTAVES = 1.0
# Layer and RMS norms run a block per row, so at one size their rate climbs with the row width over the whole
# range (bf16 forward at 128 MB on the H200: 113 GB/s at 32 wide, 334 at 96, 1.0 TB/s at 384, 2.6 TB/s at 4096;
# validation/h200_norm_layout_linalg_raw.json.gz). Rows within an octave either side averaged together priced a
# 96-wide layer norm at the rate of 64- to 192-wide ones; instead each measured width's own curve is read at the
# op's size and the two widths that bracket the op's are interpolated in log width (_across_widths). Group norm
# likewise, by the elements of one group (costs/norms.py group_key): its moments kernel runs a block per group.
WIDTH_CURVE_KINDS = {"norm", "norm_backward", "rms_norm", "rms_norm_backward", "norm_unvectorized", "group_norm",
                     "group_norm_backward"}
# Kernels that stream their inputs once, as the add whose warm/cold ratio calibration measures; row-wise and
# reduction kernels did not show that gain in the suite's first run, so they keep the cold rate.
L2_STREAMING_KINDS = {"pointwise", "pointwise_cast", "pointwise_strided", "copy", "copy_cast", "fill",
                      "triton_pointwise", "triton_reduction", "triton_persistent_reduction"}
# Where a kind has no measurements of its own, the kinds that stand in for it, in order.
MEMORY_FALLBACK = {
    # a pointwise op reading an input across its memory order: the permuting copies' rate stands in (the zoo's
    # such adds, Whisper's and T5's, ran near it; the true transposes' rate priced T5's at 3.4x measured)
    "pointwise_transpose": ("copy_permute", "copy_transpose", "pointwise"), "copy_transpose": ("copy",),
    "copy_permute": ("copy_transpose", "copy"),  # a profile from before the two were told apart
    "rms_norm": ("norm",), "rms_norm_backward": ("norm_backward",), "norm_unvectorized": ("norm",),
    "pointwise_cast": ("copy_cast", "pointwise"), "copy_cast": ("copy",), "pointwise_strided": ("pointwise",),
    "reduction_outer": ("reduction",), "reduction_all": ("reduction",), "softmax_backward": ("softmax", "pointwise"),
    # value-and-index reductions (costs/elementwise.py VALUE_INDEX_REDUCTIONS): a profile from before they were
    # measured prices them as the value-only kind
    "reduction_index": ("reduction",), "reduction_outer_index": ("reduction_outer", "reduction"),
    "reduction_all_index": ("reduction_all", "reduction"),
    "batch_norm_backward": ("batch_norm", "norm_backward"), "memcpy": ("fill",), "fill": ("pointwise",),
    "batch_norm_channels_last": ("batch_norm",), "batch_norm_backward_channels_last": ("batch_norm_backward",),
    "gather": ("copy",), "scatter": ("gather", "copy"), "sort": ("copy",), "scan": ("reduction", "copy"),
    # the block scans (costs/scans.py) without their block fits: the scans' byte curve
    "scan_rows": ("scan", "reduction", "copy"), "scan_outer": ("scan", "reduction", "copy"),
    "select": ("reduction", "copy"),
    # Inductor's generated Triton kernels (costs/generated.py) stream their bytes once, whatever their class:
    # until a profile measures generated kernels, the eager pointwise curve (achieved rate by size) stands in for
    # each. Not the eager reduction curve: eager reductions over a non-contiguous dim ran 12 us on 655 KB where
    # Inductor's two kernels took 2 us together (H200, zoo compiled_mean).
    "triton_pointwise": ("pointwise",), "triton_reduction": ("pointwise",),
    "triton_persistent_reduction": ("pointwise",), "triton_foreach": ("foreach", "pointwise"),
    **{f"{pool}{suffix}": (pool, "copy") if suffix else ("copy",) for pool in
       ("max_pool", "avg_pool", "adaptive_avg_pool", "max_pool_backward", "avg_pool_backward",
        "adaptive_avg_pool_backward") for suffix in ("", "_channels_last")},
    "batch_norm_eval": ("pointwise",), "batch_norm_eval_channels_last": ("batch_norm_eval", "pointwise"),
    "cudnn_batch_norm": ("batch_norm",), "cudnn_batch_norm_channels_last": ("cudnn_batch_norm", "batch_norm_channels_last"),
    "cudnn_batch_norm_backward": ("batch_norm_backward",),
    "cudnn_batch_norm_backward_channels_last": ("cudnn_batch_norm_backward", "batch_norm_backward_channels_last"), "group_norm": ("norm",), "group_norm_backward": ("norm_backward",),
    # without their block fit (a profile calibrated before weight_norm_grid): a norm's rows
    "weight_norm_rows": ("norm",), "weight_norm_columns": ("norm",),
    "weight_norm_rows_backward": ("norm_backward",), "weight_norm_columns_backward": ("norm_backward",),
    "sort_slices": ("sort",), "topk_slices": ("sort",),
    "cat_strided": ("copy_transpose", "copy"),
    # without their sparse fits: the bag kernel as a gather, coalesce's chain as a sort of its pairs
    "embedding_bag": ("gather", "copy"), "coalesce": ("sort", "copy"),
}


# Above the L2 (50 MB on the H200) a streaming kernel's rate has saturated: the H200's fp32 copies ran 3.9 TB/s at
# 134 MB and 4.2 TB/s at 2 GB (profile memory.copy).
SATURATED_BYTES = 64 << 20


def _along_bytes(points: list["_MemoryPoint"], log_bytes: float, log_itemsize: float) -> float:
    """Log rate at this size, interpolated linearly in log bytes along the class's measured curve (points of
    the same item size when they reach this size, else all of them; points at one size averaged), and held flat
    beyond its ends.

    For streaming kinds, whose rate depends on size alone, this beats blending the nearest points: over the
    calibration's own points, left out one at a time, the median error fell from 15% to 10% (pointwise),
    45% to 8% (copy_cast) and 28% to 3% (pointwise_cast) on the profile of the day
    (scripts/eval/loo_calibration.py prints the current figures). Reductions keep the blend, which did better."""
    same = [p for p in points if p.log_itemsize == log_itemsize]
    low = min((p.log_bytes for p in same), default=0.0)
    high = max((p.log_bytes for p in same), default=0.0)
    if not same or log_bytes < low or (log_bytes > high and high < _log2(SATURATED_BYTES)):
        # the item size's points stop short of this size where rates still grow with size: held flat, their rate
        # at 262 KB had priced a 10 MB bf16 copy at 57 µs (measured 6 µs); the whole curve reaches it. Beyond
        # SATURATED_BYTES the item size's own last rate holds.
        same = points
    by_size: dict[float, list[float]] = {}
    for p in same:
        by_size.setdefault(p.log_bytes, []).append(p.log_rate)
    return _interp(sorted((x, sum(ys) / len(ys)) for x, ys in by_size.items()), log_bytes)


def _across_widths(points: list["_MemoryPoint"], log_bytes: float, log_inner: float,
                   log_itemsize: float) -> float | None:
    """Log rate of a row-wise kernel at this size and row width: each measured width's curve along bytes
    (_along_bytes) at this size, interpolated linearly in log width between the widths either side, held flat
    beyond the widest and narrowest. Widths with fewer than MIN_CURVE_POINTS points of this item size are left out
    (all item sizes when none has enough); None when no width has."""
    by_width: dict[float, list[_MemoryPoint]] = {}
    for p in points:
        by_width.setdefault(p.log_inner, []).append(p)
    curves = {w: ps for w, ps in by_width.items()
              if sum(p.log_itemsize == log_itemsize for p in ps) >= MIN_CURVE_POINTS}
    if not curves:
        curves = {w: ps for w, ps in by_width.items() if len(ps) >= MIN_CURVE_POINTS}
    if not curves:
        return None
    below = max((w for w in curves if w <= log_inner), default=None)
    above = min((w for w in curves if w >= log_inner), default=None)
    if below is None or above is None or below == above:
        nearest = below if above is None else above if below is None else below
        return _along_bytes(curves[nearest], log_bytes, log_itemsize)
    share = (log_inner - below) / (above - below)
    return ((1.0 - share) * _along_bytes(curves[below], log_bytes, log_itemsize)
            + share * _along_bytes(curves[above], log_bytes, log_itemsize))


def streaming_time_us(rows: list, nbytes: float, itemsize: int, floor_us: float) -> float:
    """µs of one streaming kernel moving `nbytes`, read off a curve of profile memory rows ([bytes, work items,
    time µs, inner, item size]) as CalibratedModel reads a streaming kind's (validation scripts use it to check
    a curve held out). Raises ValueError with fewer than MIN_CURVE_POINTS rows."""
    points = _memory_points(rows, floor_us)
    if len(points) < MIN_CURVE_POINTS:
        raise ValueError(f"a curve needs {MIN_CURVE_POINTS} points, got {len(points)}")
    return _streaming_us(points, nbytes, itemsize, floor_us)


def _streaming_us(points: list["_MemoryPoint"], nbytes: float, itemsize: int, floor_us: float) -> float:
    """nbytes at the rate read off a streaming curve (_along_bytes), never under the work-item floor."""
    return max(nbytes / math.exp(_along_bytes(points, _log2(nbytes), _log2(itemsize))), floor_us)


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
    _gemm_rates: dict = field(default_factory=dict)  # by key: a step repeats its few shapes many times
    _shape_tables: dict = field(default_factory=dict)  # by kind: built on first use
    _fitted_models: dict = field(default_factory=dict)  # by kind: read on first use
    # this GPU's factors over the datasheet ratios (devices/achieved.py); None: looked up by the GPU
    achieved: AchievedRates | None = None
    _streaming_rate: float | None = None  # bytes/us, read on first use (_streaming_bytes_per_us)

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
        if self.achieved is None:
            # the capture's torch picks the factors fitted to timings of the nearest torch (devices/achieved.py)
            self.achieved = achieved_rates(self.gpu.id, self.gpu.compute_capability,
                                           torch_version=self.settings.torch_version or None) \
                if self.transferred else DATASHEET
        if self.transferred:
            held = self.achieved.held_out_error
            self.source = (f"calibrated on the {self.profile['gpu'].upper()} (torch {torch_version}), scaled to this "
                           "GPU by "
                           f"{ACHIEVED_LABEL[self.achieved.source].format(timings=self.achieved.timings_said)}"
                           + (f" (held-out error {held:.0%} on KernelBench's GPU-busy programs: `kernelcast devices`)"
                              if held is not None else ""))
        else:
            self.source = f"calibrated ({self.profile['gpu']} profile, torch {torch_version}, {self.profile['date']})"

    # -- compute-bound lookups on the profiled GPU: prior x interpolated correction (shape_model.py) ---------
    def _shape_estimate(self, cost: Cost) -> tuple[float, ShapeEstimate] | None:
        """(time on the profiled GPU in µs, how it was found) of a GEMM, convolution or attention kernel."""
        cache_key = (cost.kind, cost.key)
        if cache_key not in self._gemm_rates:
            self._gemm_rates[cache_key] = self._lookup_shape(cost.kind, cost.key)
        return self._gemm_rates[cache_key]

    def _lookup_shape(self, kind: str, key: tuple) -> tuple[float, ShapeEstimate] | None:
        if kind == "conv" and key and key[0] == "conv_bwd":  # both gradients: the two passes, one after the other
            parts = [self._lookup_shape(kind, (p, *key[1:])) for p in ("conv_bwd_input", "conv_bwd_weight")]
            if None in parts:
                return None
            (t1, e1), (t2, e2) = parts
            source = max((e1.source, e2.source), key=SOURCE_ORDER.index)
            return t1 + t2, ShapeEstimate((t1 + t2) / (self._prior_us(kind, key)), source,
                                           max(e1.uncertainty, e2.uncertainty))
        tables = self._tables(kind)
        group = SHAPE_GROUPS[kind](key, self.settings)
        table = _nearest_table(tables, group)
        fitted = self._fitted(fitted_name(kind, key))
        if table is None and fitted is None:
            return None
        coords, shape_kind = SHAPE_POINTS[kind](key)
        est = table.estimate(coords, shape_kind) if table is not None else None
        if fitted is not None and (est is None or est.source != "measured-near"):
            # away from a measured shape, the regressor fitted over the whole sweep holds out better than the
            # nearest points (calibrate/time_model.py; scripts/eval/shape_model_eval.py compares the two)
            regressor, uncertainty = fitted
            fit_key = key if kind != "gemm" or key[0] != "float32" or not self.settings.matmul_allow_tf32 \
                else ("tf32", *key[1:])
            est = ShapeEstimate(math.exp(regressor.predict(SHAPE_FEATURES[kind](fit_key))), "fitted", uncertainty)
            if kind == "conv":
                return self._batch_split_bound(key, self._prior_us(kind, key) * est.correction, est, regressor)
        return self._prior_us(kind, key) * est.correction, est

    def _batch_split_bound(self, key: tuple, time_us: float, est: ShapeEstimate,
                           regressor: TreeRegressor) -> tuple[float, ShapeEstimate]:
        """A fitted convolution's time held to at most B / b times its fitted time at a smaller batch b (halving B
        down to 1): a batch of B samples can run as B / b launches of b, so its kernel time grows no faster than
        its batch. The fitted correction is piecewise constant in the log sizes and jumps where the batch crosses
        a split of the sweep's tree: KernelBench L2 #72's transposed 3-D convolution (3 -> 16 channels, 32^3,
        batch 128) was priced at 94.8 µs per sample against 52.0 at batch 64, the H200 measured 48 (its cuDNN
        kernels 6.16 ms for 128 samples; validation/kernelbench/h200_kernels.json.gz)."""
        batch = key[9]
        best_us = time_us
        smaller = batch // 2
        while smaller >= 1:
            part_key = (*key[:9], smaller, *key[10:])
            correction = math.exp(regressor.predict(SHAPE_FEATURES["conv"](part_key)))
            best_us = min(best_us, batch / smaller * self._prior_us("conv", part_key) * correction)
            smaller //= 2
        if best_us == time_us:
            return time_us, est
        return best_us, dataclasses.replace(est, correction=best_us / self._prior_us("conv", key))

    def _fitted(self, kind: str) -> tuple[TreeRegressor, float] | None:
        """The profile's fitted correction model of this kind and its held-out uncertainty, if it has one; in a
        profile fitted before the kind had a model of its own, its fallback's (shape_kinds.fitted_fallback)."""
        if kind not in self._fitted_models:
            section = self.profile["timings"].get("fitted", {}).get(kind)
            if section is not None:
                self._fitted_models[kind] = (TreeRegressor.from_dict(section["regressor"]),
                                             float(section["held_out"]["uncertainty"]))
            else:
                fallback = fitted_fallback(kind)
                self._fitted_models[kind] = self._fitted(fallback) if fallback else None
        return self._fitted_models[kind]

    def _tables(self, kind: str) -> dict[tuple, ShapeTable]:
        if kind not in self._shape_tables:
            rows = self.profile["timings"].get(kind, ())
            group_of, point_of = SHAPE_GROUPS[kind], SHAPE_POINTS[kind]

            def point(row):
                key, time_us = tuple(row[:KEY_LENGTH[kind]]), row[KEY_LENGTH[kind] + 1]
                prior = self._prior_us(kind, key)
                if time_us <= 0 or prior <= 0:
                    return None
                coords, shape_kind = point_of(key)
                return ShapePoint(coords, shape_kind, math.log(time_us / prior))

            self._shape_tables[kind] = build_tables(
                [r for r in rows if len(r) == KEY_LENGTH[kind] + 3],
                lambda r: group_of(tuple(r[:KEY_LENGTH[kind]]), None), point)
        return self._shape_tables[kind]

    def _prior_us(self, kind: str, key: tuple) -> float:
        """The profiled GPU's roofline for the work the key implies, plus the measured floor. A "tf32" GEMM key
        (the sweep's fp32 GEMMs with TF32 allowed) is priced at the TF32 roof whatever this model's settings."""
        flops, nbytes, dtype, math_kind = SHAPE_WORK[kind](key)
        cost = Cost(flops=flops, bytes_read=nbytes, math=math_kind, dtype=dtype)
        if kind == "gemm" and key[0] == "tf32":
            peak = self.profiled_gpu.matmul_peak("float32", True)[0]
        else:
            peak = self._profiled_roofline.peak(cost)[0]
        return max(flops / peak, nbytes / self.profiled_gpu.mem_bw_bytes_per_s) * 1e6 + self.floor_us

    def notes_for(self, notes: tuple[str, ...], stand_in_note: str) -> tuple[str, ...]:
        """The capture's notes with its stand-in note for generated-kernel times replaced where this profile
        has fitted them."""
        fitted = set(self.profile["timings"].get("generated", {})) - {"source"}
        if not fitted:
            return notes
        fit_note = GENERATED_FIT_NOTE.format(gpu=self.profile["gpu"].upper())
        return tuple(fit_note if n == stand_in_note else n for n in notes)

    def _foreach_time_us(self, cost: Cost, l2_warm: float = 0.0) -> float:
        """A multi_tensor_apply op: per launch, the longer of one thread block's time for the largest chunk (a
        list of few chunks leaves most SMs idle, and its launch lasts that long: validation/probes/
        foreach_probe.json, 15 µs for any number of 65536-element chunks up to 64 on the H200) and the
        launch's bytes at the pointwise curve's streaming rate. The block time is launch_us + elements x
        us_per_element, fitted by scripts/fit/fit_foreach_blocks.py on that probe with the lists read from HBM
        ("cold") and with them resident in L2 ("warm"). A block walks its chunk of every list in step, so its
        coldest list sets its pace: the warm line only where the L2 tracker holds all of the op's inputs
        (FOREACH_ALL_WARM). On the zoo's 14 optimizer steps (`python3 scripts/eval/foreach_warm_check.py`: 1310
        µs of foreach kernels measured on the H200), summed |error| 380 µs at the HBM line alone, 330 linear in the
        resident share as the streaming kinds are priced, 237 with the all-warm rule: an op with one list cold ran
        at the cold pace (Adam's addcdiv_ over the parameters beside two warm lists: 22.9 µs measured, 17.5 at the
        HBM line), one with all of them resident near the warm line (its add_ of eps: 8.4 measured, 8.5)."""
        fits = self.profile["timings"]["foreach_blocks"]
        fit = fits["warm"] if l2_warm >= FOREACH_ALL_WARM and "warm" in fits else fits["cold"]
        launches = max(cost.kernels, 1)
        block_us = fit["launch_us"] + cost.key[1] * fit["us_per_element"]
        points = self._memory.get("pointwise")
        per_launch = cost.bytes / launches
        stream_us = (_streaming_us(points, per_launch, FOREACH_CURVE_ITEMSIZE, self.floor_us)
                     if points and per_launch > 0 else self.floor_us)
        # multi_tensor_apply streams slower than the pointwise curve over optimizer-sized lists, bf16 slower than
        # fp32, an op over more lists faster (calibrate/foreach_blocks.py stream_section: on the H200 2.8-3.9
        # TB/s against 4.2); the lists an op streams are its bytes over one list's (costs/foreach.py chunks)
        itemsize = DTYPE_BYTES.get(cost.dtype, FOREACH_CURVE_ITEMSIZE)
        by_lists = self.profile["timings"].get("foreach_stream", {}).get("bytes_per_us", {}).get(str(itemsize))
        if by_lists and cost.key and cost.key[2]:
            lists = cost.bytes / (cost.key[2] * CHUNK_ELEMENTS * itemsize)
            nearest = min(by_lists, key=lambda n: abs(int(n) - lists))
            stream_us = max(stream_us, per_launch / by_lists[nearest])
        if self.transferred:  # the streaming part on another GPU, as for the other memory kinds
            stream_us *= self._bandwidth_ratio()
        return launches * max(block_us, stream_us)

    def _unit_rate_time_us(self, cost: Cost) -> float | None:
        """A row gather or an index_add_ (calibrate/unit_rates.py): its units (indices gathered, elements added
        atomically) at the calibrated time per unit, or its bytes at the streaming copy's rate where that is
        longer (rows wide enough to be bandwidth-bound). The gather and scatter curves by bytes, fitted over other
        ops of the kinds, priced these at up to twice their measured time. On another GPU the bytes part carries
        the datasheets' bandwidth ratio; the per-unit part stays the profiled GPU's."""
        what, *units, itemsize = cost.key
        if what == SMALL_INDEX_KEY:  # a profile without the small-index fit: priced as the row gather it is
            _, _, indices, _, _ = cost.key
            return self._unit_rate_time_us(dataclasses.replace(cost, key=(ROWS_KEY, indices, itemsize)))
        if what == SMALL_INDEX_ADD_KEY:  # without its fit: the atomic adds of its elements, as indexFuncLargeIndex's
            elements = cost.key[4]
            return self._unit_rate_time_us(dataclasses.replace(cost, key=(ATOMICS_KEY, elements, itemsize)))
        bytes_us = self._memory_time_us(dataclasses.replace(cost, kind="copy", key=(1, itemsize)))
        if bytes_us is not None and self.transferred:
            bytes_us = self.floor_us + (bytes_us - self.floor_us) * self._bandwidth_ratio()
        rates = self.profile["timings"]["unit_rates"]
        line = {ROWS_KEY: rates.get("gather_rows"), ELEMENTS_KEY: rates.get("gather_elements")}.get(
            what, rates.get("index_add_elements", {}).get(str(itemsize)))
        if line is None:  # not calibrated: the op's own kind by its bytes
            return self._memory_time_us(dataclasses.replace(cost, key=(1, itemsize)))
        if what == ELEMENTS_KEY:  # a floor, a time per index and one per element gathered
            indices, elements = units
            units_us = line["floor_us"] + line["us_per_index"] * indices + line["us_per_element"] * elements
        else:
            units_us = line["floor_us"] + line["us_per_unit"] * units[0]
        units_us += (cost.kernels - 1) * self.floor_us
        return max(units_us, bytes_us or 0.0)

    def _small_index_time_us(self, cost: Cost, l2_warm: float) -> float:
        """An index_select or index_add_ of at most 16 indices (costs/gather.py SMALL_INDEX_MAX): a floor and a
        time per index and slice element a thread walks, by kernel and path (calibrate/unit_rates.py small_index
        and small_index_add, fitted to the calibration's small_index_grid and small_index_add_grid), the
        select's L2-resident line for the share of its input still in L2 (a KV cache the step just wrote), or
        its bytes at the streaming copy's rate where longer. On another GPU the per-unit part (a thread's
        dependent loads or atomics) stays the profiled GPU's; the slice a thread walks is the target's (its SMs)."""
        what, path, indices, iterations, *_, itemsize = cost.key
        line = self.profile["timings"]["unit_rates"][SMALL_INDEX_SECTIONS[what]][path]
        line = line.get("by_itemsize", {}).get(str(itemsize), line)  # index_add's atomics: a line per item size
        time_us = _walk_line_us(line, indices * iterations, l2_warm)
        bytes_us = self._memory_time_us(dataclasses.replace(cost, kind="copy", key=(1, itemsize)))
        if bytes_us is not None and self.transferred:
            bytes_us = self.floor_us + (bytes_us - self.floor_us) * self._bandwidth_ratio()
        return max(time_us, bytes_us or 0.0)

    def _nll_walk_time_us(self, cost: Cost, l2_warm: float) -> float:
        """nll_loss's one-block kernel (costs/losses.py nll_walk): a floor and a time per frame each thread walks
        (calibrate/unit_rates.py nll_walk, fitted to the calibration's nll_loss_grid), its L2-resident line for
        the share of its input still in L2 (a log_softmax just wrote it). A frame's time is a thread's dependent
        reads' latency, which the SMs' count and DRAM's bandwidth do not set: on another GPU it stays the profiled
        GPU's, as the small-index walk's does."""
        _, direction, iterations, _ = cost.key
        return _walk_line_us(self.profile["timings"]["unit_rates"]["nll_walk"][direction], iterations, l2_warm)

    def _window_time_us(self, cost: Cost) -> float:
        """A windowed NC(D)HW pooling op: the longer of its window walk, by the profile's fit of its op
        (calibrate/window_rates.py: a floor, a time per window tap, per output, per input element and per byte),
        and its bytes at the profiled GPU's streaming rate. On the H200 the walk sets the time (its fit has
        almost no per-byte term); on another GPU the walk scales with SMs x clock (a thread's loads over its
        window hit L1, whose throughput is per SM and clock) and the streaming bound with the DRAM bandwidths,
        both times the GPU's memory-bound factor. KernelBench level 1 #43 (3 x 3 x 3 max pool, 738 MB moved):
        485 us on the H200, walk-bound; 2.64 ms on an L4, near its 300 GB/s for those bytes."""
        _, pool, taps, outputs, inputs, _, _ = cost.key
        fit = self.profile["timings"]["pool_windows"][pool]
        floor_us = fit["coefficients"][0]
        walk_us = window_us(fit, taps, outputs, inputs, cost.bytes) - floor_us
        stream_us = cost.bytes / self._streaming_bytes_per_us()
        if self.transferred:
            here, there = self.gpu.sm_cycles_per_s, self.profiled_gpu.sm_cycles_per_s
            bandwidth = self._dram_ratio()
            factor = self.achieved.factor(MEMORY)
            walk_us *= (there / here if here and there else bandwidth) * factor
            stream_us *= bandwidth * factor
        return floor_us + max(walk_us, stream_us)

    def _spatial_softmax_time_us(self, cost: Cost) -> float:
        """A softmax over a dim that is not the last, by the profile's fit of its pass over the serial walk its
        launch geometry gives on this GPU (its SMs and resident threads per SM: predict/spatial_softmax_time.py);
        on another GPU the per-byte term scales with the DRAM bandwidths, the walk's per-visit latency stays."""
        _, pass_, outer, dim, inner, _, itemsize = cost.key
        features = spatial_features(outer, dim, inner, cost.bytes, itemsize, self.gpu.sm_count,
                                    self.gpu.compute_capability, self.gpu.l2_bytes)
        return spatial_softmax_us(self.profile["timings"]["spatial_softmax"][pass_], features,
                                  self._bandwidth_ratio() if self.transferred else 1.0)

    def _sparse_time_us(self, cost: Cost) -> float:
        """A coalesce's chain or an EmbeddingBag forward by the profile's sparse fits (calibrate/sparse_fit.py);
        on another GPU the fit's time scales with the datasheets' bandwidth ratio."""
        fit = self.profile["timings"]["sparse"][SPARSE_SECTIONS[cost.key[0]]]
        if cost.key[0] == COALESCE_KEY:
            _, nnz, value_bytes = cost.key
            time_us = coalesce_us(fit, nnz, value_bytes)
        else:
            _, indices, bags, dim, itemsize = cost.key
            time_us = embedding_bag_us(fit, indices, embedding_bag_bytes(indices, bags, dim, itemsize))
        return self.floor_us + (time_us - self.floor_us) * self._bandwidth_ratio() if self.transferred else time_us

    def _spmm_time_us(self, cost: Cost) -> float:
        """A cuSPARSE SpMM kernel (the product or its row partition) by the measured lines of
        predict/sparse_time.py; on another GPU the time past the floor carries by SMs x clock (the product's rate
        is far under DRAM bandwidth: an issue-bound gather)."""
        kind, size = cost.key[:2]
        time_us, floor_us = ((spmm_product_us(size), SPMM_FLOOR_US) if kind == SPMM_KEY
                             else (spmm_partition_us(size), SPMM_PARTITION_FLOOR_US))
        return floor_us + (time_us - floor_us) * self._sm_cycles_ratio(self._bandwidth_ratio()) \
            if self.transferred else time_us

    def _generated_time_us(self, cost: Cost, l2_warm: float = 0.0) -> float:
        """An Inductor-generated kernel: its class's launch floor plus its bytes (Inductor's count) at the
        class's sustained bandwidth, both fitted to the device's grid of compiled microbenchmarks
        (calibrate/generated.py); one that adds atomically, the longer of that and its atomics' fit. The grid
        times each kernel after the L2 flush; in a step a fused kernel mostly reads what the kernels before it
        wrote, so the share of its reads the L2 tracker holds (`l2_warm`) runs at the L2-resident speed, as an
        eager streaming kernel's does (_memory_estimate_us: the profile's l2_speedup, measured on pointwise
        adds; on another GPU the warm share carried by SMs x clock)."""
        generated = self.profile["timings"]["generated"]
        fit = generated[cost.kind]
        launch_us = cost.kernels * fit["launch_us"]
        stream_us = cost.bytes / fit["bytes_per_us"]
        if cost.key[:1] == (GENERATED_ATOMICS_KEY,) and "atomics" in generated:
            # its atomic adds, at the profiled GPU's rates (atomic throughput has no datasheet figure)
            ratio = self._bandwidth_ratio() if self.transferred else 1.0
            _, elements, indices, destination_bytes = cost.key
            return max(launch_us + stream_us * ratio,
                       atomics_time_us(generated["atomics"], elements, indices, destination_bytes))
        warm = l2_warm * cost.bytes_read / cost.bytes if cost.bytes else 0.0
        if not self.transferred:
            return (launch_us + stream_us) * (1.0 - warm + warm / self.l2_speedup(cost.bytes))
        # on another GPU the cold bytes carry by the datasheets' bandwidth ratio, as for the other memory kinds,
        # the warm ones by SMs x clock (_carried_l2_us)
        return (launch_us + stream_us * (1.0 - warm) * self._bandwidth_ratio()
                + (self._carried_l2_us(stream_us * warm / self.l2_speedup(cost.bytes)) if warm else 0.0))

    def _memory_time_us(self, cost: Cost) -> float | None:
        """Bytes over the achieved rate of the nearest measured sizes of this kind of kernel."""
        points = next((self._memory[k] for k in (cost.kind, *MEMORY_FALLBACK.get(cost.kind, ()), "pointwise")
                       if k in self._memory), None)
        if points is None or cost.bytes <= 0:
            return None
        inner, itemsize = _curve_key(cost.key)
        across = (_across_widths(points, _log2(cost.bytes), _log2(inner), _log2(itemsize))
                  if cost.kind in WIDTH_CURVE_KINDS else None)
        if across is not None:
            rate = math.exp(across)
        elif cost.kind in ROW_REGIME_KINDS:  # the kernel changes with row length: rows of about this length
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

    def _memory_estimate_us(self, cost: Cost, l2_warm: float) -> float | None:
        """A memory kind's time: its bytes at the measured curve (cold), the warm share of the bytes read at the
        L2-resident speed for a streaming kind, scaled by the datasheets' bandwidth ratio on another GPU."""
        t = self._memory_time_us(cost)
        if t is None:
            return None
        if not (l2_warm > 0 and cost.kind in L2_STREAMING_KINDS and cost.bytes):
            return self._carried_memory_us(t, cost.bytes, _row_blocks(cost)) if self.transferred else t
        warm = l2_warm * cost.bytes_read / cost.bytes
        if not self.transferred:
            return t * (1.0 - warm + warm / self.l2_speedup(cost.bytes))
        # On another GPU the bytes read from L2 do not move at its DRAM's pace: L2's bandwidth is its slices'
        # and scales with the SMs that issue the loads and their clock, not with DRAM (an L4 streams DRAM at
        # 300 GB/s, 1/16 of the H200's, but has 48 MB of L2 and 58 SMs at 2 GHz). The cold share carries with
        # the DRAM bandwidths (_carried_memory_us), the warm share with SMs x clock (_carried_l2_us).
        # (the launch floor once, in the cold share)
        work_us = max(t - self.floor_us, 0.0)
        cold = self._carried_memory_us(self.floor_us + work_us * (1.0 - warm), cost.bytes * (1.0 - warm),
                                       _row_blocks(cost))
        return cold + self._carried_l2_us(work_us * warm / self.l2_speedup(cost.bytes))

    def _streaming_bytes_per_us(self) -> float:
        """The fastest the profiled GPU streams bytes: its largest measured copy's rate (profile memory.copy;
        4.2 TB/s on the H200, 88% of the datasheet's 4.8), or the datasheet bandwidth without one. Read once per
        model: every memory-bound estimate on another GPU asks for it."""
        if self._streaming_rate is None:
            copies = self.profile["timings"]["memory"].get("copy") or []
            if copies:
                nbytes, _, time_us, *_ = max(copies, key=lambda p: p[0])
                self._streaming_rate = nbytes / time_us
            else:
                self._streaming_rate = self.profiled_gpu.mem_bw_bytes_per_s / 1e6
        return self._streaming_rate

    def _carried_memory_us(self, time_us: float, nbytes: float, blocks: int | None = None) -> float:
        """A memory-bound kernel's time on the profiled GPU carried to this one. The part the profiled GPU's
        streaming rate explains (the bytes at its fastest copy's rate) scales with the two DRAM bandwidths; the
        rest, time the kernel spends beyond streaming its bytes (few thread blocks, a block's serial walk, index
        arithmetic), with the two GPUs' SMs x clock (devices.GPU.sm_cycles_per_s), counting only the SMs its
        blocks occupy where it has fewer blocks than SMs (a layer norm of 16 rows runs 16 blocks on either GPU:
        its walk carries by the clocks alone); the launch floor stays. Both times this GPU's achieved factor for
        memory-bound kernels (devices/achieved.py)."""
        work_us = max(time_us - self.floor_us, 0.0)
        streaming_us = min(work_us, nbytes / self._streaming_bytes_per_us())
        bandwidth = self._dram_ratio()
        issue = self._sm_cycles_ratio(fallback=bandwidth, blocks=blocks)
        if blocks and blocks < self.profiled_gpu.sm_count and self._sm_cycles_known():
            # fewer blocks than the profiled GPU's SMs: its DRAM was never the limit, the blocks' walk was, bytes
            # included; on this GPU the walk carries by the clocks, bounded below by its own bandwidth. Summing
            # the two had counted the bytes twice: KernelBench L1 #40's layer norm over 16 rows of 4 M values
            # (16 blocks) was priced +37% on an L4 and +46% on a T4, now +12% and +33% (factors refitted).
            return self.floor_us + max(streaming_us * bandwidth, work_us * issue) * self.achieved.factor(MEMORY)
        return self.floor_us + (streaming_us * bandwidth + (work_us - streaming_us) * issue) * \
            self.achieved.factor(MEMORY)

    def _carried_l2_us(self, time_us: float) -> float:
        """The share of a memory-bound kernel's time on the profiled GPU spent reading bytes resident in L2,
        carried to this GPU by SMs x clock (devices.GPU.sm_cycles_per_s: each SM's path to L2 moves a fixed
        number of bytes per clock within an architecture, so L2 bandwidth follows SMs x clock), bounded by the
        DRAM bandwidths' ratio where that is faster (L2 is never slower than DRAM); times this GPU's
        memory-bound factor (devices/achieved.py), as the cold share."""
        issue = self._sm_cycles_ratio(fallback=self._dram_ratio())
        return time_us * min(issue, self._dram_ratio()) * self.achieved.factor(MEMORY)

    def _carried_blocks_us(self, time_us: float, nbytes: float) -> float:
        """A block-per-slice kernel's time (batch norm's block per channel, weight norm's, the slice sorts: their
        waves already counted on this GPU's SMs) carried to this GPU: a block's pace by the two GPUs' clocks, but
        never faster than this GPU streams the bytes (the profiled GPU's streaming rate times the bandwidths'
        ratio: 64 channels of batch norm fill two waves on a T4's 40 SMs, and its 320 GB/s, not the blocks, set
        the time); times this GPU's factor for such kernels (devices/achieved.py BLOCKS: its memory-bound factor
        where it has none), as scripts/fit/fit_gpu_rates.py fits it, on the kernel's whole time. The launch floor
        stays."""
        work_us = max(time_us - self.floor_us, 0.0)
        here, there = self.gpu.boost_clock_hz, self.profiled_gpu.boost_clock_hz
        paced_us = work_us * (there / here if here and there else 1.0)
        streaming_us = nbytes / self._streaming_bytes_per_us() * self._dram_ratio()
        return self.floor_us + max(paced_us, streaming_us) * self.achieved.factor(BLOCKS)

    def _arithmetic_bound_us(self, cost: Cost, l2_warm: float) -> float | None:
        """A pointwise op whose math can bound it (costs.elementwise.ARITHMETIC_OPS): its bytes as any pointwise
        op's (_memory_estimate_us), or its elements (Cost.flops: one per element) at its measured arithmetic
        rate (the profile's arithmetic_caps), whichever is longer; on another GPU the arithmetic part is scaled
        by the datasheets' vector-FLOP ratio."""
        t = self._memory_estimate_us(dataclasses.replace(cost, kind="pointwise", key=cost.key[:2]), l2_warm)
        caps = self.profile["timings"].get("arithmetic_caps", {}).get("g_elements_per_s", {})
        rate = caps.get(cost.key[2]) if len(cost.key) > 2 else None
        if t is not None and rate:
            t = max(t, cost.flops / (rate * 1e3) * self._compute_ratio(cost))
        return t

    # -- the model -----------------------------------------------------------------------------------------
    def l2_speedup(self, nbytes: float) -> float:
        """How much faster a memory-bound kernel of this size runs with its inputs in L2 (1 beyond L2)."""
        table = self.profile["timings"].get("l2_speedup") or []
        if not table or nbytes <= 0:
            return 1.0
        return _interp([(_log2(b), speedup) for b, speedup in table], _log2(nbytes))

    def estimate(self, cost: Cost, l2_warm: float = 0.0) -> KernelEstimate:
        if cost.parts:  # kernels of other kinds inside the op (Cost.parts): each priced by its own kind
            return combined([self.estimate(cost.remainder(), l2_warm),
                             *(self.estimate(p, self._just_written_warm(p)) for p in cost.parts)])
        if cost.kernels == 0:
            return NO_KERNEL
        roofline = self._fallback.estimate(cost)
        if cost.kind in TRANSFER_KINDS:
            return self._host_link_estimate(cost, roofline)
        model = next((m for m in KERNEL_TIME_MODELS if m.prices(self, cost)), None)
        time_us, source, uncertainty = model.time(self, cost, l2_warm) if model else (None, "", 0.0)
        if time_us is None:
            return KernelEstimate(roofline.time_us, roofline.bound, f"datasheet:{roofline.roof}",
                                  roofline.compute_us, roofline.memory_us, "datasheet", DATASHEET_UNCERTAINTY)
        time_us = max(time_us, cost.kernels * self.floor_us)
        if time_us <= cost.kernels * self.floor_us * LATENCY_BOUND_MARGIN:
            bound = "latency"
        else:
            bound = "compute" if roofline.compute_us >= roofline.memory_us else "memory"
        if self.transferred:
            source = f"{source}, scaled"
        return KernelEstimate(time_us, bound, roofline.roof, roofline.compute_us, roofline.memory_us, source,
                              uncertainty)

    def _just_written_warm(self, part: Cost) -> float:
        """The share of a part's read bytes in L2 when it starts: those the op's previous kernel just wrote
        (Cost.reads_just_written), where they fit in this GPU's L2."""
        if not part.reads_just_written or not part.bytes_read or part.reads_just_written > self.gpu.l2_bytes:
            return 0.0
        return min(part.reads_just_written / part.bytes_read, 1.0)

    def _host_link_estimate(self, cost: Cost, roofline: KernelEstimate) -> KernelEstimate:
        """A copy between host and GPU (costs.common.TRANSFER_KINDS): its bytes at the rate the profiled host
        reached over its link at this size (the profile's host copy curve), on another GPU scaled by the two
        host links' datasheet bandwidths (devices gpus.toml host_link); the datasheet roofline without one."""
        copies = self.profile.get("host", {}).get("copies", {})
        kind = cost.kind if f"{cost.kind}_curve" in copies else cost.kind.removesuffix(INTO_SUFFIX)
        curve = copies.get(f"{kind}_curve")  # a profile without the "_into" rates: the allocating copy's
        rate = _rate_on_curve(curve, cost.bytes) if curve else copies.get(f"{kind}_bytes_per_s")
        if not rate:
            return roofline
        roof, source = "measured host link", "interpolated"  # a rate read off the measured copy curve
        if self.transferred:  # the share of its link the profiled host reached, on this GPU's own link
            rate *= self.gpu.host_link_bw_bytes_per_s / self.profiled_gpu.host_link_bw_bytes_per_s
            roof, source = f"measured host link, scaled to {self.gpu.host_link}", "interpolated, scaled"
        link_us = cost.bytes / rate * 1e6
        return KernelEstimate(max(link_us, self.floor_us), "host link", roof, 0.0, link_us, source,
                              MEMORY_CURVE_UNCERTAINTY)

    # -- cuDNN RNN calls: their launches as parts (costs/rnn.py), each priced by its own model ----------------
    def _cudnn_rnn_us(self, cost: Cost) -> float | None:
        """A cuDNN RNN call: its GEMMs through the GEMM tables, its per-step and persistent kernels and bias
        reduction by the profile's `rnn` fit (predict/rnn_time.py), copies and pointwise kernels by their size
        curves, memsets at the floor. None without an `rnn` section (the datasheet then)."""
        fit = self.profile["timings"].get("rnn")
        if not fit:
            return None
        return sum(self._rnn_part_us(part_from_key(key), fit, cost) for key in cost.key)

    def _rnn_part_us(self, part: RnnPart, fit: dict, call: Cost) -> float:
        floor_us = part.kernels * self.floor_us
        if part.what == "gemm":
            dtype, a_t, b_t, m, n, k = part.shape
            key_dtype = "tf32" if dtype == "float32" and self.settings.cudnn_allow_tf32 else dtype
            size = dtype_itemsize(dtype)
            gemm = Cost(flops=2.0 * m * n * k, bytes_read=(m * k + k * n) * size, bytes_written=m * n * size,
                        math="conv", dtype=dtype, kind="gemm", key=(key_dtype, a_t, b_t, False, m, n, k))
            found = self._shape_estimate(gemm)
            each = ((self._carried_compute_us(gemm, found[0]) if self.transferred else found[0]) if found
                    else self._fallback.estimate(gemm).time_us)
            return part.count * max(each, floor_us)
        if part.what in ("copy", "pointwise"):
            nbytes = float(part.shape[0]) if part.shape else 0.0
            each = self._memory_time_us(Cost(bytes_read=nbytes / 2, bytes_written=nbytes / 2, kind=part.what,
                                             dtype=call.dtype)) if nbytes > 0 else None
            return part.count * max(each or floor_us, floor_us)
        # the profiled GPU's fit; on another, its size-dependent terms scale by bandwidth (rnn_time.py)
        scale = self._bandwidth_ratio() if self.transferred else 1.0
        if part.what == "step":
            pass_, mode, batch, hidden, dtype = part.shape
            each = step_time_us(fit, pass_, mode, batch, hidden, dtype, part.kernels > 2, scale)
        elif part.what == "persist":
            pass_, mode, batch, hidden, steps, dtype = part.shape
            each = persist_time_us(fit, pass_, mode, hidden, steps)
        elif part.what == "bias_grad":
            each = bias_grad_time_us(fit, part.shape[0], float(part.shape[1]), scale)
        else:  # memsets
            each = floor_us
        return part.count * max(each, floor_us)

    def _compute_ratio(self, cost: Cost) -> float:
        """Profiled GPU's peak over this GPU's, for the op's roof, times this GPU's achieved-rate factor for the
        op's class (devices/achieved.py; 1 on the profiled GPU)."""
        if not self.transferred:
            return 1.0
        peak, roof = self._fallback.peak(cost)
        factor = self.achieved.factor(rate_class(kernel_family(cost), roof))
        return self._profiled_roofline.peak(cost)[0] / peak * factor

    def _carried_compute_us(self, cost: Cost, time_us: float) -> float:
        """A GEMM, convolution or attention kernel's time on the profiled GPU carried to this one, part by part,
        as the roofline splits it. The part the profiled GPU's roofline explains, the longer of its FLOPs at the
        datasheet peak for the kernel's roof and its bytes at the measured streaming rate, scales with the two
        GPUs' peaks (or DRAM bandwidths, whichever makes it longer here); the rest, time the kernel spends
        beyond its roofline (tile quantization's idle lanes, a short K's pipeline fill, a grid of few thread
        blocks, a library kernel far from the roof), with the two GPUs' SMs x clock, as the same work spread over
        another GPU's SMs (devices.GPU.sm_cycles_per_s); the launch floor stays. The whole times this GPU's
        achieved factor for the kernel's class (devices/achieved.py). A whole-time peak ratio had carried a 3-D
        convolution the H200 ran at 14 TFLOP/s, 3% of its TF32 peak, to an A100 at the TF32 peaks' 3.2x
        (KernelBench level 1 #60: 10.0 ms on the H200; A100 26 ms predicted, 6.0 ms measured)."""
        work_us = max(time_us - self.floor_us, 0.0)
        profiled_peak, _ = self._profiled_roofline.peak(cost)
        peak, roof = self._fallback.peak(cost)
        compute_us = min(work_us, cost.flops / profiled_peak * 1e6)
        streaming_us = min(work_us, cost.bytes / self._streaming_bytes_per_us())
        bandwidth = self._dram_ratio()
        issue = self._sm_cycles_ratio(fallback=profiled_peak / peak)
        beyond_us = work_us - max(compute_us, streaming_us)
        carried_us = max(compute_us * profiled_peak / peak, streaming_us * bandwidth) + beyond_us * issue
        return self.floor_us + carried_us * self.achieved.factor(rate_class(kernel_family(cost), roof))

    def _sm_cycles_known(self) -> bool:
        return bool(self.gpu.sm_cycles_per_s and self.profiled_gpu.sm_cycles_per_s)

    def _sm_cycles_ratio(self, fallback: float, blocks: int | None = None) -> float:
        """Profiled GPU's SMs x clock over this GPU's (devices.GPU.sm_cycles_per_s): how time that work spread over
        the SMs sets carries from one GPU to the other (the three carries above use it). With `blocks` thread
        blocks, only the SMs they occupy count on each GPU where there are fewer blocks than SMs. `fallback`
        where either GPU lacks the figures."""
        if not self._sm_cycles_known():
            return fallback
        here, there = self.gpu.sm_cycles_per_s, self.profiled_gpu.sm_cycles_per_s
        if blocks:
            here *= min(blocks, self.gpu.sm_count) / self.gpu.sm_count
            there *= min(blocks, self.profiled_gpu.sm_count) / self.profiled_gpu.sm_count
        return there / here

    def _bandwidth_ratio(self) -> float:
        """Profiled GPU's DRAM bandwidth over this GPU's, times this GPU's achieved factor for memory-bound
        kernels."""
        return self._dram_ratio() * self.achieved.factor(MEMORY)

    def _dram_ratio(self) -> float:
        """Profiled GPU's datasheet DRAM bandwidth over this GPU's: how a time set by streaming bytes carries."""
        return self.profiled_gpu.mem_bw_bytes_per_s / self.gpu.mem_bw_bytes_per_s


# -- kernel-time models by kind ------------------------------------------------------------------------------
Timed = tuple["float | None", str, float]  # (time on this GPU in µs or None: no time, its source, its uncertainty)


@dataclass(frozen=True)
class TimeModel:
    """One kind of kernel-time model of a calibrated profile: which costs it prices (`prices`, given the model
    and the op's Cost) and its time for one (`time`, given also the share of its bytes left warm in L2).
    CalibratedModel.estimate asks KERNEL_TIME_MODELS in order and takes the first that prices the cost, even
    where that model then finds no time (a GEMM shape without a table or a fit): the op falls to the datasheet
    roofline rather than to a model of another kind."""
    name: str
    prices: Callable[[CalibratedModel, Cost], bool]
    time: Callable[[CalibratedModel, Cost, float], Timed]


def _timings(model: CalibratedModel) -> dict:
    return model.profile["timings"]


def _shape_time(model: CalibratedModel, cost: Cost, l2_warm: float) -> Timed:
    found = model._shape_estimate(cost)
    if found is None:
        return None, "", 0.0
    time_us = model._carried_compute_us(cost, found[0]) if model.transferred else found[0]
    return time_us, found[1].source, found[1].uncertainty


def _grouped_gemm_time(model: CalibratedModel, cost: Cost, l2_warm: float) -> Timed:
    bytes_ratio = model._bandwidth_ratio() if model.transferred else 1.0
    return (grouped_gemm_us(_timings(model)["grouped_gemm"], cost.flops, cost.bytes, model._compute_ratio(cost),
                            bytes_ratio), "fitted (grouped GEMM rates)", MEMORY_CURVE_UNCERTAINTY)


def _blocks_time(model: CalibratedModel, cost: Cost, l2_warm: float) -> Timed:
    _, channels, n, hw, itemsize = cost.key
    time_us = batch_norm_blocks_us(_timings(model)[BLOCK_SECTIONS[cost.kind]], channels, n, hw, itemsize,
                                   model.gpu.sm_count, l2_warm)
    if model.transferred:
        time_us = model._carried_blocks_us(time_us, cost.bytes)
    return time_us, "fitted (blocks walking rows or channels)", MEMORY_CURVE_UNCERTAINTY


def _linalg_time(model: CalibratedModel, cost: Cost, l2_warm: float) -> Timed:
    # a latency-bound chain of panel kernels has no datasheet ratio: on another GPU the profiled GPU's time
    # stands as it is (its bytes at the pointwise curve had priced a batched eigh 160x under)
    return (linalg_time_us(_timings(model)["linalg"][cost.key[1]], cost.key[2], cost.key[3]),
            "measured (torch.linalg calls)", MEMORY_CURVE_UNCERTAINTY)


def _value_index_time(model: CalibratedModel, cost: Cost, l2_warm: float) -> Timed:
    """A reduction that keeps an index: its value-only kind's curve times the profile's factor
    (calibrate/value_index.py)."""
    factors = _timings(model)["value_index"]
    factor = factors.get(factor_key(cost), factors.get(base_kind(cost.kind), 1.0))
    time_us = model._memory_estimate_us(dataclasses.replace(cost, kind=base_kind(cost.kind)), l2_warm)
    return (None if time_us is None else time_us * factor), "interpolated (value-and-index factor)", \
        MEMORY_CURVE_UNCERTAINTY


# A cuFFT kernel's time at the smallest transforms: the median per kernel of the single-kernel and two-kernel
# transforms of at most 64 K points on the cuFFT grid (calibrate/grids.py fft_grid), 3.0 µs (2.4-4.7 but two
# large single kernels), where a pointwise kernel of those bytes runs near 1.6. Measured on an H100
# (validation/h100/h100_fft_grid_raw.json.gz: no H200 was lent that day); a kernel this small is bound by the
# SMs' clock and latency, which the H100 and H200 share (132 SMs at the same clock), not by DRAM.
CUFFT_KERNEL_FLOOR_US = 3.0


def _fft_time(model: CalibratedModel, cost: Cost, l2_warm: float) -> Timed:
    """cuFFT's kernels (costs/fft.py: a pass over the data per kernel): the passes' bytes on the memory curves,
    each kernel at least CUFFT_KERNEL_FLOOR_US."""
    time_us = model._memory_estimate_us(cost, l2_warm)
    if time_us is None:
        return None, "", MEMORY_CURVE_UNCERTAINTY
    return max(time_us, cost.kernels * CUFFT_KERNEL_FLOOR_US), "interpolated (cuFFT passes)", MEMORY_CURVE_UNCERTAINTY


def _fitted(method: Callable[[CalibratedModel, Cost], "float | None"], source: str,
            uncertainty: float = MEMORY_CURVE_UNCERTAINTY) -> Callable[[CalibratedModel, Cost, float], Timed]:
    """A time function from a CalibratedModel method of one Cost, labelled with its source."""
    return lambda model, cost, l2_warm: (method(model, cost), source, uncertainty)


def _with_l2(method: Callable[[CalibratedModel, Cost, float], "float | None"], source: str = "interpolated",
             uncertainty: float = MEMORY_CURVE_UNCERTAINTY) -> Callable[[CalibratedModel, Cost, float], Timed]:
    """A time function from a CalibratedModel method of one Cost and its warm L2 share, labelled with its source
    (by default read off the memory curves)."""
    return lambda model, cost, l2_warm: (method(model, cost, l2_warm), source, uncertainty)


# Every kind of kernel-time model, in the order they are asked: the specific before the general, the memory
# curves last (any memory-bound kind the profile measured, or a stand-in for it: MEMORY_FALLBACK).
KERNEL_TIME_MODELS = (
    TimeModel("cudnn_rnn", lambda m, c: c.kind == "cudnn_rnn" and bool(c.key),
              _fitted(CalibratedModel._cudnn_rnn_us, "interpolated", RNN_FIT_UNCERTAINTY)),
    TimeModel("shape", lambda m, c: c.kind in ("gemm", "conv", "attention") and bool(c.key), _shape_time),
    TimeModel("grouped_gemm", lambda m, c: c.kind == "grouped_gemm" and "grouped_gemm" in _timings(m),
              _grouped_gemm_time),
    TimeModel("foreach_blocks", lambda m, c: c.kind == "foreach" and "foreach_blocks" in _timings(m)
              and c.key[:1] == ("chunks",),
              _with_l2(CalibratedModel._foreach_time_us, "fitted (multi_tensor_apply blocks)")),
    TimeModel("blocks", lambda m, c: c.kind in BLOCK_SECTIONS and is_blocks_key(c.key)
              and BLOCK_SECTIONS[c.kind] in _timings(m), _blocks_time),
    TimeModel("sparse", lambda m, c: c.key[:1] in SPARSE_KEYS
              and SPARSE_SECTIONS[c.key[0]] in _timings(m).get("sparse", {}),
              _fitted(CalibratedModel._sparse_time_us, "fitted (sparse kernels)")),
    TimeModel("spmm", lambda m, c: c.key[:1] in ((SPMM_KEY,), (SPMM_PARTITION_KEY,)),
              _fitted(CalibratedModel._spmm_time_us, "fitted (cuSPARSE SpMM, measured on an H100)")),
    TimeModel("pool_windows", lambda m, c: c.key[:1] == (WINDOW_KEY,)
              and c.key[1] in _timings(m).get("pool_windows", {}),
              _fitted(CalibratedModel._window_time_us, "fitted (pooling window taps)")),
    TimeModel("spatial_softmax", lambda m, c: c.key[:1] == (SPATIAL_SOFTMAX_KEY,)
              and c.key[1] in _timings(m).get("spatial_softmax", {}),
              _fitted(CalibratedModel._spatial_softmax_time_us, "fitted (spatial softmax geometry)")),
    TimeModel("small_index", lambda m, c: c.key[:1] in ((SMALL_INDEX_KEY,), (SMALL_INDEX_ADD_KEY,))
              and c.key[1] in _timings(m).get("unit_rates", {}).get(SMALL_INDEX_SECTIONS[c.key[0]], {}),
              _with_l2(CalibratedModel._small_index_time_us, "fitted (small-index kernel)")),
    TimeModel("nll_walk", lambda m, c: c.key[:1] == (NLL_WALK_KEY,)
              and c.key[1] in _timings(m).get("unit_rates", {}).get("nll_walk", {}),
              _with_l2(CalibratedModel._nll_walk_time_us, "fitted (nll_loss block walk)")),
    TimeModel("unit_rates", lambda m, c: c.key[:1] in UNIT_KEYS and "unit_rates" in _timings(m),
              _fitted(CalibratedModel._unit_rate_time_us, "interpolated")),
    TimeModel("generated", lambda m, c: c.kind in _timings(m).get("generated", {}),
              _with_l2(CalibratedModel._generated_time_us, "fitted (generated kernels)", GENERATED_FIT_UNCERTAINTY)),
    TimeModel("arithmetic", lambda m, c: c.kind == ARITHMETIC_KIND, _with_l2(CalibratedModel._arithmetic_bound_us)),
    TimeModel("linalg", lambda m, c: c.key[:1] == (SOLVER_KEY,) and c.key[1] in _timings(m).get("linalg", {}),
              _linalg_time),
    TimeModel("value_index", lambda m, c: c.kind.endswith(INDEX_SUFFIX) and "value_index" in _timings(m),
              _value_index_time),
    TimeModel("fft", lambda m, c: c.kind == "fft", _fft_time),
    TimeModel("memory_curves", lambda m, c: c.kind not in COMPUTE_KINDS, _with_l2(CalibratedModel._memory_estimate_us)),
)
