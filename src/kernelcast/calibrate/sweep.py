"""A designed sweep of the shape space for the compute-bound kernels (GEMM, batched GEMM, convolution, attention),
run by `kernelcast calibrate --sweep`. Microbenchmarks only: no workload is measured.

Design (issue 10: "cover the shape space, not the suite"):
- Sizes come from pools: log-spaced values (two per octave), the decode-shaped small M (1-64, densely), and the odd
  and unaligned values real models use (vocabularies such as 50257, widths such as 770 or 2041). Each case draws its
  sizes from the pools with a seeded generator, so the design is the same on every run and can be re-created here
  (`sweep_cases(...)` is pure) without the device's output.
- Every transpose/alignment class of a linear layer's three GEMMs (x @ W^T, grad @ W, grad^T @ x), plus A @ B and
  addmm with a bias; fp32 with TF32 off and on, bf16, fp16, fp8.
- Convolutions: 1-D and 2-D, kernel 1/3/5/7 (and audio front ends' 10/2), stride 1/2, dense, grouped (32) and
  depthwise, NCHW and NHWC, forward, input gradient and weight gradient measured separately (a backward that wants
  both runs both).
- Attention: each backend CUDA picks, query length 1 (decode) to 8k, head dims 32-256, causal, masked, GQA.

Timing: each case runs once (warm-up, and the op records the cost registry keys it by), then REPS times between CUDA
events, with L2 flushed before each (as triton.testing.do_bench does); the median is kept with the raw times. One
more call per case runs under torch.profiler (in chunks of cases, each inside a record_function range) for the names
and durations of the kernels it launched, which give the launch counts (split-K reduce kernels, cuDNN's layout
transposes) the cost registry looks up.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from kernelcast import progress

REPS = 5
PROFILE_CHUNK = 100  # cases per profiler session (post-processing time grows with the session's events)
CASE_RANGE = "kc_case:"
SEED = 20261130
# A case's FLOPs and bytes are capped so one call stays under a few milliseconds and the sweep under minutes.
MAX_GEMM_FLOPS = {"bfloat16": 4e12, "float16": 4e12, "tf32": 1.5e12, "float32": 2.5e11}  # ~5 ms at each roof
MAX_CONV_FLOPS = 2e12
MAX_BYTES = 1 << 31

# -- size pools ----------------------------------------------------------------------------------------------
DECODE_M = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 48, 64]
LOG_SIZES = [96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
MODEL_WIDTHS = [384, 640, 768, 896, 1024, 1280, 2304, 2560, 3584, 4864, 5120, 5632, 11008, 13824, 14336, 32000,
                50304, 65536]
ODD_SIZES = [7, 77, 100, 197, 770, 999, 1000, 1001, 1023, 2041, 3001, 4095, 5000, 32001, 50257]


@dataclass(frozen=True)
class Case:
    """One microbenchmark: what it is (kind and sizes, as JSON-able params) and how to build its call."""

    kind: str
    params: dict
    build: Callable[[], Callable[[], object]]  # returns the zero-argument call to time


def _pick(rng: random.Random, *pools: list[int]) -> int:
    return rng.choice(rng.choice(pools))


# -- GEMM ----------------------------------------------------------------------------------------------------
GEMM_LAYOUTS = ("linear", "grad_input", "grad_weight", "nn", "addmm_linear")
GEMM_PLAN = {  # dtype -> (cases per layout, layouts)
    "bfloat16": (420, GEMM_LAYOUTS),
    "float32": (160, GEMM_LAYOUTS),
    "tf32": (100, ("linear", "grad_input", "grad_weight")),
    "float16": (100, ("linear", "grad_weight", "nn")),
}
BMM_PLAN = {"bfloat16": 300, "float32": 80, "float16": 60}


class Pool:
    """One flat random buffer per dtype on the device; operands are views of its start (offset 0: 256-byte
    aligned, like the caching allocator's blocks), so the sweep allocates nothing per case."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._flat: dict = {}

    def tensor(self, shape: tuple[int, ...], dtype, slot: int = 0):
        import torch

        numel = math.prod(shape)
        key = (dtype, slot)
        flat = self._flat.get(key)
        if flat is None or flat.numel() < numel:
            size = max(numel, 1 << 20)
            flat = torch.randn(size, device=self.device, dtype=torch.float32).to(dtype)
            self._flat[key] = flat
        return flat[:numel].view(shape)


def _gemm_sizes(rng: random.Random, dtype: str) -> tuple[int, int, int]:
    itemsize = 4 if dtype in ("float32", "tf32") else 2
    while True:
        m = _pick(rng, DECODE_M, LOG_SIZES, LOG_SIZES, ODD_SIZES)
        n = _pick(rng, LOG_SIZES, MODEL_WIDTHS, ODD_SIZES)
        k = _pick(rng, LOG_SIZES, MODEL_WIDTHS, ODD_SIZES)
        if 2.0 * m * n * k <= MAX_GEMM_FLOPS[dtype] and (m * k + k * n + m * n) * itemsize <= MAX_BYTES:
            return m, n, k


def gemm_cases(pool: Pool, scale: float = 1.0) -> Iterator[Case]:
    import torch

    aten = torch.ops.aten
    rng = random.Random(SEED)
    for dtype_name, (count, layouts) in GEMM_PLAN.items():
        dtype = torch.float32 if dtype_name == "tf32" else getattr(torch, dtype_name)
        for layout in layouts:
            for _ in range(max(1, int(count * scale))):
                m, n, k = _gemm_sizes(rng, dtype_name)
                params = {"dtype": dtype_name, "layout": layout, "m": m, "n": n, "k": k}

                def build(m=m, n=n, k=k, layout=layout, dtype=dtype):
                    return _gemm_call(pool, layout, dtype, m, n, k)

                yield Case("gemm", params, _with_tf32(build, dtype_name == "tf32"))
    for dtype_name, count in BMM_PLAN.items():
        dtype = getattr(torch, dtype_name)
        for _ in range(max(1, int(count * scale))):
            batch = rng.choice([2, 4, 8, 12, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512])
            m = _pick(rng, DECODE_M, LOG_SIZES[:10], [197, 77, 1000, 100])
            n = _pick(rng, DECODE_M, LOG_SIZES[:10], [197, 77, 1000, 100])
            k = rng.choice([32, 64, 80, 96, 128, 256, 197, 512, 1024, 2048])
            if 2.0 * batch * m * n * k > MAX_GEMM_FLOPS[dtype_name] or batch * (m * k + k * n + m * n) * 2 > MAX_BYTES:
                continue
            transposed_b = rng.random() < 0.5  # q @ k^T takes B as a transposed view
            params = {"dtype": dtype_name, "layout": "bmm_nt" if transposed_b else "bmm_nn", "batch": batch,
                      "m": m, "n": n, "k": k}

            def build(batch=batch, m=m, n=n, k=k, t=transposed_b, dtype=dtype):
                a = pool.tensor((batch, m, k), dtype, 0)
                b = pool.tensor((batch, n, k), dtype, 1).transpose(1, 2) if t else pool.tensor((batch, k, n), dtype, 1)
                return lambda: aten.bmm(a, b)

            yield Case("bmm", params, build)
    if hasattr(torch, "float8_e4m3fn"):
        for _ in range(max(1, int(60 * scale))):
            m, n, k = (rng.choice([16, 64, 256, 1024, 2048, 4096, 8192]) for _ in range(3))
            params = {"dtype": "float8_e4m3fn", "layout": "scaled_mm", "m": m, "n": n, "k": k}

            def build(m=m, n=n, k=k):
                a = pool.tensor((m, k), torch.bfloat16, 0).to(torch.float8_e4m3fn)
                b = pool.tensor((n, k), torch.bfloat16, 1).to(torch.float8_e4m3fn).t()  # column-major B
                one = torch.ones((), device=pool.device)
                return lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)

            yield Case("gemm", params, build)


