"""The copies PyTorch's CUDA convolution makes before its kernels run, and the layout cuDNN then sees.

The rule is PyTorch's own (torch 2.11; aten/src/ATen/native/Convolution.cpp, cudnn/ConvShared.cpp,
ConvUtils.h, cuda/DepthwiseConv2d.cu, c10/core/MemoryFormat.h):
- A 1-D convolution's input is made contiguous (`input.contiguous()`, "avoid accidentally going through NHWC
  for permuted 3d input"), then every operand is viewed as 2-D with height 1 (view4d).
- cuDNN runs in channels_last when the input or the weight is strided like channels_last
  (cudnn_conv_suggest_memory_format), else in NCHW. Forward: the input and the weight are made contiguous in
  that format (_convolution, cudnn_convolution_forward_out).
- cuDNN backward: the input is made contiguous in that format when the weight gradient is wanted; grad_output
  is converted to the input's suggested format (`grad_output.to(input.suggest_memory_format())`,
  cudnn_convolution_backward: a copy only when grad_output suggests the other format, to_will_alias); the input gradient then makes the weight and grad_output contiguous in the
  format of (grad_output, weight), the weight gradient grad_output and the input in that of (input,
  grad_output).
- PyTorch's own depthwise kernel: input, weight and grad_output are made row-major contiguous
  (`expect_contiguous`), the input only for the weight gradient and the weight only for the input gradient.
Each copy is one copy kernel (`.contiguous` of a tensor already in the format is free).

Seen on the H200 (torch 2.11, validation/zoo_measured.json.gz): zoo audio_spectrogram_forward's conv1d of a
transposed mel spectrogram ran a copy under `_convolution -> contiguous` before cuDNN; zoo grouped_conv_nchw and
grouped_conv_channels_last ran one copy of the expanded grad_output of `o.sum()` in convolution_backward.
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import TensorMeta

from .common import row_major

# c10's order for reading channels_last strides: C, W, H, N (is_channels_last_strides_2d_s4); for a 5-D tensor
# (channels_last_3d, is_channels_last_strides_3d_s5) C, W, H, D, N.
CHANNELS_LAST_DIM_ORDER = (1, 3, 2, 0)
CHANNELS_LAST_DIM_ORDERS = {4: CHANNELS_LAST_DIM_ORDER, 5: (1, 4, 3, 2, 0)}


def strides_like_channels_last(t: TensorMeta) -> bool:
    """c10's is_channels_last_strides_2d / _3d (MemoryFormat.h): a 4-D (5-D) tensor whose strides grow in the
    order C, W, H, (D,) N, size-1 dims not deciding; ambiguous cases (a zero channel stride, N111) default to
    NCHW. This is what `suggest_memory_format()` reads."""
    if len(t.shape) not in CHANNELS_LAST_DIM_ORDERS or t.stride[1] == 0:
        return False
    lowest = 0
    for d in CHANNELS_LAST_DIM_ORDERS[len(t.shape)]:
        if t.shape[d] == 0 or t.stride[d] < lowest:
            return False
        if d == 0 and lowest == t.stride[1]:
            return False
        lowest = t.stride[d] * (t.shape[d] if t.shape[d] > 1 else 1)
    return True


def channels_last_contiguous(t: TensorMeta) -> bool:
    """`is_contiguous(memory_format=torch.channels_last)` (channels_last_3d for 5-D): dense NHWC (NDHWC), size-1
    dims with any stride."""
    if len(t.shape) not in CHANNELS_LAST_DIM_ORDERS:
        return False
    expected = 1
    for d in CHANNELS_LAST_DIM_ORDERS[len(t.shape)]:
        if t.shape[d] != 1:
            if t.stride[d] != expected:
                return False
            expected *= t.shape[d]
    return True


def contiguous_in(t: TensorMeta, nhwc: bool) -> bool:
    """Whether `t.contiguous(format)` returns t itself: already dense in that format."""
    return channels_last_contiguous(t) if nhwc else row_major(t)


def in_format(t: TensorMeta, nhwc: bool) -> TensorMeta:
    """t after `.contiguous(format)`: the same shape with that format's dense strides."""
    if contiguous_in(t, nhwc):
        return t
    strides = [0] * len(t.shape)
    step = 1
    order = CHANNELS_LAST_DIM_ORDERS[len(t.shape)] if nhwc else tuple(reversed(range(len(t.shape))))
    for d in order:
        strides[d] = step
        step *= max(t.shape[d], 1)
    return dataclasses.replace(t, stride=tuple(strides), offset=0)


