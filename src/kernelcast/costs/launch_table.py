"""Measured GPU work items per GEMM and convolution shape.

cuBLAS and cuDNN pick kernels per shape: a split-K GEMM adds a reduce kernel, a cooperative one a workspace
memset, a small fp32 output with a deep K cuBLAS's "largek" path (memset, scale, GEMM, bias epilogue: 4 items);
a cuDNN convolution may add layout transforms and memsets. The table comes from a device profile
(`kernelcast calibrate`). GEMMs: where the profile holds a fitted classifier over the table's rows
(`gemm_model`, calibrate/launch_model.py), it decides; otherwise, and for convolutions, the nearest row does:
the one closest in log2 of the sizes, among rows of the same dtype and layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from kernelcast.records import DTYPE_BYTES

from .conv_backend import NATIVE_DEPTHWISE, conv_backend
from .tree_model import TreeClassifier

# A different kernel size or stride is a different kind of convolution: weigh it above any size difference.
CONV_SHAPE_MISMATCH_PENALTY = 100.0


def log2_size(x: float) -> float:
    """log2 of a size, for distances between shapes (sizes below 1 count as 1)."""
    return math.log2(max(x, 1))


# cuBLAS's fast GEMM kernels need every matrix's leading dimension to be a multiple of 16 bytes; otherwise it
# picks slower kernels (cuBLAS docs, "Tensor Core usage": lda/ldb/ldc alignment). Measured on the H200: the
# GPT-2 lm_head with N = 50257 runs 7.5x slower than with N = 50304 (docs/validation.md).
LEADING_DIM_ALIGNMENT_BYTES = 16


@lru_cache(maxsize=None)  # looked up for every profile row on every GEMM: compute each shape once
def gemm_alignment(key: tuple) -> int:
    """Bytes (1 to 16) that every leading dimension of A (M x K), B (K x N) and the row-major output C is a
    multiple of. Measured on the H200 (bf16): 16 gets cuBLAS's fast kernels; an even vocabulary (4 bytes) a
    CUTLASS sm80 kernel at about a third of their speed; an odd one (2 bytes) an sm75 kernel at about a
    seventh (validation/h200_calibration_raw.json)."""
    dtype, a_t, b_t, _, m, n, k = key
    itemsize = DTYPE_BYTES.get("float32" if dtype == "tf32" else dtype, 2)
    lda = m if a_t else k
    ldb = k if b_t else n
    alignment = LEADING_DIM_ALIGNMENT_BYTES
    for ld in (lda, ldb, n):
        while ld * itemsize % alignment:
            alignment //= 2
    return max(alignment, 1)


def same_alignment(rows: list, key: tuple) -> list:
    """The rows measured at the key's alignment class, else at the nearest one, else all of them."""
    if not rows:
        return rows
    want = gemm_alignment(tuple(key))
    by_row = [(gemm_alignment(tuple(r[:7])), r) for r in rows]
    nearest = min({a for a, _ in by_row}, key=lambda a: (abs(math.log2(a) - math.log2(want)), -a))
    return [r for a, r in by_row if a == nearest]


GEMM_DTYPES = ("bfloat16", "float16", "float32", "tf32", "float8_e4m3fn")
GEMM_FEATURES = (*(f"dtype={d}" for d in GEMM_DTYPES), "a_transposed", "b_transposed", "bias", "log2 M",
                 "log2 N", "log2 K", "log2 M*N", "log2 K/(M*N)", "log2 K/max(M,N)", "log2 min(M,N)",
                 "log2 alignment bytes", "aligned 16 bytes")


def gemm_features(dtype: str, a_t: bool, b_t: bool, bias: bool, m: int, n: int, k: int) -> list[float]:
    """The launch-count classifier's inputs for one GEMM (names: GEMM_FEATURES). cuBLAS's heuristics key on the
    dtype, the layout, the output size against the depth (split-K and largek paths for small M*N and large K)
    and the leading dimensions' alignment (gemm_alignment)."""
    lm, ln, lk = log2_size(m), log2_size(n), log2_size(k)
    alignment = gemm_alignment((dtype, a_t, b_t, bias, m, n, k))
    return [*(float(dtype == d) for d in GEMM_DTYPES), float(a_t), float(b_t), float(bias), lm, ln, lk, lm + ln,
            lk - lm - ln, lk - max(lm, ln), min(lm, ln), math.log2(alignment),
            float(alignment == LEADING_DIM_ALIGNMENT_BYTES)]