def _gemm_call(pool: Pool, layout: str, dtype, m: int, n: int, k: int) -> Callable[[], object]:
    """The zero-argument call of one GEMM case: the layout names which of a linear layer's GEMMs it is."""
    import torch

    aten = torch.ops.aten
    if layout == "linear":  # x (m, k) @ W (n, k)^T
        a, w = pool.tensor((m, k), dtype, 0), pool.tensor((n, k), dtype, 1)
        return lambda: aten.mm(a, w.t())
    if layout == "addmm_linear":
        a, w, bias = pool.tensor((m, k), dtype, 0), pool.tensor((n, k), dtype, 1), pool.tensor((n,), dtype, 2)
        return lambda: aten.addmm(bias, a, w.t())
    if layout == "grad_input":  # grad (m, n) @ W (n, k)... named so that output is (m, k)
        g, w = pool.tensor((m, n), dtype, 0), pool.tensor((n, k), dtype, 1)
        return lambda: aten.mm(g, w)
    if layout == "grad_weight":  # grad^T (n, m)^T-view @ x (m, k): output (n, k)
        g, x = pool.tensor((m, n), dtype, 0), pool.tensor((m, k), dtype, 1)
        return lambda: aten.mm(g.t(), x)
    a, b = pool.tensor((m, k), dtype, 0), pool.tensor((k, n), dtype, 1)
    return lambda: aten.mm(a, b)


# -- GEMMs at log-uniform sizes: the launch-count classifier's held-out set and extra training rows ----------
# The pools above leave gaps (no N or K under 96 but the odd 7 and 77: a 10-class head never appears), and
# cuBLAS's kernel choice (split-K, largek, epilogues) changes with the output's size against the depth. These
# cases draw M, N and K log-uniformly from 1 to LOG_UNIFORM_MAX, each rounded to a multiple of 64, of 8, or left
# as drawn (a third each), in every dtype and layout.
LOG_UNIFORM_MAX = 16384
LOG_UNIFORM_ROUNDING = (64, 8, 1)
LOG_UNIFORM_PLAN = {"float32": 130, "tf32": 70, "bfloat16": 130, "float16": 70}  # cases per layout
LOG_UNIFORM_SEED = 20261201
# A later draw of a drawn section (gemm_log_uniform_2, ...) seeds its generator this much further on: a sample the
# classifiers fitted on the earlier draws have not seen, to hold out first and then to fit on.
DRAW_SEED_STEP = 1000
DRAWS = 3


def _log_uniform_size(rng: random.Random) -> int:
    raw = 2 ** rng.uniform(0, math.log2(LOG_UNIFORM_MAX))
    multiple = rng.choice(LOG_UNIFORM_ROUNDING)
    return max(multiple, int(round(raw / multiple)) * multiple)


def gemm_log_uniform_cases(pool: Pool, scale: float = 1.0, draw: int = 1) -> Iterator[Case]:
    """GEMMs at log-uniform sizes (LOG_UNIFORM_PLAN); each `draw` is another sample from the same law."""
    import torch

    rng = random.Random(LOG_UNIFORM_SEED + DRAW_SEED_STEP * (draw - 1))
    for dtype_name, count in LOG_UNIFORM_PLAN.items():
        dtype = torch.float32 if dtype_name == "tf32" else getattr(torch, dtype_name)
        itemsize = 4 if dtype_name in ("float32", "tf32") else 2
        for layout in GEMM_LAYOUTS:
            made = 0
            while made < max(1, int(count * scale)):
                m, n, k = (_log_uniform_size(rng) for _ in range(3))
                if 2.0 * m * n * k > MAX_GEMM_FLOPS[dtype_name] or (m * k + k * n + m * n) * itemsize > MAX_BYTES:
                    continue
                made += 1
                params = {"dtype": dtype_name, "layout": layout, "m": m, "n": n, "k": k}

                def build(m=m, n=n, k=k, layout=layout, dtype=dtype):
                    return _gemm_call(pool, layout, dtype, m, n, k)

                yield Case("gemm", params, _with_tf32(build, dtype_name == "tf32"))


# fp32 GEMMs (TF32 off) at the round sizes recurrent cells, small MLPs and decode steps use, every layout, with a
# small batch M (for the weight gradient, the dim the product reduces over). cuBLAS picks among gemv,
# SIMT split-K and FFMA xmma kernels here by closed heuristics, some 20x slower than their neighbours (an
# LSTMCell's 16 x 128 x 512 grad ran a memset and one 32x128 tile for 51 µs; 16 x 128 x 1024 took 6.7): a shape
# between drawn points says little, so the shapes models use are measured themselves.
FP32_ROUND_SMALL = (1, 2, 4, 8, 16, 32, 64)
FP32_ROUND_SIZES = (16, 32, 64, 128, 256, 384, 512, 768, 1024, 2048, 4096)


def gemm_fp32_round_cases(pool: Pool, scale: float = 1.0) -> Iterator[Case]:
    import torch

    for layout in GEMM_LAYOUTS:
        for small, a, b in itertools.product(FP32_ROUND_SMALL, FP32_ROUND_SIZES, FP32_ROUND_SIZES):
            m, n, k = small, a, b  # for grad_weight, m is the batch the product reduces over
            params = {"dtype": "float32", "layout": layout, "m": m, "n": n, "k": k}

            def build(m=m, n=n, k=k, layout=layout):
                return _gemm_call(pool, layout, torch.float32, m, n, k)

            yield Case("gemm", params, build)


def _with_tf32(build: Callable, tf32: bool) -> Callable:
    """A build whose call runs with TF32 matmuls allowed (and restores the setting after each call)."""
    if not tf32:
        return build

    def built():
        import torch

        call = build()

        def call_tf32():
            previous = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                return call()
            finally:
                torch.backends.cuda.matmul.allow_tf32 = previous

        return call_tf32

    return built


# -- convolution ---------------------------------------------------------------------------------------------
CONV2D_CHANNELS = [3, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048]
CONV2D_SIZES = [7, 14, 28, 56, 112, 224]
CONV_PASSES = ("forward", "input_grad", "weight_grad")
CONV2D_CASES = 420
CONV1D_CASES = 120
CONV_TRANSPOSED_CASES = 30


