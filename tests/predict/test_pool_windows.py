"""Windowed NC(D)HW pooling priced by its window's taps, outputs, inputs and bytes (costs/pooling.py window_key,
calibrate/window_rates.py), and norms over several dims read at their whole row width (costs/norms.py).
Device figures: validation/h200_shape_kinds_grid_raw.json.gz (H200, torch 2.11)."""

import pytest

from helpers import contiguous, op
from kernelcast.calibrate.window_rates import fit
from kernelcast.predict.window_time import window_us
from kernelcast.costs import cost_of
from kernelcast.costs.pooling import WINDOW_KEY
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings, TensorMeta


def _model(gpu="h200"):
    return CalibratedModel(get_gpu(gpu), CaptureSettings(), load_profile("h200").data, get_gpu("h200"))


def _out(size, kernel, stride, padding):
    return (size + 2 * padding - kernel) // stride + 1


def _max_pool3d(shape, kernel, stride, padding, dtype="float32"):
    n, c, *spatial = shape
    out = (n, c, *(_out(s, kernel, stride, padding) for s in spatial))
    return op("aten.max_pool3d_with_indices.default",
              {"self": contiguous(shape, dtype), "kernel_size": [kernel] * 3, "stride": [stride] * 3,
               "padding": [padding] * 3, "dilation": [1, 1, 1], "ceil_mode": False},
              [contiguous(out, dtype), contiguous(out, "int64")])


def _avg_pool2d(shape, kernel, stride, padding, channels_last=False):
    n, c, h, w = shape
    x = (TensorMeta(shape, "float32", (h * w * c, 1, w * c, c)) if channels_last else contiguous(shape))
    out = (n, c, _out(h, kernel, stride, padding), _out(w, kernel, stride, padding))
    return op("aten.avg_pool2d.default", {"self": x, "kernel_size": [kernel, kernel], "stride": [stride, stride],
                                          "padding": [padding, padding]}, [contiguous(out)])


def test_a_pool_carries_its_window_and_a_channels_last_one_does_not():
    key = cost_of(_max_pool3d((16, 32, 64, 64, 64), 3, 2, 1)).key
    assert key[:5] == (WINDOW_KEY, "max_pool3d", 27, 16 * 32 * 32 ** 3, 16 * 32 * 64 ** 3)
    assert cost_of(_avg_pool2d((8, 64, 56, 56), 3, 2, 1)).key[:3] == (WINDOW_KEY, "avg_pool2d", 9)
    assert cost_of(_avg_pool2d((8, 64, 56, 56), 3, 2, 1, channels_last=True)).key[:1] != (WINDOW_KEY,)


@pytest.mark.parametrize("stride,padding,measured_us", [(1, 1, 4084.4), (2, 1, 519.3)])
def test_the_window_sets_the_time_where_bytes_do_not(stride, padding, measured_us):
    # H200, 3 x 3 x 3 max pool of 16 x 32 x 64^3 fp32: stride 1 ran 7.9x stride 2, the same input
    # (validation/h200_shape_kinds_grid_raw.json.gz); the byte curve had them 1.6x apart
    t = _model().estimate(cost_of(_max_pool3d((16, 32, 64, 64, 64), 3, stride, padding))).time_us
    assert t == pytest.approx(measured_us, rel=0.25)


def test_on_another_gpu_the_walk_or_the_bytes_bind():
    # KernelBench level 1 #43 (3 x 3 x 3 max pool, stride 2, dilation 3, 16 x 32 x 64^3 fp32), published: H200
    # 485 µs (walk-bound), A100-80GB 954 µs, L4 2.64 ms (its 300 GB/s for the 738 MB moved)
    x = contiguous((16, 32, 64, 64, 64))
    out = (16, 32, 30, 30, 30)
    pool = op("aten.max_pool3d_with_indices.default",
              {"self": x, "kernel_size": [3, 3, 3], "stride": [2, 2, 2], "padding": [1, 1, 1],
               "dilation": [3, 3, 3], "ceil_mode": False}, [contiguous(out), contiguous(out, "int64")])
    cost = cost_of(pool)
    h200 = _model().estimate(cost).time_us
    assert h200 == pytest.approx(485, rel=0.25)
    assert _model("a100-80gb").estimate(cost).time_us / h200 == pytest.approx(954 / 485, rel=0.3)
    assert _model("l4").estimate(cost).time_us / h200 == pytest.approx(2640 / 485, rel=0.3)


