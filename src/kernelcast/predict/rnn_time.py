"""Kernel time of cuDNN's per-step RNN kernels and persistent RNN kernels: the feature functions and the
predictions of the fit scripts/fit/fit_rnn_times.py makes from validation/probes/probe_rnn.json (the profile's
`rnn` section). Pure functions of a part's shape (costs/rnn.py RnnPart) and the fitted numbers.

One step of the STANDARD algorithm runs the recurrent GEMM (batch x gates*hidden x hidden) and the elementwise
cell; its backward the cell backward and the data GEMM (batch x hidden x gates*hidden, split-K with a memset when
deep). The fit is linear in the features below, per pass: the GEMM's time is an intercept for the kind of kernel
cuBLAS runs at that batch (a GEMV at batch 1; small-batch kernels up to batch 16 where the gate width is at most
1024, as the probe's packed rows and the zoo ran at hidden 256; tensor-core tiles otherwise) plus a term in the
recurrent weight's megabytes and one in the gate width (the data GEMM's depth); the cell an offset per mode
plus a term in batch x hidden. fp16 and bf16 steps are
the fp32 prediction times a ratio measured at one point (2-layer LSTM, hidden 512, batch 32).
Persistent kernels: time per step against hidden size, per pass and mode, interpolated log-log between the
measured sizes (batch 32) and held flat beyond them.
On another GPU (unvalidated) the size-dependent terms scale by the bandwidth ratio and the per-launch intercepts
and persistent kernels stay as measured.
"""

from __future__ import annotations

import bisect
import math

SMALL_BATCH_MAX = 16  # batches 2..16 run cuBLAS's small-batch kernels where the gate width is at most ...
SMALL_BATCH_MAX_GATE_WIDTH = 1024
HALF_DTYPES = ("float16", "bfloat16")
MODE_OFFSETS = ("gru", "rnn")  # the cell's offset from the LSTM's
STEP_FEATURES = ("gemv", "small_batch", "tile", "weight_mb", "gate_width_1e3", "gru", "rnn", "batch_hidden_1e4",
                 "memset")
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def regime(batch: int, gate_width: int) -> str:
    if batch <= 1:
        return "gemv"
    if batch <= SMALL_BATCH_MAX and gate_width <= SMALL_BATCH_MAX_GATE_WIDTH:
        return "small_batch"
    return "tile"


def step_features(mode: str, batch: int, hidden: int, dtype: str, memset: bool) -> tuple[float, ...]:
    """The features of one step's kernels (per pass the same; the backward's memset flag is its split-K memset).
    The recurrent weight is counted in fp32 bytes: the half-precision ratio scales the whole step."""
    gates = GATES.get(mode, 1)
    kind = regime(batch, gates * hidden)
    weight_mb = gates * hidden * hidden * DTYPE_BYTES["float32"] / 1e6
    return (float(kind == "gemv"), float(kind == "small_batch"), float(kind == "tile"), weight_mb,
            gates * hidden / 1e3, float(mode == "gru"), float(mode.startswith("rnn")), batch * hidden / 1e4,
            float(memset))


# The features that grow with size (the rest are per-launch latencies): on another GPU only these scale with
# its memory bandwidth.
SIZE_FEATURES = ("weight_mb", "gate_width_1e3", "batch_hidden_1e4")


def step_time_us(fit: dict, pass_: str, mode: str, batch: int, hidden: int, dtype: str, memset: bool,
                 size_scale: float = 1.0) -> float:
    """One step's kernels, in µs, from the fitted coefficients of the pass; `size_scale` multiplies the
    size-dependent terms (1 on the profiled GPU)."""
    coef = fit["step"][pass_]["coefficients"]
    x = step_features(mode, batch, hidden, dtype, memset)
    t = sum(coef[name] * v * (size_scale if name in SIZE_FEATURES else 1.0) for name, v in zip(STEP_FEATURES, x))
    if dtype in HALF_DTYPES:
        t *= fit["step"][pass_]["half_ratio"]
    return t


def _interp(points: list[list[float]], x: float) -> float:
    """Log-log interpolation on [x, y] points sorted by x, flat beyond the ends."""
    xs = [p[0] for p in points]
    if x <= xs[0]:
        return points[0][1]
    if x >= xs[-1]:
        return points[-1][1]
    i = bisect.bisect_left(xs, x)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    w = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(y0) + w * (math.log(y1) - math.log(y0)))


def persist_time_us(fit: dict, pass_: str, mode: str, hidden: int, steps: int) -> float:
    """A persistent kernel over `steps` steps: the fitted time per step at this hidden size, times the steps."""
    table = fit["persist"][pass_]
    points = table.get(mode) or table.get("rnn_tanh" if mode.startswith("rnn") else "lstm")
    return _interp(points, hidden) * steps


def bias_grad_time_us(fit: dict, mode: str, nbytes: float, size_scale: float = 1.0) -> float:
    """cuDNN's bias-gradient reduction over the gate gradients (GENERIC/GRU_elementWise_bp2)."""
    fixed_us, bytes_per_us = fit["bias_grad"].get(mode) or fit["bias_grad"]["lstm"]
    return fixed_us + nbytes / bytes_per_us * size_scale
