"""The copies PyTorch's CUDA convolution makes of operands not in the backend's layout (costs/conv_layout.py),
each checked against a launch chain the H200 ran (torch 2.11, validation/zoo_measured.json.gz)."""

import pytest

from helpers import contiguous, op
from kernelcast.costs import cost_of
from kernelcast.costs.conv_layout import (backward_operands, channels_last_contiguous, forward_operands,
                                          strides_like_channels_last)
from kernelcast.records import TensorMeta


def nhwc(shape, dtype="float16"):
    n, c, h, w = shape
    return TensorMeta(tuple(shape), dtype, (h * w * c, 1, w * c, c), "cuda")


def expanded(shape, dtype="float16"):
    """What `o.sum().backward()` hands the convolution: a scalar gradient expanded to o's shape."""
    return TensorMeta(tuple(shape), dtype, (0,) * len(shape), "cuda")


# zoo grouped_conv_*: x 64 x 1024 x 14 x 14 fp16, w 1024 x 32 x 3 x 3, groups 32, stride 2, o = conv(x, w)
X, W, GRAD = (64, 1024, 14, 14), (1024, 32, 3, 3), (64, 1024, 7, 7)


def test_channels_last_strides_are_read_as_c10_reads_them():
    assert strides_like_channels_last(nhwc(X)) and channels_last_contiguous(nhwc(X))
    assert not strides_like_channels_last(contiguous(X)) and not channels_last_contiguous(contiguous(X))
    assert not strides_like_channels_last(expanded(X))  # a zero channel stride defaults to NCHW
    # N x 1 x 1 x 1 is ambiguous: NCHW (c10's MemoryFormat.h)
    assert not strides_like_channels_last(contiguous((8, 1, 1, 1)))


@pytest.mark.parametrize("layout", [contiguous, nhwc])
def test_an_expanded_grad_output_is_copied_once(layout):
    # H200: one copy kernel in convolution_backward in both layouts (NCHW under `contiguous -> clone`,
    # channels_last under `to -> _to_copy`), besides cuDNN's weight-gradient kernels
    x, w = layout(X), layout(W)
    ops = backward_operands(expanded(GRAD), x, w, (False, True, False), native_depthwise=False)
    assert len(ops.copies) == 1 and ops.copies[0].stride == (0, 0, 0, 0)
    assert ops.nhwc == (layout is nhwc)
    # a dense grad_output in the input's layout is not copied
    assert backward_operands(layout(GRAD), x, w, (True, True, False), False).copies == ()


def test_a_transposed_conv1d_input_is_made_contiguous():
    # H200, zoo audio_spectrogram_forward: conv1d of (mel @ spec).transpose(1, 2), 8 x 80 x 1001 fp32: a copy
    # under `_convolution -> contiguous -> clone` before cuDNN's kernels
    x = TensorMeta((8, 80, 1001), "float32", (80 * 1001, 1, 80), "cuda")
    w = contiguous((256, 80, 3))
    ops = forward_operands(x, w, native_depthwise=False)
    assert len(ops.copies) == 1 and ops.x.shape == (8, 80, 1, 1001) and not ops.nhwc
    assert forward_operands(contiguous(x.shape), w, False).copies == ()


def test_a_channels_last_weight_makes_cudnn_copy_an_nchw_input():
    # cudnn_conv_suggest_memory_format: channels_last when either operand is; the other is then made so
    ops = forward_operands(contiguous(X), nhwc(W), native_depthwise=False)
    assert ops.nhwc and len(ops.copies) == 1 and ops.copies[0].shape == X


def test_the_copies_are_parts_of_the_conv_cost():
    x, w, g = contiguous(X, "float16"), contiguous(W, "float16"), expanded(GRAD)
    args = {"grad_output": g, "input": x, "weight": w, "bias_sizes": None, "stride": (2, 2), "padding": (1, 1),
            "dilation": (1, 1), "transposed": False, "output_padding": (0, 0), "groups": 32,
            "output_mask": (False, True, False)}
    cost = cost_of(op("aten.convolution_backward.default", args, [None, contiguous(W, "float16"), None]))
    (copy,) = cost.parts
    # a broadcast source of one value: each distinct element read once, every element written, a plain copy
    assert copy.kind == "copy" and copy.bytes_written == 64 * 1024 * 49 * 2 and copy.bytes_read == 2


def ndhwc(shape, dtype="float32"):
    n, c, d, h, w = shape
    return TensorMeta(tuple(shape), dtype, (d * h * w * c, 1, h * w * c, w * c, c), "cuda")


def test_channels_last_3d_is_read_as_c10_reads_it():
    # is_channels_last_strides_3d_s5: strides grow C, W, H, D, N
    x = (2, 16, 8, 32, 32)
    assert strides_like_channels_last(ndhwc(x)) and channels_last_contiguous(ndhwc(x))
    assert not strides_like_channels_last(contiguous(x)) and not channels_last_contiguous(contiguous(x))
    ops = forward_operands(contiguous(x), ndhwc((64, 16, 3, 3, 3)), native_depthwise=False)
    assert ops.nhwc and len(ops.copies) == 1 and ops.copies[0].shape == x
    assert ops.x.stride == ndhwc(x).stride


def test_a_3d_conv_is_keyed_by_its_mean_sizes():
    from kernelcast.costs.matmul import conv_key, spatial_mean

    # KernelBench level 1 #66: a 16 x 128 x 256 clip, a 3 x 5 x 7 kernel: keyed by their geometric means, so
    # that size ** 3 and kernel ** 3 stay its positions and taps
    x, w = contiguous((8, 3, 16, 128, 256), "float32"), contiguous((64, 3, 3, 5, 7), "float32")
    args = {"input": x, "weight": w, "bias": None, "stride": (1, 1, 1), "padding": (0, 0, 0),
            "dilation": (1, 1, 1), "transposed": False, "output_padding": (0, 0, 0), "groups": 1}
    key = conv_key(x, w, op("aten.convolution.default", args, [contiguous((8, 64, 14, 124, 250))]), "conv_fwd")
    assert key == ("conv_fwd", "float32", False, 3, 64, 5, 1, 81, 1, 8, 3, False, 0, 1, 0)
    assert spatial_mean((16, 128, 256)) == 81 and abs(81 ** 3 / (16 * 128 * 256) - 1) < 0.02
    assert spatial_mean((7,)) == 7 and spatial_mean(()) == 1