CONV_PASSES = ("conv_fwd", "conv_bwd_input", "conv_bwd_weight")
CONV_DTYPES = ("bfloat16", "float16", "float32")
CONV_FEATURES = (*(f"pass={p}" for p in CONV_PASSES), *(f"dtype={d}" for d in CONV_DTYPES), "channels_last", "dims",
                 "transposed", "depthwise", "native depthwise kernel", "log2 C_in", "log2 C_out", "log2 groups",
                 "log2 C_in/groups", "log2 C_out/groups", "kernel", "stride", "log2 size", "log2 output size",
                 "log2 batch", "log2 M", "log2 N", "log2 K", "log2 M*N*K", "C_in/groups 16-byte aligned",
                 "C_out/groups 16-byte aligned")


def conv_features(key: tuple) -> list[float]:
    """The conv launch-count classifier's inputs for one conv_key (names: CONV_FEATURES). cuDNN's engine choice
    keys on the pass, dtype and layout, the implicit GEMM's M (batch x output positions), N (C_out per group) and
    K (C_in per group x taps), the groups, the filter and stride, and the channels' alignment."""
    pass_, dtype, channels_last, c_in, c_out, kernel, stride, size, groups, batch, dims, transposed = key[:12]
    groups = max(groups, 1)
    out = size * stride if transposed else (size + 2 * (kernel // 2) - kernel) // stride + 1
    m, n, k = batch * max(out, 1) ** dims, c_out / groups, c_in / groups * kernel ** dims
    itemsize = DTYPE_BYTES.get(dtype, 2)
    return [*(float(pass_ == p) for p in CONV_PASSES), *(float(dtype == d) for d in CONV_DTYPES),
            float(channels_last), float(dims), float(transposed), float(groups == c_in and groups > 1),
            float(conv_backend(key) == NATIVE_DEPTHWISE), log2_size(c_in), log2_size(c_out), log2_size(groups),
            log2_size(c_in / groups), log2_size(n), float(kernel), float(stride), log2_size(size), log2_size(out),
            log2_size(batch), log2_size(m), log2_size(n), log2_size(k), log2_size(m) + log2_size(n) + log2_size(k),
            float(c_in // groups * itemsize % LEADING_DIM_ALIGNMENT_BYTES == 0),
            float(c_out // groups * itemsize % LEADING_DIM_ALIGNMENT_BYTES == 0)]


def conv_label_items(label: int, groups: int) -> int:
    """Work items of a conv launch class: a positive class is that many items; a negative one, -class items per
    group, cuDNN running the convolution once per group (calibrate/launch_model.py labels them)."""
    return label if label > 0 else -label * max(groups, 1)


@dataclass(frozen=True)
class LaunchTable:
    gemm: tuple[tuple, ...]  # (dtype, a_transposed, b_transposed, bias, M, N, K, work_items)
    conv: tuple[tuple, ...]  # (*conv_key, work_items[, per-group items]): see costs.matmul.conv_key
    source: str = ""
    gemm_model: TreeClassifier | None = None  # fitted over `gemm` (calibrate/launch_model.py)
    conv_model: TreeClassifier | None = None  # fitted over `conv`
    # items by key: a step repeats its few GEMM and conv shapes many times
    _gemm_items: dict = field(default_factory=dict, compare=False, repr=False)
    _conv_items: dict = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def from_profile(section: dict) -> "LaunchTable":
        gemm_model, conv_model = section.get("gemm_model"), section.get("conv_model")
        return LaunchTable(tuple(tuple(r) for r in section.get("gemm", ())),
                           tuple(tuple(r) for r in section.get("conv", ())), section.get("source", ""),
                           TreeClassifier.from_dict(gemm_model["classifier"]) if gemm_model else None,
                           TreeClassifier.from_dict(conv_model["classifier"]) if conv_model else None)

    def gemm_items(self, dtype: str, a_t: bool, b_t: bool, bias: bool, m: int, n: int, k: int) -> int | None:
        """Work items of one cuBLAS GEMM: the fitted classifier's answer where the profile has one for this
        dtype, else the nearest measured row's; None for a dtype the profile never measured."""
        key = (dtype, a_t, b_t, bias, m, n, k)
        if key not in self._gemm_items:
            if self.gemm_model is not None and dtype in GEMM_DTYPES and any(r[0] == dtype for r in self.gemm):
                self._gemm_items[key] = int(self.gemm_model.predict(gemm_features(*key)))
            else:
                self._gemm_items[key] = self._lookup_gemm_items(*key)
        return self._gemm_items[key]

    def _lookup_gemm_items(self, dtype: str, a_t: bool, b_t: bool, bias: bool, m: int, n: int, k: int) -> int | None:
        def same(row, with_bias: bool) -> bool:
            return row[0] == dtype and row[1] == a_t and row[2] == b_t and (row[3] == bias or not with_bias)

        for with_bias in (True, False):
            rows = same_alignment([r for r in self.gemm if same(r, with_bias)], (dtype, a_t, b_t, bias, m, n, k))
            if rows:
                here = (log2_size(m), log2_size(n), log2_size(k))
                best = min(rows, key=lambda r: math.dist((log2_size(r[4]), log2_size(r[5]), log2_size(r[6])), here))
                return int(best[7])
        return None

    def conv_items(self, key: tuple) -> int | None:
        """Work items of one cuDNN convolution pass (conv_key): the fitted classifier's answer where the profile
        has one for this pass and dtype, else the nearest measured convolution's of the same pass, dtype and
        layout; None where none was measured.

        The likeliest class, not the classifier's expected count: on a second held-out draw of 2700 passes the
        expectation summed better over random convolutions (scripts/device/probe_conv_launches.py: 40 dense passes
        5.0% off median against 10.5%), but on the zoo's models, whose common shapes the classifier names with
        confidence, it put 257 work items off in all against 238 (validation/conv_launch_model_2.json, 2026-12-01)."""
        key = tuple(key)
        if key not in self._conv_items:
            self._conv_items[key] = self._lookup_conv_items(key)
        return self._conv_items[key]

    def _lookup_conv_items(self, key: tuple) -> int | None:
        rows = [r for r in self.conv if tuple(r[:3]) == key[:3] and len(r) > len(key)]
        if not rows:
            return None
        if self.conv_model is not None:
            return conv_label_items(int(self.conv_model.predict(conv_features(key))), key[8])
        return int(min(rows, key=lambda r: conv_distance(r, key))[len(key)])


def conv_shape(key: tuple) -> tuple:
    """(coordinates, kind) of a conv key: log2 of batch, channels, size and groups; and what must match for two
    convolutions to run the same kind of kernel (dims, kernel, stride, transposed, depthwise or not, backend)."""
    _, _, _, c_in, c_out, kernel, stride, size, groups, batch, dims, transposed = key[:12]
    coords = (log2_size(batch), log2_size(c_in), log2_size(c_out), log2_size(size), log2_size(groups))
    return coords, (dims, kernel, stride, transposed, groups == c_in and groups > 1, conv_backend(key))


def conv_distance(row: tuple, key: tuple) -> float:
    """Distance between a measured conv row and a key: log2 sizes, plus CONV_SHAPE_MISMATCH_PENALTY for each
    difference in the kind of kernel (a 1x1 and a 7x7 convolution run different cuDNN kernels)."""
    (a, kind_a), (b, kind_b) = conv_shape(tuple(row[:len(key)])), conv_shape(key)
    return math.dist(a, b) + CONV_SHAPE_MISMATCH_PENALTY * sum(x != y for x, y in zip(kind_a, kind_b))
