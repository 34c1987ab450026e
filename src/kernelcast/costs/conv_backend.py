"""Which backend PyTorch runs a CUDA convolution on, from its conv_key (costs/matmul.py).

The rule is PyTorch's own (aten/src/ATen/native/Convolution.cpp: _select_conv_backend,
ConvParams::use_cudnn_depthwise and check_cudnn_depthwise_workload_with_filter, the cuDNN >= 8.2 branch). A
depthwise convolution (groups == C_in > 1, C_out a multiple of C_in, not transposed) runs PyTorch's own kernel
(DepthwiseConv2d.cu), which adds the bias itself, unless cuDNN takes it: always for a channels_last input, and
for fp16 NCHW input of at least 32 channels on the shapes the workload check names. A 1-D convolution runs as a
2-D one of height 1 (view1d_as_2d). Every other convolution here runs cuDNN, which leaves the bias to an add_.

Checked against every depthwise convolution the H200 ran in the calibration sweeps (978 of them, torch 2.11,
cuDNN 9.19; validation/h200_*_raw.json.gz): the rule names the kernel that ran (`conv_depthwise2d_*` or cuDNN's)
for each one.
"""

from __future__ import annotations

CUDNN = "cudnn"
NATIVE_DEPTHWISE = "depthwise"
CUDNN_DEPTHWISE_MIN_CHANNELS = 32
CUDNN_DEPTHWISE_FILTERS = (1, 3, 5)
CUDNN_DEPTHWISE_MIN_WIDTH = 7


def _cudnn_depthwise_workload(dims: int, kernel: int, stride: int, width: int, channels: int, batch: int) -> bool:
    """check_cudnn_depthwise_workload_with_filter: whether an fp16 NCHW depthwise convolution goes to cuDNN."""
    if dims == 1 and stride == 1:  # height 1
        return True
    if dims == 1 and kernel != 1:  # its (1, k) filter is not square
        return False
    if kernel not in CUDNN_DEPTHWISE_FILTERS or width < CUDNN_DEPTHWISE_MIN_WIDTH:
        return False
    if stride == 1:
        return True
    if stride != 2:
        return False
    if batch == 1:
        return (kernel == 1 and width <= 28) or kernel in (3, 5)
    if kernel == 1:
        return batch <= 16 and channels >= 128 and width <= 7
    return channels >= 512 or (channels >= 256 and width >= 28)


def conv_backend(key: tuple) -> str:
    """CUDNN or NATIVE_DEPTHWISE for a conv_key (see the comment above for the source of the rule)."""
    _, dtype, channels_last, c_in, c_out, kernel, stride, size, groups, batch, dims, transposed = key[:12]
    depthwise = groups == c_in and groups > 1 and c_out % c_in == 0 and not transposed
    if not depthwise or channels_last:
        return CUDNN
    if dtype == "float16" and c_in >= CUDNN_DEPTHWISE_MIN_CHANNELS and \
            _cudnn_depthwise_workload(dims, kernel, stride, size, c_in, batch):
        return CUDNN
    return NATIVE_DEPTHWISE
