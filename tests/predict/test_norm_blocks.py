"""NCHW batch-norm backward: one thread block per channel (calibrate/norm_blocks.py)."""

import math

import pytest

from helpers import contiguous, op
from kernelcast.calibrate.norm_blocks import channel_blocks, fit
from kernelcast.costs import cost_of
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel, batch_norm_blocks_us, batch_norm_prior_us
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings


def _case(shape, dtype, us):
    stride = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    x = {"T": list(shape), "stride": stride, "dtype": dtype}
    return {"kind": "native_batch_norm_bwd", "device_us": us,
            "ops": [{"op": "aten.native_batch_norm_backward.default", "args": {"input": x}}]}


def test_the_prior_fit_recovers_a_block_model():
    pytest.importorskip("numpy")
    truth = {"blocks_per_sm": 2, "floor_us": 3.0, "ns_per_element": {"2": 1.5, "4": 2.0}}
    shapes = [(8, c, s, s) for c in (16, 64, 256, 512, 1024) for s in (7, 28, 56)]
    cases = [_case(sh, dt, batch_norm_prior_us(truth, sh[1], sh[0], sh[2] * sh[3], 2 if dt == "bfloat16" else 4, 132))
             for sh in shapes for dt in ("bfloat16", "float32")]
    got = fit(cases, 132)  # 30 points: too few for the correction, the prior alone
    assert got["blocks_per_sm"] == 2 and got["points"] == len(cases) and "correction" not in got
    assert got["floor_us"] == pytest.approx(3.0, rel=1e-3)
    assert got["ns_per_element"]["2"] == pytest.approx(1.5, rel=1e-3)
    assert got["prior_median_error"] < 1e-3


def test_shipped_fit_and_its_held_out_error():
    section = load_profile("h200").data["timings"]["batch_norm_backward_blocks"]
    held_out = section["held_out"]
    assert held_out["median_error"] < held_out["prior_median_error"]  # why the correction is used
    assert section["points"] >= 200


def test_channels_last_inputs_are_other_kernels():
    assert channel_blocks([32, 64, 56, 56], [200704, 1, 3584, 64], "bfloat16") is None
    assert channel_blocks([32, 64, 56, 56], [200704, 3136, 56, 1], "bfloat16") == (64, 32, 3136, 2)


def test_few_channels_take_as_long_as_their_reduction():
    # H200, zoo mobilenet_train: NCHW bf16 batch-norm backward of (32, 16, 112, 112) took 500 µs; the bytes at
    # the batch-norm curve's rate gave 149 µs. 16 blocks, 401408 values each: the block time decides.
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    x = contiguous((32, 16, 112, 112), "bfloat16")
    vec = contiguous((16,), "float32")
    backward = op("aten.native_batch_norm_backward.default",
                  {"grad_out": x, "input": x, "weight": vec, "running_mean": vec, "running_var": vec,
                   "save_mean": vec, "save_invstd": vec, "train": True, "eps": 1e-5,
                   "output_mask": [True, True, True]}, [x, vec, vec])
    cost = cost_of(backward)
    assert cost.key == ("blocks", 16, 32, 112 * 112, 2)
    assert 400 < model.estimate(cost).time_us < 650


def test_an_input_still_in_l2_runs_at_the_l2_resident_fit():
    # H200, zoo mobilenet_train: the forward statistics of (32, 16, 112, 112) bf16 took 182-192 µs right after
    # the convolution that wrote the input; bn_grid measured the same call at 339 µs from HBM, 174 µs from L2
    fit = load_profile("h200").data["timings"]["batch_norm_blocks"]
    cold = batch_norm_blocks_us(fit, 16, 32, 112 * 112, 2, 132)
    warm = batch_norm_blocks_us(fit, 16, 32, 112 * 112, 2, 132, l2_warm=1.0)
    assert 280 < cold < 400 and 140 < warm < 220
    assert batch_norm_blocks_us(fit, 16, 32, 112 * 112, 2, 132, l2_warm=0.5) == pytest.approx((cold + warm) / 2)


def _weight_norm_ops(shape, dim, dtype="float32"):
    v = contiguous(shape, dtype)
    g_shape = [shape[0]] + [1] * (len(shape) - 1) if dim == 0 else [1] * (len(shape) - 1) + [shape[-1]]
    g, norms = contiguous(g_shape, dtype), contiguous(g_shape, "float32")
    forward = op("aten._weight_norm_interface.default", {"v": v, "g": g, "dim": dim}, [v, norms])
    backward = op("aten._weight_norm_interface_backward.default",
                  {"grad_w": v, "saved_v": v, "saved_g": g, "saved_norms": norms, "dim": dim}, [v, g])
    return forward, backward