def _conv2d_params(rng: random.Random) -> dict:
    while True:
        kernel = rng.choice([1, 1, 3, 3, 3, 5, 7])
        stride = rng.choice([1, 1, 2])
        groups_mode = rng.choice(["dense", "dense", "dense", "depthwise", "grouped"])
        c_in = rng.choice(CONV2D_CHANNELS)
        if groups_mode == "depthwise":
            c_out, groups = c_in, c_in
        else:
            c_out = rng.choice(CONV2D_CHANNELS[1:])
            groups = 32 if groups_mode == "grouped" and c_in % 32 == 0 and c_out % 32 == 0 and c_in >= 64 else 1
        size = rng.choice(CONV2D_SIZES)
        batch = rng.choice([1, 8, 16, 32, 64, 128])
        dtype = rng.choice(["bfloat16", "bfloat16", "float16", "float32"])
        channels_last = rng.random() < 0.5
        out = (size + 2 * (kernel // 2) - kernel) // stride + 1
        flops = 2.0 * batch * c_out * (c_in // groups) * kernel * kernel * out * out
        nbytes = batch * (c_in * size * size + c_out * out * out) * (4 if dtype == "float32" else 2)
        if flops <= MAX_CONV_FLOPS and nbytes <= MAX_BYTES // 2 and out >= 1:
            return {"dims": 2, "batch": batch, "c_in": c_in, "c_out": c_out, "kernel": kernel, "stride": stride,
                    "groups": groups, "size": size, "dtype": dtype, "channels_last": channels_last}


def _conv1d_params(rng: random.Random) -> dict:
    while True:
        kernel = rng.choice([1, 2, 3, 3, 5, 10])
        stride = rng.choice([1, 1, 2, 5]) if kernel > 1 else 1
        depthwise = rng.random() < 0.25
        c_in = rng.choice([1, 64, 80, 128, 256, 384, 512, 768, 1024]) if not depthwise else rng.choice([256, 512, 768])
        c_out = c_in if depthwise else rng.choice([64, 128, 256, 384, 512, 768, 1024])
        length = rng.choice([100, 500, 1500, 3000, 10000, 48000])
        batch = rng.choice([1, 4, 8, 16, 32])
        dtype = rng.choice(["bfloat16", "float32", "float16"])
        out = (length + 2 * (kernel // 2) - kernel) // stride + 1
        flops = 2.0 * batch * c_out * (1 if depthwise else c_in) * kernel * out
        nbytes = batch * (c_in * length + c_out * out) * (4 if dtype == "float32" else 2)
        if flops <= MAX_CONV_FLOPS and nbytes <= MAX_BYTES // 2 and out >= 1:
            return {"dims": 1, "batch": batch, "c_in": c_in, "c_out": c_out, "kernel": kernel, "stride": stride,
                    "groups": c_in if depthwise else 1, "size": length, "dtype": dtype, "channels_last": False}


def conv_cases(device: str, scale: float = 1.0) -> Iterator[Case]:
    rng = random.Random(SEED + 1)
    designs = [_conv2d_params(rng) for _ in range(max(1, int(CONV2D_CASES * scale)))]
    designs += [_conv1d_params(rng) for _ in range(max(1, int(CONV1D_CASES * scale)))]
    for params in designs:
        for pass_ in CONV_PASSES:
            yield Case("conv", {**params, "pass": pass_}, lambda p={**params, "pass": pass_}: _conv_call(p, device))
    for _ in range(max(1, int(CONV_TRANSPOSED_CASES * scale))):  # U-Net / decoder up-sampling
        c = rng.choice([64, 128, 256, 512])
        params = {"dims": 2, "batch": rng.choice([4, 16, 32]), "c_in": c, "c_out": c // 2, "kernel": rng.choice([2, 4]),
                  "stride": 2, "groups": 1, "size": rng.choice([8, 16, 32, 64]), "dtype": rng.choice(["bfloat16", "float32"]),
                  "channels_last": False, "transposed": True}
        for pass_ in CONV_PASSES:
            yield Case("conv", {**params, "pass": pass_}, lambda p={**params, "pass": pass_}: _conv_call(p, device))


# -- convolutions drawn across the space real models use: the conv launch-count classifier's rows ------------
# The designed conv cases above have groups 1, 32 or depthwise only, kernels 1-7 (10 and 2 in 1-D), and no
# patch embeddings; cuDNN's choice of engine (and with it layout transposes, memsets, split reductions and
# per-group loops) changes with all of those. These cases draw each size from a log-spaced pool that includes
# the odd values models use (3 input channels, 80 mel bins, 7x7 maps), groups from 1 to 64 and depthwise
# (with channel multipliers), kernels up to 128 in 1-D (wav2vec2's positional convolution) and 16 in 2-D (ViT's
# patch embedding, stride = kernel), in every dtype and layout, forward and both gradients.
CONV_LU_CASES = 900
CONV_LU_SEED = 20261202
CONV_LU_CHANNELS = [1, 3, 4, 8, 16, 24, 32, 40, 48, 64, 80, 96, 128, 144, 160, 192, 256, 320, 384, 512, 576, 640,
                    768, 960, 1024, 1280, 2048]
CONV_LU_SIZES_2D = [4, 7, 8, 14, 16, 28, 32, 56, 64, 112, 128, 224, 256]
CONV_LU_SIZES_1D = [16, 50, 100, 256, 500, 1000, 1500, 3000, 8000, 16000, 48000]
CONV_LU_KERNELS_2D = [1, 1, 1, 3, 3, 3, 5, 7, 2, 4, 8, 16]
CONV_LU_KERNELS_1D = [1, 2, 3, 3, 4, 5, 7, 9, 10, 15, 31, 65, 128]
CONV_LU_GROUPS = [2, 4, 8, 16, 32, 64]
CONV_LU_BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
CONV_LU_MAX_BYTES = 1 << 28  # input + output: a profiler chunk of 100 cases stays well inside the GPU's memory


def _conv_lu_params(rng: random.Random) -> dict:
    while True:
        dims = 1 if rng.random() < 0.35 else 2
        kernel = rng.choice(CONV_LU_KERNELS_1D if dims == 1 else CONV_LU_KERNELS_2D)
        patch = dims == 2 and kernel in (2, 4, 8, 16) and rng.random() < 0.7  # patch embedding: stride = kernel
        stride = kernel if patch else rng.choice([1, 1, 1, 2] if dims == 2 else [1, 1, 2, 5])
        mode = rng.choice(["dense", "dense", "depthwise", "grouped", "grouped"])
        c_in = rng.choice(CONV_LU_CHANNELS)
        if mode == "depthwise":
            groups, c_out = c_in, c_in * rng.choice([1, 1, 1, 2])
        else:
            c_out = rng.choice(CONV_LU_CHANNELS[2:])
            fitting = [g for g in CONV_LU_GROUPS if c_in % g == 0 and c_out % g == 0 and g < c_in]
            groups = rng.choice(fitting) if mode == "grouped" and fitting else 1
        size = rng.choice(CONV_LU_SIZES_1D if dims == 1 else CONV_LU_SIZES_2D)
        batch = rng.choice(CONV_LU_BATCHES)
        dtype = rng.choice(["bfloat16", "float16", "float32"])
        channels_last = dims == 2 and rng.random() < 0.5
        out = (size + 2 * (kernel // 2) - kernel) // stride + 1
        flops = 2.0 * batch * c_out * (c_in // groups) * kernel ** dims * out ** dims
        nbytes = batch * (c_in * size ** dims + c_out * out ** dims) * (4 if dtype == "float32" else 2)
        if out >= 1 and kernel <= size and flops <= MAX_CONV_FLOPS / 4 and nbytes <= CONV_LU_MAX_BYTES:
            return {"dims": dims, "batch": batch, "c_in": c_in, "c_out": c_out, "kernel": kernel, "stride": stride,
                    "groups": groups, "size": size, "dtype": dtype, "channels_last": channels_last}


def conv_log_uniform_cases(device: str, scale: float = 1.0, draw: int = 1) -> Iterator[Case]:
    """Convolutions drawn as _conv_lu_params draws them, each in its three passes; each `draw` is another sample."""
    rng = random.Random(CONV_LU_SEED + DRAW_SEED_STEP * (draw - 1))
    for _ in range(max(1, int(CONV_LU_CASES * scale))):
        params = _conv_lu_params(rng)
        for pass_ in CONV_PASSES:
            yield Case("conv", {**params, "pass": pass_}, lambda p={**params, "pass": pass_}: _conv_call(p, device))


def _conv_call(p: dict, device: str) -> Callable[[], object]:
    """One convolution pass of the params. Square by default (size, kernel, stride in every spatial dim, padding
    kernel // 2, or (kernel - stride) // 2 transposed); a case may give per-dim `spatial`, `kernel_shape` and
    `stride_shape`, and `padding`, `output_padding` and `dilation` (one int for every dim)."""
    import torch

    aten = torch.ops.aten
    dtype = getattr(torch, p["dtype"])
    dims, g, transposed = p["dims"], p["groups"], p.get("transposed", False)
    spatial = tuple(p.get("spatial") or (p["size"],) * dims)
    kernel = tuple(p.get("kernel_shape") or (p["kernel"],) * dims)
    stride = list(p.get("stride_shape") or (p["stride"],) * dims)
    x = torch.randn(p["batch"], p["c_in"], *spatial, device=device, dtype=dtype)
    if transposed:
        w = torch.randn(p["c_in"], p["c_out"] // g, *kernel, device=device, dtype=dtype)
        pad = [p["padding"]] * dims if "padding" in p else [max(k - s, 0) // 2 for k, s in zip(kernel, stride)]
    else:
        w = torch.randn(p["c_out"], p["c_in"] // g, *kernel, device=device, dtype=dtype)
        pad = [p["padding"]] * dims if "padding" in p else [k // 2 for k in kernel]
    if p["channels_last"]:
        fmt = torch.channels_last_3d if dims == 3 else torch.channels_last
        x, w = x.to(memory_format=fmt), w.to(memory_format=fmt)
    args = (stride, pad, [p.get("dilation", 1)] * dims, transposed, [p.get("output_padding", 0)] * dims, g)
    if p["pass"] == "forward":
        return lambda: aten.convolution(x, w, None, *args)
    out = aten.convolution(x, w, None, *args)
    grad = torch.randn_like(out)
    mask = [True, False, False] if p["pass"] == "input_grad" else [False, True, False]
    return lambda: aten.convolution_backward(grad, x, w, None, *args, mask)


# -- volumetric and transposed convolutions (issue 30) --------------------------------------------------------
# The designed sweep has no 3-D convolution and few transposed ones (U-Net up-sampling, kernel 2 or 4, stride 2,
# square): every 3-D convolution priced at the datasheet and transposed ones from 2-D neighbours of other
# kinds. These cases draw what video, volumetric and medical models and decoders run: 3-D convolutions
# (clips of 4-64 frames at 8-128 pixels, kernels 1-7 and the factorised (1, k, k) / (k, 1, 1) of R(2+1)D,
# strides 1-2, often padding 0), transposed 3-D and 2-D convolutions (kernels 2-7, strides 1-3, padding,
# output padding, dilation, groups), sizes per dim unequal where models make them so, every dtype and layout,
# forward and both gradients.
CONV_VOLUMETRIC_CASES = 400
CONV_VOLUMETRIC_SEED = 20261203
CONV_VOLUMETRIC_CHANNELS = [1, 3, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]
CONV_VOLUMETRIC_MAX_BYTES = 1 << 29  # input + output of one pass
CONV_VOLUMETRIC_MAX_FLOPS = {"float32": 2.5e11, "bfloat16": 1e12, "float16": 1e12}  # a few ms at worst


def _volumetric_shape(rng: random.Random, dims: int) -> tuple[list[int], list[int], list[int]]:
    """(spatial sizes, kernel, stride) per dim."""
    if dims == 3:
        depth, side = rng.choice([4, 8, 16, 16, 24, 32, 48, 64]), rng.choice([8, 16, 28, 32, 56, 64, 112, 128])
        spatial = [depth, side, side] if rng.random() < 0.7 else [depth, side, rng.choice([8, 16, 32, 64, 96])]
        form = rng.choice(["cube", "cube", "cube", "spatial", "temporal", "mixed"])
        k = rng.choice([1, 2, 3, 3, 3, 4, 5, 7])
        kernel = {"cube": [k] * 3, "spatial": [1, k, k], "temporal": [k, 1, 1],
                  "mixed": [rng.choice([1, 3, 5]), rng.choice([3, 5]), rng.choice([3, 5, 7])]}[form]
    else:
        side = rng.choice([8, 16, 28, 32, 56, 64, 128, 256])
        spatial = [side, side] if rng.random() < 0.7 else [side, rng.choice([16, 32, 64, 128, 256])]
        kernel = [rng.choice([2, 3, 3, 4, 5, 7])] * 2 if rng.random() < 0.8 else \
            [rng.choice([3, 5]), rng.choice([3, 5, 7])]
    s = rng.choice([1, 1, 2, 2, 3]) if dims == 2 else rng.choice([1, 1, 2])
    stride = [s] * dims if rng.random() < 0.85 else [1] + [s] * (dims - 1)
    return spatial, [min(k, n) for k, n in zip(kernel, spatial)], stride


# A second draw of the same kinds at the sizes a whole 3-D network's early layers reach: batches to 128, inputs
# and outputs to 2 GiB, fp32 work to 1 TFLOP (the first draw stopped at batch 32 and 512 MiB, so a video
# model's stem, few input channels over a large batch, was the regressor's extrapolation: KernelBench level 2's
# 128 x 3 x 16 x 32 x 32 Conv3d was priced 43% over measured, each of its 13 programs alike).
CONV_VOLUMETRIC_WIDE = {"seed": 20261204, "cases": 500, "batches": [1, 4, 16, 32, 64, 128],
                        "max_bytes": 1 << 31, "max_flops": {"float32": 1e12, "bfloat16": 4e12, "float16": 4e12}}


def _conv_volumetric_params(rng: random.Random, batches=(1, 2, 4, 8, 16, 32), max_bytes: int = CONV_VOLUMETRIC_MAX_BYTES,
                            max_flops: dict = CONV_VOLUMETRIC_MAX_FLOPS) -> dict:
    while True:
        transposed = rng.random() < 0.55
        dims = 3 if not transposed or rng.random() < 0.55 else 2
        spatial, kernel, stride = _volumetric_shape(rng, dims)
        c_in, c_out = rng.choice(CONV_VOLUMETRIC_CHANNELS), rng.choice(CONV_VOLUMETRIC_CHANNELS[2:])
        groups = rng.choice([g for g in (2, 4, 8, 16) if c_in % g == 0 and c_out % g == 0] or [1]) \
            if rng.random() < 0.15 else 1
        batch = rng.choice(list(batches))
        dtype = rng.choice(["float32", "float32", "bfloat16", "float16"])
        p = {"dims": dims, "batch": batch, "c_in": c_in, "c_out": c_out, "kernel": kernel[-1], "stride": stride[-1],
             "groups": groups, "size": spatial[-1], "dtype": dtype, "channels_last": rng.random() < 0.3,
             "transposed": transposed, "spatial": spatial, "kernel_shape": kernel, "stride_shape": stride,
             "padding": rng.choice([0, 0, 1, min(kernel) // 2])}
        if transposed and max(stride) > 1 and rng.random() < 0.3:
            p["output_padding"] = 1
        if rng.random() < 0.1 and min(spatial) >= 16:
            p["dilation"] = 2
        pad, dil, extra = p["padding"], p.get("dilation", 1), p.get("output_padding", 0)
        if transposed:
            out = [(n - 1) * s - 2 * pad + dil * (k - 1) + extra + 1 for n, k, s in zip(spatial, kernel, stride)]
            positions = math.prod(spatial)
        else:
            out = [(n + 2 * pad - dil * (k - 1) - 1) // s + 1 for n, k, s in zip(spatial, kernel, stride)]
            positions = math.prod(out) if min(out) >= 1 else 0
        flops = 2.0 * batch * c_out * (c_in // groups) * math.prod(kernel) * positions
        nbytes = batch * (c_in * math.prod(spatial) + c_out * math.prod(max(o, 0) for o in out)) * \
            (4 if dtype == "float32" else 2)
        if min(out) >= 1 and extra < min(stride) and 0 < flops <= max_flops[dtype] and nbytes <= max_bytes:
            return p


def _three_pass_cases(draw: Callable[[], dict], count: int, device: str) -> Iterator[Case]:
    """`count` convolutions from `draw`, each in its three passes (CONV_PASSES)."""
    for _ in range(max(1, count)):
        params = draw()
        for pass_ in CONV_PASSES:
            yield Case("conv", {**params, "pass": pass_}, lambda p={**params, "pass": pass_}: _conv_call(p, device))


def conv_volumetric_cases(device: str, scale: float = 1.0, wide: bool = False) -> Iterator[Case]:
    """3-D and transposed convolutions drawn as _conv_volumetric_params draws them, each in its three passes;
    wide: the second draw, at CONV_VOLUMETRIC_WIDE's larger batches and sizes."""
    rng = random.Random(CONV_VOLUMETRIC_WIDE["seed"] if wide else CONV_VOLUMETRIC_SEED)
    draw = (lambda: _conv_volumetric_params(rng, CONV_VOLUMETRIC_WIDE["batches"], CONV_VOLUMETRIC_WIDE["max_bytes"],
                                            CONV_VOLUMETRIC_WIDE["max_flops"])) if wide else \
        (lambda: _conv_volumetric_params(rng))
    yield from _three_pass_cases(draw, int((CONV_VOLUMETRIC_WIDE["cases"] if wide else CONV_VOLUMETRIC_CASES) * scale),
                                 device)


# -- up-sampling transposed convolutions (issue 30) ----------------------------------------------------------
# A decoder doubles its maps with a transposed convolution of stride 2 (U-Net and VAE decoders, GAN generators,
# video and volumetric decoders): kernel 2 (no overlap), 3 (padding 1, output padding 1 for an exact 2x) or 4
# (padding 1), channels halving or kept, 2-D and 3-D, every dtype. cuDNN runs these as data-gradient implicit
# GEMMs, "indexed" ones for strided windows, with NCHW <-> NHWC copies around them; the volumetric draws above
# hold 23 fp32 3-D ones of stride 2 in all, at 0.1-157 TFLOP/s, too few for the 3-D / transposed family's fit to
# follow (KernelBench level 2's transposed 3-D convolutions were priced 16-79% over on every GPU). This draw
# spans the kind: 2-D and 3-D, stride 2 in every dim (or only the spatial ones of a clip), the three kernels and
# their paddings, 8-512 channels in, batches 1-128, maps to 128 x 128 (2-D) and 32 x 64 x 64 (3-D), the three
# passes.
CONV_UPSAMPLE = {"seed": 20261206, "cases": 300, "channels": [8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512],
                 "batches": [1, 2, 4, 8, 16, 32, 64, 128], "max_bytes": 1 << 30,
                 "max_flops": {"float32": 5e11, "bfloat16": 2e12, "float16": 2e12}}


def _conv_upsample_params(rng: random.Random) -> dict:
    while True:
        dims = rng.choice([2, 3])
        if dims == 2:
            side = rng.choice([8, 16, 28, 32, 56, 64, 128])
            spatial = [side, side] if rng.random() < 0.8 else [side, rng.choice([16, 32, 64, 96])]
        else:
            side = rng.choice([8, 16, 28, 32, 64])
            spatial = [rng.choice([4, 8, 16, 32]), side, side]
        k = rng.choice([2, 3, 3, 4])
        padding, output_padding = {2: (0, 0), 3: (1, rng.choice([0, 1, 1])), 4: (1, 0)}[k]
        stride = [2] * dims if dims == 2 or rng.random() < 0.75 else [1, 2, 2]
        if min(stride) == 1:
            output_padding = 0  # output padding must be smaller than every dim's stride
        c_in = rng.choice(CONV_UPSAMPLE["channels"])
        c_out = rng.choice([max(c_in // 2, 4), max(c_in // 2, 4), c_in, rng.choice(CONV_UPSAMPLE["channels"])])
        dtype = rng.choice(["float32", "float32", "bfloat16", "float16"])
        p = {"dims": dims, "batch": rng.choice(CONV_UPSAMPLE["batches"]), "c_in": c_in, "c_out": c_out,
             "kernel": k, "stride": stride[-1], "groups": 1, "size": spatial[-1], "dtype": dtype,
             "channels_last": rng.random() < 0.3, "transposed": True, "spatial": spatial,
             "kernel_shape": [k] * dims, "stride_shape": stride, "padding": padding}
        if output_padding:
            p["output_padding"] = output_padding
        out = [(n - 1) * st - 2 * padding + (k - 1) + output_padding + 1 for n, st in zip(spatial, stride)]
        flops = 2.0 * p["batch"] * c_out * c_in * k ** dims * math.prod(spatial)
        nbytes = p["batch"] * (c_in * math.prod(spatial) + c_out * math.prod(out)) * (4 if dtype == "float32" else 2)
        if min(out) >= 1 and 0 < flops <= CONV_UPSAMPLE["max_flops"][dtype] and nbytes <= CONV_UPSAMPLE["max_bytes"]:
            return p


def conv_upsample_cases(device: str, scale: float = 1.0) -> Iterator[Case]:
    """CONV_UPSAMPLE's draw (_conv_upsample_params), each in its three passes."""
    rng = random.Random(CONV_UPSAMPLE["seed"])
    yield from _three_pass_cases(lambda: _conv_upsample_params(rng), int(CONV_UPSAMPLE["cases"] * scale), device)


# -- pointwise (1x1) and 3x3 convolutions over large maps with few channels (issue 31) -------------------------
# An FFT layer's 1x1 fp32 convolutions (32 -> 32 channels over 16 x 128 x 128 maps) ran their weight gradient
# with cuDNN's `wgrad_implicit_gemm_indexed_wo_smem` at 2.8 ms each, 0.2 TFLOP/s (zoo fft_layers_train,
# predicted 1.07 ms for the backward of all of them against 12.16 ms): no sweep shape had few channels over
# that many positions (the designed grid keeps maps under 64 x 64 at those channel counts). This grid puts a
# reduction of 16 K to 4 M positions under 4 to 256 channels in and out, kernels 1 and 3, stride 1, fp32 (TF32
# allowed, torch's default for cuDNN: the kind that missed), NCHW and channels_last, each in its three passes.
CONV_POINTWISE_CHANNELS = (4, 16, 32, 64, 128, 256)
CONV_POINTWISE_MAPS = ((4, 64), (16, 128), (16, 256), (64, 256))  # (batch, side): 16 K to 4 M positions
CONV_POINTWISE_MAX_BYTES = 1 << 30


def conv_pointwise_cases(device: str, scale: float = 1.0) -> Iterator[Case]:
    """The grid above: (C_in, C_out) pairs of the channel pool with C_out in {C_in, 2 C_in} or C_in = C_out / 2,
    every map, kernels 1 and 3, two layouts; inputs and outputs under CONV_POINTWISE_MAX_BYTES."""
    pairs = sorted({(c, c) for c in CONV_POINTWISE_CHANNELS} | {(c, 2 * c) for c in CONV_POINTWISE_CHANNELS[:-1]}
                   | {(2 * c, c) for c in CONV_POINTWISE_CHANNELS[:-1]})
    step = max(1, round(1 / scale)) if scale < 1 else 1
    for i, ((c_in, c_out), (batch, side), kernel, dtype, channels_last) in enumerate(
            (pair, m, k, d, cl) for pair in pairs for m in CONV_POINTWISE_MAPS for k in (1, 3)
            for d in ("float32",) for cl in (False, True)):
        if i % step:
            continue
        itemsize = 4 if dtype == "float32" else 2
        if batch * (c_in + c_out) * side * side * itemsize > CONV_POINTWISE_MAX_BYTES:
            continue
        params = {"dims": 2, "batch": batch, "c_in": c_in, "c_out": c_out, "kernel": kernel, "stride": 1,
                  "groups": 1, "size": side, "dtype": dtype, "channels_last": channels_last}
        for pass_ in CONV_PASSES:
            yield Case("conv", {**params, "pass": pass_}, lambda p={**params, "pass": pass_}: _conv_call(p, device))


# -- stems and heads: few channels on one side, large maps (issue 30) ------------------------------------------
# A network's first convolution reads 1-4 channels (RGB, audio, a CT volume) over its largest maps, and a
# decoder's last writes as few; cuDNN runs them on kernels of their own (FFMA implicit GEMMs with 4-channel
# alignment, legacy implicit_convolve_sgemm, direct kernels), as channel counts that are not a multiple of 4 or 8
# keep them off the tensor-core engines. The designed sweep has four such fp32 shapes and the other draws few at
# large maps, so KernelBench's 3 -> 64 channel convolutions over 256 x 256 images (and 3-D clips) were the
# regressor's extrapolation, priced 1.5-3x over. This draw spans them: 1-D, 2-D and 3-D, 1-6 channels in (or out,
# transposed), 8-128 on the other side, kernels 1-7 (some per-dim unequal), strides 1-4, batches 1-128, maps to
# 512 x 512, every dtype and layout, the three passes.
CONV_STEM = {"seed": 20261205, "cases": 360, "few": [1, 2, 3, 4, 6], "many": [8, 16, 24, 32, 48, 64, 96, 128],
             "batches": [1, 2, 4, 8, 16, 32, 64, 128], "max_bytes": 1 << 30,
             "max_flops": {"float32": 5e11, "bfloat16": 2e12, "float16": 2e12}}


def _conv_stem_params(rng: random.Random) -> dict:
    while True:
        dims = rng.choices([1, 2, 3], weights=[0.15, 0.55, 0.3])[0]
        if dims == 1:
            spatial = [rng.choice([256, 512, 1024, 2048, 4096, 16384])]
        elif dims == 2:
            side = rng.choice([32, 64, 112, 128, 224, 256, 384, 512])
            spatial = [side, side] if rng.random() < 0.7 else [side, rng.choice([64, 128, 181, 256, 320])]
        else:
            side = rng.choice([16, 32, 56, 64, 112, 128])
            spatial = [rng.choice([4, 8, 16, 32, 64]), side,
                       side if rng.random() < 0.7 else rng.choice([32, 64, 96])]
        k = rng.choice([1, 2, 3, 3, 3, 4, 5, 7])
        kernel = [k] * dims if dims == 1 or rng.random() < 0.75 else \
            [rng.choice([1, 3, 5]) for _ in range(dims - 1)] + [k]
        s = rng.choice([1, 1, 1, 2, 2, 4])
        transposed = rng.random() < 0.25
        few, many = rng.choice(CONV_STEM["few"]), rng.choice(CONV_STEM["many"])
        c_in, c_out = (many, few) if transposed else (few, many)
        dtype = rng.choice(["float32", "float32", "float32", "bfloat16", "float16"])
        p = {"dims": dims, "batch": rng.choice(CONV_STEM["batches"]), "c_in": c_in, "c_out": c_out, "kernel": k,
             "stride": s, "groups": 1, "size": spatial[-1], "dtype": dtype,
             "channels_last": dims > 1 and rng.random() < 0.25,
             "transposed": transposed, "spatial": spatial, "kernel_shape": kernel, "stride_shape": [s] * dims,
             "padding": rng.choice([0, 0, min(kernel) // 2, min(kernel) // 2])}
        if rng.random() < 0.1 and min(spatial) >= 32:
            p["dilation"] = 2
        pad, dil = p["padding"], p.get("dilation", 1)
        if transposed:
            out = [(n - 1) * s - 2 * pad + dil * (kk - 1) + 1 for n, kk in zip(spatial, kernel)]
            positions = math.prod(spatial)
        else:
            out = [(n + 2 * pad - dil * (kk - 1) - 1) // s + 1 for n, kk in zip(spatial, kernel)]
            positions = math.prod(out) if min(out) >= 1 else 0
        flops = 2.0 * p["batch"] * c_out * c_in * math.prod(kernel) * positions
        nbytes = p["batch"] * (c_in * math.prod(spatial) + c_out * math.prod(max(o, 0) for o in out)) * \
            (4 if dtype == "float32" else 2)
        if min(out) >= 1 and 0 < flops <= CONV_STEM["max_flops"][dtype] and nbytes <= CONV_STEM["max_bytes"]:
            return p


def conv_stem_cases(device: str, scale: float = 1.0) -> Iterator[Case]:
    """CONV_STEM's draw (_conv_stem_params), each in its three passes."""
    rng = random.Random(CONV_STEM["seed"])
    yield from _three_pass_cases(lambda: _conv_stem_params(rng), int(CONV_STEM["cases"] * scale), device)


# -- attention -----------------------------------------------------------------------------------------------
ATTENTION_CASES = 260


def attention_cases(device: str, scale: float = 1.0) -> Iterator[Case]:
    rng = random.Random(SEED + 2)
    n = 0
    while n < max(1, int(ATTENTION_CASES * scale)):
        backend = rng.choice(["CUDNN_ATTENTION", "CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"])
        d = rng.choice([32, 64, 64, 80, 96, 128, 128, 256])
        decode = rng.random() < 0.25
        sk = rng.choice([128, 197, 256, 512, 1000, 1024, 2048, 4096, 8192])
        sq = rng.choice([1, 1, 4, 16]) if decode else (sk if rng.random() < 0.8 else rng.choice([128, 512, 1024]))
        heads = rng.choice([8, 12, 16, 32])
        kv_heads = heads if rng.random() < 0.7 else max(1, heads // rng.choice([4, 8]))
        batch = rng.choice([1, 2, 4, 8, 16, 32])
        causal = (not decode) and sq == sk and rng.random() < 0.5
        mask = "none" if causal or rng.random() < 0.7 else rng.choice(["bool", "float"])
        dropout = 0.0 if decode or rng.random() < 0.8 else 0.1
        dtype = rng.choice(["bfloat16", "bfloat16", "float16"])
        flops = 4.0 * batch * heads * sq * sk * d
        if flops > 2e12 or batch * heads * sk * d * 2 * 3 > MAX_BYTES:
            continue
        params = {"backend": backend, "batch": batch, "heads": heads, "kv_heads": kv_heads, "sq": sq, "sk": sk,
                  "d": d, "causal": causal, "mask": mask, "dropout": dropout, "dtype": dtype}
        for pass_ in ("forward", "backward"):
            if pass_ == "backward" and decode:
                continue
            yield Case("attention", {**params, "pass": pass_},
                       lambda p={**params, "pass": pass_}: _attention_call(p, device))
        n += 1


# Decode-shaped attention (a few query positions against a KV cache), forward, on each backend CUDA picks: the
# designed draw holds few of them (25 cuDNN rows with at most 16 queries), and a decode step's attention is
# priced from those (zoo llama_decode_static_cache: 65 us a call predicted, 23 measured).
DECODE_BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")
DECODE_BATCH = (1, 4, 8, 32)
DECODE_HEADS = ((12, 12), (32, 32), (32, 8))  # (query heads, KV heads): MHA and GQA
DECODE_QUERIES = (1, 4)
DECODE_KEYS = (128, 256, 512, 1024, 2048, 4096, 8192)
DECODE_HEAD_DIMS = (64, 128)
DECODE_MASKS = ("none", "float")


def attention_decode_cases(device: str, scale: float = 1.0) -> Iterator[Case]:
    for backend, batch, (heads, kv_heads), sq, sk, d, mask in itertools.product(
            DECODE_BACKENDS, DECODE_BATCH, DECODE_HEADS, DECODE_QUERIES, DECODE_KEYS, DECODE_HEAD_DIMS, DECODE_MASKS):
        params = {"backend": backend, "batch": batch, "heads": heads, "kv_heads": kv_heads, "sq": sq, "sk": sk,
                  "d": d, "causal": False, "mask": mask, "dropout": 0.0, "dtype": "bfloat16", "pass": "forward"}
        yield Case("attention", params, lambda p=params: _attention_call(p, device))


# fp32 attention, forward and backward: PyTorch runs fp32 scaled_dot_product_attention on the memory-efficient
# backend (flash and cuDNN take fp16 / bf16 only), whose fp32 kernels run on the CUDA cores. The designed draw is
# bf16 / fp16, and an fp32 call was priced from those at the bf16 roof: on an H100 (torch 2.11) our whole-model
# programs' fp32 SDPA calls ran 3.5-4.2x their predicted time (benchmarks/whole_models: sdpa_block,
# transformer_enc, as nn.TransformerEncoder's fast path calls it). costs/attention.py keys them apart.
ATTENTION_FP32_CASES = 48


def attention_fp32_cases(device: str, scale: float = 1.0) -> Iterator[Case]:
    rng = random.Random(SEED + 5)
    n = 0
    while n < max(1, int(ATTENTION_FP32_CASES * scale)):
        d = rng.choice([32, 64, 64, 80, 96, 128])
        sk = rng.choice([64, 128, 197, 256, 512, 1024, 2048, 4096])
        sq = sk if rng.random() < 0.85 else rng.choice([1, 16, 128, 512])
        heads = rng.choice([4, 8, 12, 16])
        batch = rng.choice([1, 2, 4, 8, 16, 32])
        causal = sq == sk and rng.random() < 0.5
        mask = "none" if causal or rng.random() < 0.7 else rng.choice(["bool", "float"])
        flops = 4.0 * batch * heads * sq * sk * d
        if flops > 5e11 or batch * heads * sk * d * 4 * 3 > MAX_BYTES:
            continue
        params = {"backend": "EFFICIENT_ATTENTION", "batch": batch, "heads": heads, "kv_heads": heads, "sq": sq,
                  "sk": sk, "d": d, "causal": causal, "mask": mask, "dropout": 0.0, "dtype": "float32"}
        for pass_ in ("forward", "backward"):
            yield Case("attention", {**params, "pass": pass_},
                       lambda p={**params, "pass": pass_}: _attention_call(p, device))
        n += 1


def attention_inputs(p: dict, device: str, requires_grad: bool) -> tuple:
    """(q, k, v, sdpa keyword arguments, SDPBackend) of one attention case's parameters (attention_cases)."""
    import torch
    from torch.nn.attention import SDPBackend

    dtype, grad = getattr(torch, p["dtype"]), requires_grad
    q = torch.randn(p["batch"], p["heads"], p["sq"], p["d"], device=device, dtype=dtype, requires_grad=grad)
    k = torch.randn(p["batch"], p["kv_heads"], p["sk"], p["d"], device=device, dtype=dtype, requires_grad=grad)
    v = torch.randn(p["batch"], p["kv_heads"], p["sk"], p["d"], device=device, dtype=dtype, requires_grad=grad)
    mask = None
    if p["mask"] != "none":
        keep = torch.rand(p["batch"], 1, p["sq"], p["sk"], device=device) > 0.1
        mask = keep if p["mask"] == "bool" else torch.zeros(keep.shape, device=device, dtype=dtype).masked_fill(~keep, -1e4)
    kwargs = {"attn_mask": mask, "is_causal": p["causal"], "dropout_p": p["dropout"],
              "enable_gqa": p["kv_heads"] != p["heads"]}
    return q, k, v, kwargs, getattr(SDPBackend, p["backend"])


def _attention_call(p: dict, device: str) -> Callable[[], object]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    train = p["pass"] == "backward"
    q, k, v, kwargs, backend = attention_inputs(p, device, train)
    with sdpa_kernel([backend]):
        out = F.scaled_dot_product_attention(q, k, v, **kwargs)  # raises here if the backend refuses the case
    if not train:
        def forward():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, **kwargs)
        return forward
    grad = torch.randn_like(out)

    def backward():  # the backward alone, on a graph built outside the timed region
        with sdpa_kernel([backend]):
            o = F.scaled_dot_product_attention(q, k, v, **kwargs)
        return o, torch.autograd.grad(o, (q, k, v), grad)

    return backward


def drawn_section(name: str, draw: int) -> str:
    """The sweep section of a drawn design's `draw`-th sample: the name itself for the first, name_2 and on after."""
    return name if draw == 1 else f"{name}_{draw}"


SECTIONS = {"gemm": lambda dev, scale: gemm_cases(Pool(dev), scale),
            "conv": conv_cases, "attention": attention_cases}
# Not in the default design: run by name (scripts/device/probe_gemm_launches.py, scripts/device/probe_conv_launches.py).
EXTRA_SECTIONS = {
    "gemm_fp32_round": lambda dev, scale: gemm_fp32_round_cases(Pool(dev), scale),
    "attention_decode": attention_decode_cases,
    "attention_fp32": attention_fp32_cases,
    "conv_volumetric": conv_volumetric_cases,
    "conv_volumetric_wide": lambda dev, scale: conv_volumetric_cases(dev, scale, wide=True),
    "conv_pointwise": conv_pointwise_cases,
    "conv_stem": conv_stem_cases,
    "conv_upsample": conv_upsample_cases,
    **{drawn_section("gemm_log_uniform", draw): (lambda dev, scale, draw=draw: gemm_log_uniform_cases(Pool(dev), scale, draw))
       for draw in range(1, DRAWS + 1)},
    **{drawn_section("conv_log_uniform", draw): (lambda dev, scale, draw=draw: conv_log_uniform_cases(dev, scale, draw))
       for draw in range(1, DRAWS + 1)}}


def sweep_cases(sections: list[str] | None = None, device: str = "cuda", scale: float = 1.0) -> list[Case]:
    """The design: every case of the named sections (all by default), in a fixed order."""
    out: list[Case] = []
    for name in sections or list(SECTIONS):
        out.extend({**SECTIONS, **EXTRA_SECTIONS}[name](device, scale))
    return out


# -- running -------------------------------------------------------------------------------------------------
def _kernels_by_case(prof) -> dict[int, list[tuple[str, float]]]:
    """Kernels launched inside each case's record_function range, in launch order: [(name, µs)]."""
    from torch.autograd import DeviceType

    out: dict[int, list] = {}
    for e in prof.events():
        if e.device_type != DeviceType.CPU or not e.name.startswith(CASE_RANGE):
            continue
        seen, kernels, stack = set(), [], list(e.cpu_children)
        for k in e.kernels:
            kernels.append(k)
        while stack:
            child = stack.pop()
            stack.extend(child.cpu_children)
            kernels.extend(child.kernels)
        unique = []
        for k in sorted(kernels, key=lambda k: k.time_range.start if hasattr(k, "time_range") else 0):
            ident = (k.name, getattr(k, "time_range", None) and k.time_range.start, k.duration)
            if ident not in seen:
                seen.add(ident)
                unique.append((k.name[:100], round(k.duration, 3)))
        out[int(e.name[len(CASE_RANGE):])] = unique
    return out


def run_sweep(cases: list[Case], log: Callable[[str], None] = print, time_budget_s: float | None = None) -> list[dict]:
    """Time every case; one failing case is recorded with its error and the sweep goes on."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from kernelcast.measure import events_ms, flush_l2

    from .timing import OpSnapshot

    results: list[dict] = []
    started = time.perf_counter()
    progress.stage("sweep of GEMM, conv and attention shapes", total=len(cases))
    for chunk_start in range(0, len(cases), PROFILE_CHUNK):
        if time_budget_s is not None and time.perf_counter() - started > time_budget_s:
            log(f"sweep: time budget spent after {chunk_start} of {len(cases)} cases")
            break
        chunk = cases[chunk_start:chunk_start + PROFILE_CHUNK]
        calls: dict[int, Callable] = {}
        for i, case in enumerate(chunk, start=chunk_start):
            row = {"kind": case.kind, **case.params}
            try:
                call = case.build()
                snapshot = OpSnapshot()
                with snapshot:
                    call()
                row["ops"] = [op.to_json() for op in snapshot.ops]
                times = events_ms(call, REPS, flush_l2)
                row["time_us"] = round(statistics.median(times) * 1e3, 3)
                row["times_us"] = [round(t * 1e3, 3) for t in times]
                calls[i] = call
            except Exception as exc:  # a shape a backend refuses, or out of memory: data too
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            results.append(row)
            progress.advance()
        try:
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for i, call in calls.items():
                    flush_l2()
                    with record_function(f"{CASE_RANGE}{i}"):
                        call()
                torch.cuda.synchronize()
            for i, kernels in _kernels_by_case(prof).items():
                results[i]["kernels"] = kernels
        except Exception as exc:
            log(f"sweep: profiler failed on chunk at {chunk_start}: {exc}")
        torch.cuda.empty_cache()
        log(f"sweep: {min(chunk_start + PROFILE_CHUNK, len(cases))}/{len(cases)} cases, "
            f"{time.perf_counter() - started:.0f} s")
    return results


def run_sweep_cpu_check(cases: list[Case]) -> list[dict]:
    """Build and call every case once (on "meta" tensors: no data, no timing): checks the design's code paths
    without a GPU."""
    out = []
    for case in cases:
        row = {"kind": case.kind, **case.params}
        try:
            case.build()()
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        out.append(row)
    return out