def test_the_fit_is_a_plane_per_pool_op_with_its_held_out_error():
    pytest.importorskip("scipy")
    costs = [cost_of(_max_pool3d((n, 16, s, s, s), k, st, k // 2)) for n in (1, 4) for s in (16, 32, 64)
             for k, st in ((2, 2), (3, 1), (3, 2))]
    truth = [2.0 + 1e-6 * c.key[2] * c.key[3] + 1e-7 * c.bytes for c in costs]
    fits = fit(list(zip(costs, truth)))
    assert set(fits) == {"max_pool3d"}
    line = fits["max_pool3d"]
    assert line["points"] == len(costs) and line["loo_median_error"] < 0.01
    c = costs[0]
    assert window_us(line, *c.key[2:5], c.bytes) == pytest.approx(truth[0], rel=0.01)
    assert fit(list(zip(costs[:5], truth[:5]))) == {}  # too few cases: the byte curve prices it


def test_a_layer_norm_over_several_dims_is_read_at_its_whole_row_width():
    # KernelBench level 1 #40 on the H200: 16 rows of 64 x 256 x 256 fp32, 8.35 ms of kernels; read at the
    # last dim's 256 wide it was priced 484 µs. The grid's 16 x 4M fp32 layer norm ran 8.32 ms.
    shape = (16, 64, 256, 256)
    stat = contiguous((16, 1, 1, 1), "float32")
    args = {"input": contiguous(shape), "normalized_shape": (64, 256, 256), "weight": contiguous((64, 256, 256)),
            "bias": contiguous((64, 256, 256)), "eps": 1e-5}
    cost = cost_of(op("aten.native_layer_norm.default", args, [contiguous(shape), stat, stat]))
    assert cost.key == (64 * 256 * 256, 4)
    assert _model().estimate(cost).time_us == pytest.approx(8350, rel=0.2)


def test_3d_pools_take_the_warp_lanes_of_their_output_rows():
    """NCDHW 3-D pools run blocks of 32 x 8 threads over (output width, output height) (DilatedMaxPool3d.cu,
    AveragePool3d.cu): a 15-wide output row takes a whole warp. KernelBench L2 #6 on the H200 (torch 2.11,
    validation/kernelbench/h200_kernels.json.gz): its max pool of 128 x 16 x 14 x 30 x 30 fp32 by 2 ran 121 µs,
    the next one (7 x 7 rows of the result) 25.6 µs; fitted by outputs they were priced at 56 and 10 µs."""
    first = cost_of(_max_pool3d((128, 16, 14, 30, 30), 2, 2, 0))
    _, pool, taps, lanes, inputs, *_ = first.key
    assert (pool, taps, inputs) == ("max_pool3d", 8, 128 * 16 * 14 * 30 * 30)
    assert lanes == 128 * 16 * 7 * 15 * 32  # 15 outputs a row, 32 lanes
    second = cost_of(_max_pool3d((128, 16, 7, 15, 15), 2, 2, 0))
    assert second.key[3] == 128 * 16 * 3 * 7 * 32
    model = _model()
    assert model.estimate(first).time_us == pytest.approx(121.2, rel=0.15)
    assert model.estimate(second).time_us == pytest.approx(25.6, rel=0.2)
    # rows of whole warps take no padding; 2-D pools launch a flat grid over their outputs
    wide = cost_of(_max_pool3d((2, 16, 16, 64, 64), 2, 2, 0))
    assert wide.key[3] == 2 * 16 * 8 * 32 * 32
    flat = cost_of(_avg_pool2d((8, 16, 30, 30), 2, 2, 0))
    assert flat.key[3] == 8 * 16 * 15 * 15
