"""cuDNN convolution workspaces in the predicted peak (predict/conv_workspace.py), against the H200's allocator.

Expected values are the H200's (torch 2.11, cuDNN 9.19): validation/probes/h200_conv_workspace.json.gz
(scripts/device/probe_conv_workspace.py) and ../shared/kernelbench/timing/H200_ours (KernelBench level 2 #100).
"""

from __future__ import annotations

import pytest

import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
import torch

from kernelcast.calibrate.workspace_model import case_key, label, operand_bytes
from kernelcast.capture import capture_workload
from kernelcast.predict import predict_capture
from kernelcast.predict.conv_workspace import pass_workspace_bytes

# Probe rows (conv_volumetric section): params and the workspace the H200's allocator saw during the call.
PROBED = [
    # an NCHW fp32 3-D convolution's input gradient: an NHWC engine over copies of the operands
    ({"dims": 3, "batch": 32, "c_in": 32, "c_out": 96, "kernel": 2, "stride": 1, "groups": 1, "size": 28,
      "dtype": "float32", "channels_last": False, "transposed": False, "spatial": [4, 28, 28],
      "kernel_shape": [2, 2, 2], "stride_shape": [1, 1, 1], "padding": 1, "pass": "input_grad"}, 65011712),
    # the same kind in channels_last_3d: the engine works in place
    ({"dims": 3, "batch": 16, "c_in": 16, "c_out": 96, "kernel": 2, "stride": 1, "groups": 1, "size": 16,
      "dtype": "float32", "channels_last": True, "transposed": False, "spatial": [16, 16, 16],
      "kernel_shape": [2, 2, 2], "stride_shape": [1, 1, 1], "padding": 1, "pass": "forward"}, 512),
    # a bf16 transposed 3-D convolution's input gradient, NCHW
    ({"dims": 3, "batch": 4, "c_in": 16, "c_out": 32, "kernel": 1, "stride": 2, "groups": 1, "size": 112,
      "dtype": "bfloat16", "channels_last": False, "transposed": True, "spatial": [16, 112, 112],
      "kernel_shape": [7, 1, 1], "stride_shape": [2, 2, 2], "padding": 1, "pass": "input_grad"}, 464519168),
]


@pytest.mark.parametrize("params,measured", PROBED)
def test_a_pass_workspace_is_the_class_the_h200_measured(params, measured):
    total = operand_bytes(params)
    predicted = pass_workspace_bytes(case_key(params), total)
    assert label(predicted / total) == label(measured / total)
    assert predicted == pytest.approx(measured, abs=0.05 * total)


class TransposedConv3dClampDivide(torch.nn.Module):
    """KernelBench level 2 #100's model (ConvTranspose3d, clamp, divide), written out."""

    def __init__(self):
        super().__init__()
        self.conv_transpose = torch.nn.ConvTranspose3d(32, 16, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.clamp(self.conv_transpose(x), min=-1.0) / 2.0


def test_a_transposed_3d_convolutions_peak_holds_its_workspace():
    # H200_ours, level2/100: mem_peak_bytes - mem_before_bytes of one call under no_grad
    measured_growth = 353807360 - 68213248

    def build():
        model = TransposedConv3dClampDivide().cuda()
        x = torch.randn(16, 32, 16, 32, 32, device="cuda")

        def step(x):
            with torch.no_grad():
                return model(x)

        return step, (x,)

    mem = predict_capture(capture_workload(build, "h200"), "h200").memory
    # the workspace (NCHW copies of input, weight and output: 152 MiB) sets the peak; without it, 240 MiB
    assert mem.peak_bytes - mem.resident_bytes == pytest.approx(measured_growth, rel=0.01)
    assert any("cuDNN convolution workspaces are in the peak" in n for n in mem.notes)


def test_the_workspace_note_says_none_where_no_convolution_takes_one():
    """A step whose convolutions all likely run workspace-free engines says so plainly, not '0.0 KiB at most'."""
    from kernelcast.predict.memory import CONV_NO_WORKSPACE_NOTE, CONV_WORKSPACE_NOTE, unmodelled_notes
    from helpers import contiguous, op

    conv = op("aten.convolution.default", {"input": contiguous((8, 64, 56, 56)), "weight": contiguous((64, 64, 3, 3))},
              [contiguous((8, 64, 56, 56))])
    assert unmodelled_notes((conv,), {}) == (CONV_NO_WORKSPACE_NOTE,)
    (note,) = unmodelled_notes((conv,), {conv.index: [3 << 20]})
    assert note == CONV_WORKSPACE_NOTE.format(largest="3.0 MiB")
