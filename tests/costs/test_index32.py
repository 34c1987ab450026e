"""Launches PyTorch's CUDA host code adds for tensors too large for 32-bit index math (TensorIterator's
with_32bit_indexing) and for 3-D pools whose grid z would pass 65535 blocks. The step-level counts are what the
workplace H200 ran (torch 2.11, validation/kernelbench/h200_kernels.json.gz), with the KernelBench program each
comes from."""

import torch
import torch.nn.functional as F

from kernelcast.capture import capture
from kernelcast.costs import cost_of
from kernelcast.costs.tensor_iterator import INT32_MAX, index32_parts
from kernelcast.records import TensorMeta


def _contiguous(shape, dtype="float32"):
    stride, step = [], 1
    for n in reversed(shape):
        stride.insert(0, step)
        step *= n
    return TensorMeta(tuple(shape), dtype, tuple(stride))


def _kernels(cap, name):
    return [cost_of(o).kernels for o in cap.capture.ops if o.name == name and o.parent < 0]


def test_parts_follow_the_largest_byte_offset():
    fits = (INT32_MAX + 1) // 4  # 2^29 fp32 elements: the last byte offset is 2^31 - 4
    assert index32_parts([_contiguous((fits,))]) == 1
    assert index32_parts([_contiguous((fits + 1,))]) == 2
    assert index32_parts([_contiguous((fits,), "float64")]) == 2  # the same elements, twice the bytes
    # halves of halves until each fits: 4f + 1 -> 2f (f, f) and 2f + 1 (f, f + 1 -> two): five kernels
    assert index32_parts([_contiguous((4 * fits + 1,))]) == 5
    # a broadcast operand adds no extent; the output's does
    assert index32_parts([_contiguous((2 * fits,)), TensorMeta((1,), "float32", (0,))]) == 2


def test_elementwise_ops_over_4_gb_launch_twice():
    # H200, KernelBench L2 #34 (ConvTranspose3d -> LayerNorm -> GELU -> scaling, output 128 x 64 x 32 x 64 x 64
    # fp32, 4.3 GB): the convolution's bias add_, gelu and mul ran two kernels each; L2 #3's add two.
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(128, 32, 16, 32, 32, device="cuda")
            conv = torch.nn.ConvTranspose3d(32, 64, 4, stride=2, padding=1).cuda()
        y = conv(x)
        z = F.gelu(y) * 2.0
        w = (y + 1.0).sum(dim=1)
        del z, w
    conv_parts = [p.kernels for o in cap.capture.ops if o.name == "convolution" for p in cost_of(o).parts]
    assert conv_parts == [2]
    assert _kernels(cap, "gelu") == [2]
    assert _kernels(cap, "mul") == [2]
    assert _kernels(cap, "add") == [2]


def test_a_3d_pool_launches_once_per_65535_frames():
    # H200, KernelBench L2 #3: avg_pool3d (kernel 2) over 128 x 64 x 32 x 64 x 64 fp32: 128 x 64 x 16 output frames
    # are 131072 z-blocks, three launches.
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(128, 64, 32, 64, 64, device="cuda")
            small = torch.randn(16, 64, 32, 64, 64, device="cuda")
        F.avg_pool3d(x, 2)
        F.avg_pool3d(small, 2)
        F.max_pool3d(x, 2)
    assert _kernels(cap, "avg_pool3d") == [3, 1]
    assert _kernels(cap, "max_pool3d_with_indices") == [3]  # DilatedMaxPool3d.cu's same loop


def test_a_3d_pool_backward_launches_over_its_gradient_frames():
    # An H100 (validation/probes/size_rules/size_rules_run1.json, case avg_pool3d_backward):
    # `F.avg_pool3d(x, 2).sum().backward()` over 64 x 64 x 34 x 16 x 16 fp32 ran avg_pool3d_cuda_update_grad_input
    # twice (64 x 64 x 17 gradient frames: 69632 z-blocks), after a zero fill and a copy of the expanded gradient
    # to contiguous (AveragePool3d.cu `gradOutput.contiguous()`). F.avg_pool3d(x, 2) passes stride (): the kernel
    # size, not the stride-1 path over the input's 139264 frames.
    with capture("h100-sxm") as cap:
        with cap.paused():
            x = torch.randn(64, 64, 34, 16, 16, device="cuda", requires_grad=True)
        F.avg_pool3d(x, 2).sum().backward()
    assert _kernels(cap, "avg_pool3d_backward") == [1 + 2 + 1]
