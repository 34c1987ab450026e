"""Layer and RMS norms priced by their row width: the kernel (vectorized or not, layer or RMS) decides the memory
kind, each measured width's curve is read at the op's size and the widths either side interpolated, and a backward
with gamma and beta reads dY and X twice. Device figures: validation/h200_norm_layout_linalg_raw.json.gz (H200,
torch 2.11, section norm_width_grid) and the zoo's profiled steps."""

import math

import pytest

from helpers import contiguous, op
from kernelcast.costs import cost_of
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel, _across_widths, _MemoryPoint
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings


def _layer_norm(shape, dtype="bfloat16", weight=True):
    x, width = contiguous(shape, dtype), shape[-1]
    stat = contiguous((*shape[:-1], 1), "float32")
    args = {"input": x, "normalized_shape": (width,), "weight": contiguous((width,), dtype) if weight else None,
            "bias": contiguous((width,), dtype) if weight else None, "eps": 1e-5}
    return op("aten.native_layer_norm.default", args, [contiguous(shape, dtype), stat, stat])


def _rms_norm(shape, dtype="bfloat16"):
    width = shape[-1]
    args = {"input": contiguous(shape, dtype), "normalized_shape": (width,), "weight": contiguous((width,), dtype),
            "eps": 1e-5}
    return op("aten._fused_rms_norm.default", args, [contiguous(shape, dtype), contiguous((*shape[:-1], 1), "float32")])


def _layer_norm_backward(shape, dtype="float32", weight=True):
    width = shape[-1]
    stat = contiguous((*shape[:-1], 1), "float32")
    args = {"grad_out": contiguous(shape, dtype), "input": contiguous(shape, dtype), "normalized_shape": (width,),
            "mean": stat, "rstd": stat, "weight": contiguous((width,), dtype) if weight else None,
            "bias": contiguous((width,), dtype) if weight else None, "output_mask": (True, weight, weight)}
    outs = [contiguous(shape, dtype), contiguous((width,), dtype) if weight else None,
            contiguous((width,), dtype) if weight else None]
    return op("aten.native_layer_norm_backward.default", args, outs)


def test_the_kernel_decides_the_kind():
    assert cost_of(_layer_norm((4096, 768))).kind == "norm"
    assert cost_of(_rms_norm((4096, 768))).kind == "rms_norm"
    # a width not a multiple of 4: RowwiseMoments + LayerNormForward, the same two kernels for both norms
    assert cost_of(_layer_norm((4096, 770))).kind == "norm_unvectorized"
    assert cost_of(_rms_norm((4096, 770))).kind == "norm_unvectorized"


def test_a_backward_with_gamma_and_beta_reads_its_inputs_twice():
    with_weight = cost_of(_layer_norm_backward((4096, 768)))
    without = cost_of(_layer_norm_backward((4096, 768), weight=False))
    x_bytes = 4096 * 768 * 4
    # dY and X read by the input-gradient kernel and again by GammaBeta: 2 x 2 x 12.6 MB, + mean / rstd and gamma
    assert with_weight.bytes_read - without.bytes_read == pytest.approx(2 * x_bytes, rel=0.01)


def _points(width, rates_by_bytes):
    return [_MemoryPoint(math.log2(b), math.log2(width), 1.0, math.log(r)) for b, r in rates_by_bytes]


def test_widths_either_side_are_interpolated_in_log_width():
    points = _points(64, [(1 << 20, 100.0), (1 << 24, 200.0)]) + _points(256, [(1 << 20, 400.0), (1 << 24, 800.0)])
    # 128 is halfway between 64 and 256 in log width: the geometric mean of their rates at this size
    at_128 = math.exp(_across_widths(points, 24.0, 7.0, 1.0))
    assert at_128 == pytest.approx(math.sqrt(200.0 * 800.0))
    # beyond the widest measured width its own curve holds
    assert math.exp(_across_widths(points, 24.0, 12.0, 1.0)) == pytest.approx(800.0)
    # a width with a single point cannot make a curve and is left out
    lone = _points(128, [(1 << 24, 5000.0)])
    assert math.exp(_across_widths(points + lone, 24.0, 7.0, 1.0)) == pytest.approx(at_128)


@pytest.mark.parametrize("make,shape,measured_us", [
    # zoo convnext_forward_bf16: ConvNeXt's first stage layer norm, the norm kernel alone (its input contiguous)
    (_layer_norm, (32, 56, 56, 96), 114.4),
    # zoo convnext_forward_bf16: its last stage, 768 wide
    (_layer_norm, (32, 7, 7, 768), 5.2),
    # zoo layernorm_odd_widths: nn.RMSNorm(2040) on 4096 rows, fp32
    (lambda s: _rms_norm(s, "float32"), (4096, 2040), 20.3),
])
def test_norms_against_the_device(make, shape, measured_us):
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    # the width's own rate: a 96-wide bf16 layer norm streams at 330 GB/s, a 768-wide one at 1.0-1.5 TB/s
    assert model.estimate(cost_of(make(shape))).time_us == pytest.approx(measured_us, rel=0.2)