def test_weight_norm_runs_one_kernel_each_way_keyed_by_its_blocks():
    # H200, zoo wav2vec2_train (torch 2.11): the positional conv's weight (768, 48, 128) normed over dim 2 ran
    # weight_norm_fwd_last_dim_kernel once forward and weight_norm_bwd_last_dim_kernel once backward.
    forward, backward = _weight_norm_ops((768, 48, 128), 2)
    for record, kind in ((forward, "weight_norm_columns"), (backward, "weight_norm_columns_backward")):
        cost = cost_of(record)
        assert cost.kernels == 1 and cost.kind == kind
        # WeightNorm.cu: a block of 16 x 64 threads per 16 columns, walking all 768 x 48 rows
        assert cost.key == ("blocks", 8, 1, 768 * 48 * 16, 4)
    rows = cost_of(_weight_norm_ops((512, 256, 7), 0, "bfloat16")[0])
    assert rows.kind == "weight_norm_rows" and rows.key == ("blocks", 512, 1, 256 * 7, 2)


def test_few_weight_norm_blocks_take_as_long_as_their_walk():
    # H200 (validation/h200_weight_norm_grid_raw.json.gz): (36864, 128) fp32 over the last dim, 8 blocks,
    # 335 us forward for 38 MB, where the bytes at the norm curve's rate would take ~15 us.
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    forward, _ = _weight_norm_ops((36864, 128), 1)
    assert model.estimate(cost_of(forward)).time_us == pytest.approx(335.3, rel=0.2)


def test_a_small_sort_and_topk_take_as_long_as_their_slices_blocks():
    # H200, zoo mixtral_forward (torch 2.11): sorting one slice of 2048 int64 expert ids ran radixSortKVInPlace
    # (28.8 us) with a copy, an arange and two memcpys: 32.2 us for 33 KB; the large-sort curve gave ~5 us.
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    ids = contiguous((2048,), "int64")
    sort = cost_of(op("aten.sort.default", {"self": ids, "dim": -1}, [ids, ids]))
    assert sort.kind == "sort_slices" and sort.key == ("blocks", 1, 1, 2048, 8)
    assert model.estimate(sort).time_us == pytest.approx(32.2, rel=0.25)
    # validation/h200_sort_grid_raw.json.gz: topk(k=2) over 4096 slices of 8 int64 took 26.0 us
    x, values = contiguous((4096, 8), "int64"), contiguous((4096, 2), "int64")
    topk = cost_of(op("aten.topk.default", {"self": x, "k": 2, "dim": -1}, [values, values]))
    assert topk.kind == "topk_slices" and topk.key == ("blocks", 4096, 1, 8, 8)
    assert model.estimate(topk).time_us == pytest.approx(26.0, rel=0.25)


def _nhwc(shape, dtype="bfloat16"):
    from kernelcast.records import TensorMeta
    n, c, h, w = shape
    return TensorMeta(tuple(shape), dtype, (h * w * c, 1, w * c, c), "cuda")


def _bn(x, backward=False):
    c = x.shape[1]
    stats = [contiguous((c,), "float32")] * 2
    if backward:
        args = {"grad_out": x, "input": x, "weight": contiguous((c,), "float32"), "train": True, "eps": 1e-5,
                "output_mask": (True, True, True)}
        return op("aten.native_batch_norm_backward.default", args, [x, *stats])
    args = {"input": x, "weight": contiguous((c,), "float32"), "bias": contiguous((c,), "float32"),
            "running_mean": stats[0], "running_var": stats[1], "training": True, "momentum": 0.1, "eps": 1e-5}
    return op("aten.native_batch_norm.default", args, [x, *stats])


@pytest.mark.parametrize("shape, forward, backward", [
    # H200, torch 2.11 (zoo resnet_train_channels_last, batch 32, bf16): statistics, running-stat update and
    # normalise, and the semaphore memset where the reduction is split across blocks (down to 14 x 14); at
    # 7 x 7 no memset. Backward: reduce and elementwise, the same memset rule.
    ((32, 64, 112, 112), 4, 3),
    ((32, 1024, 14, 14), 4, 3),
    ((32, 2048, 7, 7), 3, 2),
])
def test_channels_last_batch_norm_memsets_its_semaphores_only_where_it_splits(shape, forward, backward):
    assert cost_of(_bn(_nhwc(shape))).kernels == forward
    assert cost_of(_bn(_nhwc(shape), backward=True)).kernels == backward


def test_batch_norm_1d_on_rows_takes_the_channels_last_kernels():
    # batch_norm_choose_impl: a contiguous input whose channel stride is 1 ((N, C), BatchNorm1d) is channels_last
    from kernelcast.costs.norms import batch_norm_channels_last_kernels
    assert batch_norm_channels_last_kernels(contiguous((256, 512)))
    assert not batch_norm_channels_last_kernels(contiguous((32, 64, 56, 56)))
    assert cost_of(_bn(contiguous((256, 512)))).kind == "batch_norm_channels_last"