def cudnn_nhwc(a: TensorMeta, b: TensorMeta) -> bool:
    """cudnn_conv_suggest_memory_format(a, b) for 2-D and 3-D convolutions: channels_last when either suggests
    it."""
    return len(b.shape) in CHANNELS_LAST_DIM_ORDERS and (strides_like_channels_last(a) or strides_like_channels_last(b))


def view4d(t: TensorMeta) -> TensorMeta:
    """A 1-D convolution operand (N, C, L) viewed as (N, C, 1, L): `unsqueeze(2)`, whose new stride is L * the
    last stride."""
    if len(t.shape) != 3:
        return t
    return dataclasses.replace(t, shape=(*t.shape[:2], 1, t.shape[2]),
                               stride=(*t.stride[:2], t.shape[2] * t.stride[2], t.stride[2]))


@dataclasses.dataclass(frozen=True)
class ConvOperands:
    """The operands as the backend gets them (4-D, in its format), the copies made on the way, and whether
    cuDNN runs channels_last."""

    x: TensorMeta
    w: TensorMeta
    copies: tuple[TensorMeta, ...]  # each tensor as it was before its copy
    nhwc: bool


def _make(t: TensorMeta, nhwc: bool, copies: list) -> TensorMeta:
    if not contiguous_in(t, nhwc):
        copies.append(t)
    return in_format(t, nhwc)


def _to_format(t: TensorMeta, nhwc: bool, copies: list) -> TensorMeta:
    """`t.to(memory_format)`: an alias when t already suggests that format (to_will_alias), else a copy."""
    if strides_like_channels_last(t) == nhwc:
        return t
    copies.append(t)
    return in_format(t, nhwc)


def _as_2d(x: TensorMeta, copies: list) -> TensorMeta:
    """The 1-D path's `input.contiguous()`, then view4d; a 2-D input as it is."""
    if len(x.shape) == 3:
        return view4d(_make(x, False, copies))
    return x


def forward_operands(x: TensorMeta, w: TensorMeta, native_depthwise: bool) -> ConvOperands:
    """What aten::convolution copies before its kernel (see the module docstring), for an input x of shape
    (N, C, L) or (N, C, H, W) and a weight w of (C_out, C_in / groups, *kernel)."""
    copies: list = []
    x, w = _as_2d(x, copies), view4d(w)
    nhwc = not native_depthwise and cudnn_nhwc(x, w)
    x, w = _make(x, nhwc, copies), _make(w, nhwc, copies)
    return ConvOperands(x, w, tuple(copies), nhwc)


def backward_operands(grad_out: TensorMeta, x: TensorMeta, w: TensorMeta, mask, native_depthwise: bool,
                      transposed: bool = False) -> ConvOperands:
    """What aten::convolution_backward copies before its kernels (see the module docstring); mask is
    output_mask (input, weight, bias gradients). A transposed convolution's backward makes grad_output
    contiguous in the input's suggested format (cudnn_convolution_transpose_backward) where the plain one
    converts it with `.to`."""
    copies: list = []
    x, w, grad_out = _as_2d(x, copies), view4d(w), view4d(grad_out)
    want_input, want_weight = bool(mask[0]), bool(mask[1])
    if native_depthwise:
        grad_out = _make(grad_out, False, copies)
        if want_weight:
            x = _make(x, False, copies)
        if want_input:
            w = _make(w, False, copies)
        return ConvOperands(x, w, tuple(copies), False)
    nhwc = cudnn_nhwc(x, w)
    if want_weight:
        x = _make(x, nhwc, copies)
    suggested = strides_like_channels_last(x)
    grad_out = _make(grad_out, suggested, copies) if transposed else _to_format(grad_out, suggested, copies)
    if want_input:
        fmt = cudnn_nhwc(grad_out, w)
        w, grad_out = _make(w, fmt, copies), _make(grad_out, fmt, copies)
    if want_weight:
        fmt = cudnn_nhwc(x, grad_out)
        grad_out, x = _make(grad_out, fmt, copies), _make(x, fmt, copies)
    return ConvOperands(x, w, tuple(copies), nhwc)
