"""Fit the cuDNN RNN time model (predict/rnn_time.py) to a GPU probe's kernel times (issue 35: the fit's maths in the
library; scripts/fit/fit_rnn_times.py runs it on validation/probes/probe_rnn.json and writes the profile's `rnn`
section).

From every configuration scripts/device/probe_rnn.py measured (kernels by name, count and total µs per pass):
- per pass, the per-step kernels of the STANDARD algorithm (forward: recurrent GEMM, split-K reduction where
  cuBLAS adds one, cell; backward: cell backward, data GEMM, its split-K memset) by least squares, linear in
  rnn_time.step_features, over fp32 rows; a packed row contributes the sum over its steps (its batch per step is
  known from the probe's lengths). The layer input GEMMs and the backward's input-gradient GEMMs are taken out
  of a row's GEMM time first: the launch rule (costs/rnn.py) says how many there are, and they are the slowest
  GEMM kernels of the pass (they run over many rows). fp16/bf16: the ratio of their steps to the fp32 fit
  (fit_steps);
- the persistent kernels' time per step against hidden size, per pass and mode (fit_persist);
- the bias-gradient reduction: fixed µs + bytes / rate, per mode (fit_bias_grad).
"""

from __future__ import annotations

import statistics

import numpy as np
import torch

from kernelcast.costs import DEFAULT_CONTEXT
from kernelcast.costs.rnn import RnnShape, backward_parts, forward_parts
from kernelcast.predict.rnn_time import STEP_FEATURES, step_features
from kernelcast.records import OpRecord, TensorMeta

MODES = {"lstm": 2, "gru": 3, "rnn_tanh": 1}


def _contiguous(shape, dtype) -> TensorMeta:
    stride, step = [], 1
    for n in reversed(shape):
        stride.append(step)
        step *= max(n, 1)
    return TensorMeta(tuple(shape), dtype, tuple(reversed(stride)), "cuda")


