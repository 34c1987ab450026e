"""The compute kinds a profile times by shape (GEMM, convolution, fused attention): for each, the work a shape key
implies (FLOPs, bytes), the group of measurements it is compared within, its point in log2 shape space, and the
features of the fitted correction model. calibrate (time_model.py, profile.py) fits over these and predict
(calibrated.py) looks shapes up by them, so both read one definition of a kind's shape.
"""

from __future__ import annotations

import math

from kernelcast.costs.attention import FP32_SUFFIX as ATTENTION_FP32_SUFFIX
from kernelcast.costs.conv_backend import NATIVE_DEPTHWISE, conv_backend
from kernelcast.costs.launch_table import gemm_alignment, gemm_features
from kernelcast.costs.launch_table import log2_size as _log2
from kernelcast.costs.matmul import CONV_KEY_FIELDS

# Fused attention kernels walk queries and keys in tiles of this many rows on sm90 (FlashAttention-3, Shah et
# al. 2024, section 3: 128-row blocks for head dims 64-128; cuDNN's fused kernels likewise): a sequence
# length that is not a multiple computes its last tile in full.
ATTENTION_TILE = 128


def attention_padded(length: int) -> int:
    return -(-length // ATTENTION_TILE) * ATTENTION_TILE


KEY_LENGTH = {"gemm": 7, "conv": CONV_KEY_FIELDS, "attention": 9}


def dtype_itemsize(dtype: str) -> int:
    return {"float32": 4, "tf32": 4, "float16": 2, "bfloat16": 2}.get(dtype, 1 if "float8" in dtype else 2)


def _gemm_work(key: tuple) -> tuple[float, float, str, str]:
    dtype, _, _, bias, m, n, k = key
    size = dtype_itemsize(dtype)
    out_size = 2 if "float8" in dtype else size
    return 2.0 * m * n * k, (m * k + k * n) * size + (m * n + (n if bias else 0)) * out_size, \
        "float32" if dtype == "tf32" else dtype, "matmul"


def conv_output_size(key: tuple) -> int:
    """A conv key's output length per spatial dim (torch.nn.Conv3d / ConvTranspose3d's shape formulas)."""
    _, _, _, _, _, kernel, stride, size, _, _, _, transposed, padding, dilation, output_padding = key
    if transposed:
        return max((size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1, 1)
    return max((size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1, 1)


def _conv_work(key: tuple) -> tuple[float, float, str, str]:
    pass_, dtype, _, c_in, c_out, kernel, stride, size, groups, batch, dims, transposed = key[:12]
    out = conv_output_size(key)
    taps = kernel ** dims
    positions = (size if transposed else out) ** dims
    flops = 2.0 * batch * c_out * (c_in // max(groups, 1)) * taps * positions
    x, y, w = batch * c_in * size ** dims, batch * c_out * out ** dims, c_out * (c_in // max(groups, 1)) * taps
    moved = {"conv_fwd": x + w + y, "conv_bwd_input": y + w + x, "conv_bwd_weight": y + x + w}.get(pass_, x + y + w)
    return flops, moved * dtype_itemsize(dtype), dtype, "conv"


# A backward pass of fused attention does about 2.5x the forward's matmul work (FlashAttention-2, Dao 2023,
# section 3.2: five matmuls against two) and reads and writes about twice the bytes.
ATTENTION_BACKWARD_FLOPS = 2.5
ATTENTION_BACKWARD_BYTES = 2.0


def _attention_work(key: tuple) -> tuple[float, float, str, str]:
    backend, pass_, bh, sq, sk, d, causal, _, _ = key
    # the tiles' work: a sequence length that is not a multiple of the tile computes its last tile in full
    flops = 4.0 * bh * attention_padded(sq) * attention_padded(sk) * d * (0.5 if causal and sq == sk else 1.0)
    fp32 = backend.endswith(ATTENTION_FP32_SUFFIX)  # costs/attention.py: fp32 calls, priced at the FP32 roof
    nbytes = (4.0 if fp32 else 2.0) * bh * (2 * sq + 2 * sk) * d
    if pass_ == "bwd":
        flops, nbytes = flops * ATTENTION_BACKWARD_FLOPS, nbytes * ATTENTION_BACKWARD_BYTES
    return flops, nbytes, "float32" if fp32 else "bfloat16", "attention"


def _gemm_group(key: tuple, settings) -> tuple:
    dtype, a_t, b_t, bias = key[:4]
    if dtype == "float32" and settings is not None and settings.matmul_allow_tf32:
        dtype = "tf32"
    return ("gemm", dtype, a_t, b_t, bias, gemm_alignment(("tf32" if dtype == "tf32" else dtype, *key[1:])))


def _gemm_point(key: tuple) -> tuple[tuple, tuple]:
    return (_log2(key[4]), _log2(key[5]), _log2(key[6])), ()


def _conv_group(key: tuple, settings) -> tuple:
    return ("conv", key[0], key[1], key[2])


def conv_point(key: tuple) -> tuple[tuple, tuple]:
    """A convolution as the implicit GEMM cuDNN runs per group: M = batch x output positions, N = C_out / G,
    K = C_in / G x kernel taps, and G groups (log2 each). Points with other batch and image sizes but the same
    GEMM shape then inform each other, where comparing batch, channels and size one by one kept them apart
    (held out by region, scripts/eval/shape_model_eval.py)."""
    _, _, _, c_in, c_out, kernel, stride, size, groups, batch, dims, transposed = key[:12]
    out = conv_output_size(key)
    groups = max(groups, 1)
    m = batch * (size if transposed else out) ** dims
    n, k = c_out // groups, (c_in // groups) * kernel ** dims
    # The kind also holds the window's geometry and the channels' alignment: a measured shape with the same
    # implicit GEMM sizes but another stride, padding or alignment ran another cuDNN engine (KernelBench L2 #100's
    # transposed 3-D convolution took a stride-1 neighbour's legacy engine as "measured-near": +315%).
    return ((_log2(m), _log2(n), _log2(k), _log2(groups)),
            (dims, transposed, groups == c_in and groups > 1, conv_backend(key), kernel, stride, *key[12:15],
             channel_alignment(c_in // groups), channel_alignment(c_out // groups)))


# cuDNN's implicit-GEMM kernels load channels in 16-byte vectors: 4 fp32 or 8 half-precision values, and its
# tensor-core engines need channel counts that are multiples of 4 (TF32) or 8 (fp16/bf16) (cuDNN Developer Guide,
# "Tensor Core Operations"; the kernel names say it: `..._ffma_aligna4_alignc4_...`). Fewer aligned channels (an
# RGB stem's 3) run other, slower kernels, so the alignment is a feature of the time model and part of a conv's
# kind. The window's taps are a feature beside K = C_in x taps: an implicit GEMM walks K tap by tap, each tap a
# gather of C_in contiguous channels, so 3 channels x 9 taps is not 27 channels x 1 tap.
CHANNEL_ALIGNMENT_MAX = 8


def channel_alignment(channels: int) -> int:
    """The largest power of two up to CHANNEL_ALIGNMENT_MAX that divides a channel count (1, 2, 4 or 8)."""
    align = 1
    while align < CHANNEL_ALIGNMENT_MAX and channels % (align * 2) == 0:
        align *= 2
    return align


def _attention_group(key: tuple, settings) -> tuple:
    return ("attention", key[0], key[1])


# Attention with at most this many queries is decode-shaped (the most the sweep's attention_decode section
# measures): decode and prefill points are kinds apart, as the backends run other kernels for a few queries
# against a long cache. Without the split, the decode section's masked points became the nearest of a masked
# BERT forward's (128 queries) and priced it 18% slow (zoo bert_forward_fp16).
DECODE_MAX_QUERIES = 4


def _attention_point(key: tuple) -> tuple[tuple, tuple]:
    _, _, bh, sq, sk, d, causal, dropout, mask = key
    return ((_log2(bh), _log2(attention_padded(sq)), _log2(attention_padded(sk)), _log2(d)),
            (bool(causal), bool(dropout), bool(mask), sq <= DECODE_MAX_QUERIES))


def _work_features(kind: str, key: tuple) -> list[float]:
    """log2 FLOPs, log2 bytes and log2 arithmetic intensity of the work the key implies."""
    flops, nbytes, _, _ = SHAPE_WORK[kind](key)
    return [math.log2(flops + 1.0), math.log2(nbytes + 1.0), math.log2(flops + 1.0) - math.log2(nbytes + 1.0)]


CONV_PASSES = ("conv_fwd", "conv_bwd_input", "conv_bwd_weight")
CONV_DTYPES = ("bfloat16", "float16", "float32")
ATTENTION_BACKENDS = ("CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "FLASH_ATTENTION")


def _gemm_features(key: tuple) -> list[float]:
    return gemm_features(*key) + _work_features("gemm", key)


def _conv_features(key: tuple) -> list[float]:
    pass_, dtype, channels_last, c_in, c_out, kernel, stride, size, groups, batch, dims, transposed = key[:12]
    padding, dilation, output_padding = key[12:]
    (m, n, k, g), (_, _, depthwise, backend, *_) = conv_point(key)
    # padding, dilation and output padding last: a regressor fitted before they were features reads only the first
    return [*(float(pass_ == p) for p in CONV_PASSES), *(float(dtype == d) for d in CONV_DTYPES),
            float(channels_last), m, n, k, g, _log2(batch), _log2(c_in), _log2(c_out), _log2(size), float(kernel),
            float(stride), float(dims), float(transposed), float(depthwise), float(backend == NATIVE_DEPTHWISE),
            *_work_features("conv", key), float(padding), float(dilation), float(output_padding),
            _log2(conv_output_size(key)), _log2(channel_alignment(c_in // max(groups, 1))),
            _log2(channel_alignment(c_out // max(groups, 1))), float(kernel ** dims)]


def _attention_features(key: tuple) -> list[float]:
    (bh, sq, sk, d), (causal, dropout, mask, _decode) = _attention_point(key)
    return [*(float(key[0] == b) for b in ATTENTION_BACKENDS), float(key[1] == "bwd"), bh, sq, sk, d,
            float(causal), float(dropout), float(mask), *_work_features("attention", key)]


# The fitted correction models' inputs (calibrate/time_model.py fits them, _lookup_shape reads them).
SHAPE_FEATURES = {"gemm": _gemm_features, "conv": _conv_features, "attention": _attention_features}

SHAPE_WORK = {"gemm": _gemm_work, "conv": _conv_work, "attention": _attention_work}
SHAPE_GROUPS = {"gemm": _gemm_group, "conv": _conv_group, "attention": _attention_group}
SHAPE_POINTS = {"gemm": _gemm_point, "conv": conv_point, "attention": _attention_point}


VOLUMETRIC_FIT = "conv_volumetric"
STEM_FIT = "conv_stem"
# An ungrouped 1-D or 2-D convolution with fewer channels than this on one side (an RGB stem's 3 in, a mask
# head's 1 out) is a stem or head: its implicit GEMM's K (stem) or N (head) is narrower than one tensor-core
# vector of channels (4 fp32 / 8 half values, cuDNN Developer Guide "Tensor Core Operations"), and cuDNN runs
# CUDA-core kernels for it (`..._ffma_...`, `cutlass_80_simt_sgemm_...` on the H200 for KernelBench level 1's
# 3 -> 64 channel stems) whose corrections are not those of the model-shaped convolutions beside them.
STEM_CHANNELS = 8


def is_stem_or_head(key: tuple) -> bool:
    """An ungrouped convolution of fewer than STEM_CHANNELS channels in or out (a conv key, conv_key's fields)."""
    return key[8] == 1 and min(key[3], key[4]) < STEM_CHANNELS


GROUPED_FIT = "conv_grouped"


def is_grouped(key: tuple) -> bool:
    """A grouped convolution that is not depthwise: 1 < groups < C_in (a conv key, conv_key's fields)."""
    return 1 < key[8] < key[3]


def fitted_name(kind: str, key: tuple) -> str:
    """The profile's fitted correction model (timings.fitted) that prices a shape of this kind: a 3-D or
    transposed convolution has its own, and so have a 1-D or 2-D stem or head and a 1-D or 2-D grouped
    convolution (calibrate/time_model.py fit_families says why)."""
    if kind == "conv" and len(key) == KEY_LENGTH["conv"]:
        if key[10] == 3 or key[11]:
            return VOLUMETRIC_FIT
        if is_stem_or_head(key):
            return STEM_FIT
        if is_grouped(key):
            return GROUPED_FIT
    return kind


def fitted_fallback(name: str) -> str | None:
    """The fitted model that prices a family's shapes in a profile fitted before that family had its own (a
    profile written by an earlier `kernelcast calibrate`): the stems and heads' and the grouped convolutions' is
    the 1-D / 2-D one."""
    return "conv" if name in (STEM_FIT, GROUPED_FIT) else None