def packed_lengths(steps: int, batch: int) -> list[int]:
    """The sequence lengths of a packed batch as scripts/device/probe_rnn.py and probe_rnn_memory.py draw them: spaced
    evenly from `steps` down to steps // 4 (torch.linspace, truncated to integers), longest first."""
    return torch.linspace(steps, max(steps // 4, 1), batch).long().tolist()


def probe_shape(c: dict) -> RnnShape:
    """The _cudnn_rnn call scripts/device/probe_rnn.py made for one configuration (batch-first input; a packed one's
    lengths by packed_lengths)."""
    steps, batch = c["steps"], c["batch"]
    if c["packed"]:
        lengths = packed_lengths(steps, batch)
        batch_sizes = tuple(sum(1 for n in lengths if n > t) for t in range(steps))
        x = _contiguous((sum(batch_sizes), c["input"]), c["dtype"])
    else:
        batch_sizes, x = (), _contiguous((batch, steps, c["input"]), c["dtype"])
    args = {"input": x, "mode": MODES[c["mode"]], "hidden_size": c["hidden"], "proj_size": 0,
            "num_layers": c["layers"], "bidirectional": c["bidirectional"], "batch_first": True,
            "batch_sizes": batch_sizes, "dropout": c["dropout"], "train": c["train"], "weight_stride0": 4}
    return RnnShape(OpRecord(index=0, op="aten._cudnn_rnn.default", args=args, outputs=()))


def kernel_class(name: str) -> str:
    for marker, cls in (("Memset", "memset"), ("Memcpy", "memcpy"), ("at::native", "aten"), ("Persist", "persist"),
                        ("elemWiseRNNcell", "cell"), ("elementWise_bp1", "cell"), ("elementWise_bp2", "bias"),
                        ("splitKreduce", "split_k"), ("dropout", "other"), ("accum", "other"),
                        ("addBias", "other")):
        if marker in name:
            return cls
    return "gemm" if "gemm" in name or "gemv" in name or "nvjet" in name else "other"


def _weight_gemm(name: str) -> bool:
    """The weight-gradient GEMMs of a backward pass: cuDNN runs them transposed-A (nt)."""
    return "_nt_" in name or name.endswith(("NTT", "NTN"))


def _slowest_first(kernels: dict, names: list[str], count: int) -> float:
    """µs of the `count` slowest kernels among `names` (by their mean time)."""
    total = 0.0
    for name in sorted(names, key=lambda n: -kernels[n][1] / kernels[n][0]):
        take = min(count, kernels[name][0])
        total += take * kernels[name][1] / kernels[name][0]
        count -= take
        if count <= 0:
            break
    return total


def _step_parts(parts) -> list:
    return [p for p in parts if p.what == "step"]


def step_equation(parts) -> np.ndarray:
    """Sum of the features of every step of the call (the per-step memset when the rule gives one)."""
    x = np.zeros(len(STEP_FEATURES))
    for p in _step_parts(parts):
        pass_, mode, batch, hidden, dtype = p.shape
        memset = pass_ == "bwd" and p.kernels > 2
        x += p.count * np.array(step_features(mode, batch, hidden, dtype, memset))
    return x


def measured_steps_us(kernels: dict, parts, pass_: str) -> float:
    """µs of a pass's per-step kernels: cells, GEMMs and split-K reductions, less the input (forward) or input-
    gradient (backward) GEMMs and, backward, the weight-gradient GEMMs; plus the per-step memsets."""
    gemms = [n for n in kernels if kernel_class(n) == "gemm" and not (pass_ == "bwd" and _weight_gemm(n))]
    n_big = sum(p.count for p in parts if p.what == "gemm" and (pass_ == "fwd" or not p.shape[1]))
    total = sum(kernels[n][1] for n in gemms) - _slowest_first(kernels, gemms, n_big)
    total += sum(us for n, (_, us) in kernels.items() if kernel_class(n) in ("cell", "split_k"))
    step_memsets = sum(p.count * (p.kernels - 2) for p in _step_parts(parts)) if pass_ == "bwd" else 0
    memsets = [(c, us) for n, (c, us) in kernels.items() if kernel_class(n) == "memset"]
    if step_memsets and memsets:
        count, us = memsets[0]
        total += min(step_memsets, count) * us / count
    return total


# Features whose coefficient is a cost that grows with size (µs per MB, per 1000 gate rows, per 10^4 cells): a
# negative fit is no physical time (it would turn negative beyond the measured sizes); such a feature is dropped
# and the rest refitted. The intercepts (GEMV, small-batch, tile) must come out positive as well.
NONNEGATIVE = ("gemv", "small_batch", "tile", "weight_mb", "gate_width_1e3", "batch_hidden_1e4", "memset")


def _least_squares(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    used = [j for j in range(a.shape[1]) if a[:, j].any()]
    while True:
        coef = np.zeros(a.shape[1])
        coef[used] = np.linalg.lstsq(a[:, used], b, rcond=None)[0]
        negative = [j for j in used if STEP_FEATURES[j] in NONNEGATIVE and coef[j] < 0]
        if not negative:
            return coef
        used.remove(min(negative, key=lambda j: coef[j]))


def fit_steps(rows: list) -> dict:
    out = {}
    for pass_, key, parts_of in (("fwd", "forward_kernels", lambda s: forward_parts(s, DEFAULT_CONTEXT)),
                                 ("bwd", "backward_kernels", lambda s: backward_parts(s, DEFAULT_CONTEXT, True))):
        xs, ys, half, names = [], [], [], []
        for i, row in enumerate(rows):
            c = row["config"]
            if not row.get(key) or (pass_ == "bwd" and not c["train"]):
                continue
            shape = probe_shape(c)
            parts = parts_of(shape)
            if not _step_parts(parts):
                continue  # a persistent algorithm
            x, y = step_equation(parts), measured_steps_us(row[key], parts, pass_)
            (half if c["dtype"] != "float32" else xs).append((i, x, y))
        a = np.array([x for _, x, _ in xs])
        b = np.array([y for _, _, y in xs])
        coef = _least_squares(a, b)
        predicted = a @ coef
        errors = {str(i): round(float(p / y - 1.0), 4) for (i, _, y), p in zip(xs, predicted)}
        ratio = statistics.mean(y / float(x @ coef) for _, x, y in half) if half else 1.0
        abs_errors = sorted(abs(e) for e in errors.values())
        out[pass_] = {"coefficients": {n: round(float(v), 5) for n, v in zip(STEP_FEATURES, coef)},
                      "half_ratio": round(ratio, 4),
                      "rows": len(xs) + len(half),
                      "error_on_rows": {"median_abs": round(statistics.median(abs_errors), 4),
                                        "max_abs": round(abs_errors[-1], 4), "by_row": errors}}
    return out


def fit_persist(rows: list) -> dict:
    """µs per step of each persistent kernel, per pass and mode, by hidden size (mean over rows)."""
    points: dict = {"fwd": {}, "bwd": {}}
    for row in rows:
        c = row["config"]
        for pass_, key in (("fwd", "forward_kernels"), ("bwd", "backward_kernels")):
            for name, (count, us) in (row.get(key) or {}).items():
                if kernel_class(name) == "persist":
                    points[pass_].setdefault(c["mode"], {}).setdefault(c["hidden"], []).append(us / count / c["steps"])
    return {p: {mode: [[h, round(statistics.mean(v), 4)] for h, v in sorted(by_h.items())]
                for mode, by_h in modes.items()} for p, modes in points.items()}


def fit_bias_grad(rows: list) -> dict:
    """Per mode: (fixed µs, bytes per µs) of the bias-gradient kernel over rows x gate width x item size bytes."""
    samples: dict = {}
    for row in rows:
        c = row["config"]
        shape = probe_shape(c)
        nbytes = shape.rows * shape.gate_width * shape.itemsize
        for name, (count, us) in (row.get("backward_kernels") or {}).items():
            if kernel_class(name) == "bias":
                samples.setdefault(c["mode"], []).append((nbytes, us / count))
    out = {}
    for mode, pts in samples.items():
        a = np.array([[1.0, n] for n, _ in pts])
        fixed, per_byte = np.linalg.lstsq(a, np.array([t for _, t in pts]), rcond=None)[0]
        out[mode] = [round(max(float(fixed), 0.0), 3), round(1.0 / max(float(per_byte), 1e-9), 1)]
    return out


def fit_all(probe: dict, probe_name: str) -> dict:
    """The profile's `rnn` section from a probe document (its `rows`, `device`, `torch`, `cudnn`)."""
    rows = probe["rows"]
    return {"source": "scripts/fit/fit_rnn_times.py", "fitted_on": f"{probe_name}: {probe['device']}, torch "
            f"{probe['torch']}, cuDNN {probe['cudnn']}, {len(rows)} configurations",
            "model": "kernelcast/predict/rnn_time.py", "step": fit_steps(rows), "persist": fit_persist(rows),
            "bias_grad": fit_bias_grad(rows)}
