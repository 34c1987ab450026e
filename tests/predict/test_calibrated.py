"""The calibrated kernel model, L2 residency, profile building, and predicted-vs-measured matching."""

import dataclasses
import math
import subprocess
import sys

import pytest

from helpers import contiguous, op
from kernelcast.costs import Cost
from kernelcast.devices import get_gpu
from kernelcast.measure import KernelTime, Measurement
from kernelcast.predict import predict_capture
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.predict.l2 import L2Tracker
from kernelcast.profiles import load_profile
from kernelcast.records import Capture, CaptureSettings, OpRecord, TensorMeta
from kernelcast.validate import compare

PROFILE = load_profile("h200")


def _model(gpu="h200"):
    return CalibratedModel(get_gpu(gpu), CaptureSettings(), PROFILE.data, get_gpu("h200"))


def test_shipped_profile_names_its_origin():
    data = PROFILE.data
    assert data["format"] == 1 and data["device_name"].startswith("NVIDIA H200")
    assert data["torch"] and data["date"] and data["command"].startswith("kernelcast calibrate")
    assert data["timings"]["gemm"] and data["timings"]["memory"]["pointwise"]


def _square_rows():
    return [r for r in PROFILE.data["timings"]["gemm"] if r[0] == "bfloat16" and r[4] == r[5] == r[6] == 4096
            and not r[1] and not r[2] and not r[3]]


def test_gemm_at_a_measured_shape_takes_the_measured_time():
    rows = _square_rows()  # mm and the grad-input mm have this same layout and shape: both were measured
    row = rows[0]
    cost = Cost(flops=row[-1], kernels=row[7], math="matmul", dtype="bfloat16", kind="gemm", key=tuple(row[:7]))
    geometric_mean = math.exp(sum(math.log(r[8]) for r in rows) / len(rows))
    assert _model().estimate(cost).time_us == pytest.approx(geometric_mean)


def test_other_gpus_scale_by_datasheet_ratios_and_say_so():
    row = _square_rows()[0]
    cost = Cost(flops=row[-1], kernels=row[7], math="matmul", dtype="bfloat16", kind="gemm", key=tuple(row[:7]))
    a100, h200 = _model("a100"), _model()
    ratio = get_gpu("h200").peak_flops["bf16_tensor"] / get_gpu("a100").peak_flops["bf16_tensor"]
    issue = get_gpu("h200").sm_cycles_per_s / get_gpu("a100").sm_cycles_per_s
    # bf16 tensor-core GEMMs have no published evidence (KernelBench is fp32): the datasheet ratios alone, the
    # FLOPs at the H200's peak by the peaks' ratio and the rest of its measured time by SMs x clock
    at_peak = cost.flops / get_gpu("h200").peak_flops["bf16_tensor"] * 1e6
    beyond = h200.estimate(cost).time_us - h200.floor_us - at_peak
    assert beyond > 0
    assert a100.estimate(cost).time_us == pytest.approx(h200.floor_us + at_peak * ratio + beyond * issue)
    assert "fitted to KernelBench's published timings (torch 2.5)" in a100.source


def test_memory_bound_time_grows_with_bytes_and_l2_helps_streaming_kernels():
    model = _model()
    small = Cost(bytes_read=8e6, bytes_written=4e6, kind="pointwise", key=(1024, 4))
    large = Cost(bytes_read=8e8, bytes_written=4e8, kind="pointwise", key=(1024, 4))
    assert model.estimate(large).time_us > 30 * model.estimate(small).time_us  # 100x the bytes; small ones sit in L2-sized, faster territory
    assert model.estimate(small, l2_warm=1.0).time_us < model.estimate(small).time_us
    norm = Cost(bytes_read=8e6, bytes_written=4e6, kind="norm", key=(1024, 4))
    assert model.estimate(norm, l2_warm=1.0).time_us == model.estimate(norm).time_us


def test_bytes_warm_in_l2_carry_to_another_gpu_by_its_sms_and_clock_not_its_dram():
    # An L4 streams DRAM at 300 GB/s (1/16 of the H200's) but reads its 48 MB L2 at the pace of its 58 SMs
    # at 2 GHz: an elementwise op whose input is still in L2 must not be priced at the DRAM ratio.
    h200, l4 = _model(), _model("l4")
    cost = Cost(bytes_read=8e6, bytes_written=8e6, kind="pointwise", key=(1024, 4))
    cold, warm = l4.estimate(cost).time_us, l4.estimate(cost, l2_warm=1.0).time_us
    assert warm < cold
    dram = get_gpu("h200").mem_bw_bytes_per_s / get_gpu("l4").mem_bw_bytes_per_s
    issue = get_gpu("h200").sm_cycles_per_s / get_gpu("l4").sm_cycles_per_s
    assert issue < dram
    # the warm share of the H200's time (half the bytes: the read) carries by SMs x clock
    h200_cold = h200.estimate(cost).time_us
    work = h200_cold - h200.floor_us
    h200_warm_part = work * 0.5 / h200.l2_speedup(cost.bytes)
    carried_cold = l4._carried_memory_us(h200.floor_us + work * 0.5, cost.bytes * 0.5)
    factor = l4.achieved.factor("memory")
    assert warm == pytest.approx(carried_cold + h200_warm_part * issue * factor)
    # on the profiled GPU itself nothing changes: the measured L2 speed-up applies
    assert h200.estimate(cost, l2_warm=1.0).time_us == pytest.approx(
        h200_cold * 0.5 + h200_cold * 0.5 / h200.l2_speedup(cost.bytes))


def test_a_convolutions_bias_add_reads_the_output_cudnn_just_wrote_from_l2():
    # aten adds a convolution's bias in a kernel of its own after cuDNN's: it reads the output the convolution
    # has just written, in L2 where it fits (costs/matmul.py conv_bias_add, Cost.reads_just_written)
    from kernelcast.costs.matmul import conv_bias_add
    model = _model()
    small, large = contiguous((16, 64, 32, 32), "float32"), contiguous((64, 256, 128, 128), "float32")
    bias = contiguous((64,), "float32")
    for out, warm in ((small, True), (large, False)):  # 4 MiB fits the H200's 50 MB L2; 1 GiB does not
        part = conv_bias_add(out, bias)
        cold = dataclasses.replace(part, reads_just_written=0.0)
        assert (model._just_written_warm(part) > 0.99) is warm
        conv = Cost(flops=1e9, bytes_read=1e6, math="conv", dtype="float32", kind="conv", key=()).with_parts(part)
        alone = Cost(flops=1e9, bytes_read=1e6, math="conv", dtype="float32", kind="conv", key=()).with_parts(cold)
        assert (model.estimate(conv).time_us < model.estimate(alone).time_us) is warm


def test_uncovered_kinds_fall_back_to_the_datasheet_and_say_so():
    estimate = _model().estimate(Cost(flops=1e9, bytes_read=1e6, kernels=1, math="matmul", dtype="bfloat16",
                                      kind="gemm", key=()))
    assert estimate.roof.startswith("datasheet:")


def test_l2_tracker_follows_storages():
    l2 = L2Tracker(capacity_bytes=10_000)
    a = TensorMeta((1000,), "float32", (1,), "cuda", storage=1)  # 4000 bytes
    b = TensorMeta((1000,), "float32", (1,), "cuda", storage=2)
    c = TensorMeta((1000,), "float32", (1,), "cuda", storage=3)
    produce = OpRecord(0, "aten.relu.default", {"self": a}, (b,))
    consume = OpRecord(1, "aten.relu.default", {"self": b}, (c,))
    assert l2.warm_fraction(produce) == 0.0
    l2.touch(produce)
    assert l2.warm_fraction(consume) == 1.0
    l2.touch(consume)  # a, b, c = 12000 bytes > 10000: a (least recent) leaves
    assert l2.warm_fraction(produce) == 0.0


def test_warm_shares_run_the_tracker_over_the_step():
    """Each op's warm share is the tracker's before the op touches it: the first op reads cold, its output warm."""
    from kernelcast.predict.l2 import warm_shares

    a, b, c = (TensorMeta((1000,), "float32", (1,), "cuda", storage=s) for s in (1, 2, 3))  # 4000 bytes each
    ops = (OpRecord(0, "aten.relu.default", {"self": a}, (b,)), OpRecord(1, "aten.relu.default", {"self": b}, (c,)))
    assert warm_shares(ops, capacity_bytes=16_000) == [0.0, 1.0]
    assert warm_shares(ops, capacity_bytes=3_000) == [0.0, 0.0]  # a storage larger than the L2 is never resident


def test_compare_matches_kernels_to_ops_in_launch_order():
    x, w, out = contiguous((64, 64), "bfloat16"), contiguous((64, 64), "bfloat16"), contiguous((64, 64), "bfloat16")
    ops = (op("aten.mm.default", {"self": x, "mat2": w}, [out]),
           op("aten.relu.default", {"self": out}, [out], tags=("pointwise",)))
    cap = Capture(ops=tuple(OpRecord(i, o.op, o.args, o.outputs, o.tags) for i, o in enumerate(ops)))
    pred = predict_capture(cap, "h200")
    kernels = (KernelTime("mm", "", "gemm kernel", 5.0, 1.0), KernelTime("relu", "", "relu kernel", 2.0, 2.0))
    measurement = Measurement("NVIDIA H200", "2.11", (1.0,), kernels, work_items=2)
    v = compare(cap, pred, measurement)
    rows = {r.kind: r for r in v.rows}
    assert rows["gemm"].measured_us == 5.0 and rows["pointwise"].measured_us == 2.0
    assert v.kernels_error == pytest.approx(0.0)


@pytest.mark.parametrize("command", [["calibrate", "--gpu", "h200", "--out", "x.json"], ["measure", "example:cnn"],
                                     ["validate", "example:cnn"]])
@pytest.mark.slow
def test_gpu_commands_without_a_gpu_fail_cleanly(command, tmp_path):
    result = subprocess.run([sys.executable, "-m", "kernelcast", *command], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 2 and "no CUDA GPU" in result.stderr and "Traceback" not in result.stderr


def test_gemm_alignment_classes():
    from kernelcast.costs.launch_table import gemm_alignment

    # bf16 x @ w.t(): lda = K = 768 (1536 B), ldb = K, ldc = N
    assert gemm_alignment(("bfloat16", False, True, False, 8192, 50304, 768)) == 16  # 100608 B = 16 x 6288
    assert gemm_alignment(("bfloat16", False, True, False, 8192, 30522, 768)) == 4  # 61044 B = 4 x 15261
    assert gemm_alignment(("bfloat16", False, True, False, 8192, 50257, 768)) == 2  # 100514 B = 2 x 50257
    assert gemm_alignment(("float32", False, False, False, 64, 64, 3)) == 4  # lda = 3 x 4 B


def test_attention_tiles_and_curves():
    from kernelcast.predict.calibrated import _interp
    from kernelcast.predict.shape_kinds import attention_padded

    assert attention_padded(128) == 128 and attention_padded(197) == 256  # a 197-token sequence computes two 128-row tiles
    assert _interp([(0.0, 1.0), (2.0, 3.0)], 1.0) == 2.0
    assert _interp([(0.0, 1.0), (2.0, 3.0)], -5.0) == 1.0 and _interp([(0.0, 1.0), (2.0, 3.0)], 9.0) == 3.0


def test_broadcast_and_strided_pointwise_operands():
    from kernelcast.costs.common import strided_inputs

    x, bias = contiguous((64, 128), "bfloat16"), contiguous((128,), "bfloat16")
    assert strided_inputs(op("aten.add.Tensor", {"self": x, "other": bias}, [x]))  # a broadcast bias
    assert not strided_inputs(op("aten.add.Tensor", {"self": x, "other": x}, [x]))
    nhwc = TensorMeta((8, 16, 4, 4), "bfloat16", (256, 1, 64, 16))  # channels_last in and out: dense
    assert not strided_inputs(op("aten.add.Tensor", {"self": nhwc, "other": nhwc}, [nhwc]))
    half = TensorMeta((64, 64), "bfloat16", (128, 1))  # x[:, :64]: rows with gaps
    out = contiguous((64, 64), "bfloat16")
    assert strided_inputs(op("aten.mul.Tensor", {"self": half, "other": out}, [out]))


def test_shape_table_says_where_an_estimate_comes_from():
    from kernelcast.predict.shape_model import ShapePoint, ShapeTable

    # corrections e^0 = 1 at (10, 10, 10) and e^1 at (12, 10, 10) (log2 sizes)
    table = ShapeTable([ShapePoint((10.0, 10.0, 10.0), (), 0.0), ShapePoint((12.0, 10.0, 10.0), (), 1.0)])
    exact = table.estimate((10.0, 10.0, 10.0))
    assert exact.correction == 1.0 and exact.source == "measured-near"
    middle = table.estimate((11.0, 10.0, 10.0))  # equal distances: the mean of the logs, e^0.5
    assert middle.correction == pytest.approx(math.exp(0.5)) and middle.source == "interpolated"
    beyond = table.estimate((14.0, 10.0, 10.0))
    assert beyond.source == "extrapolated" and beyond.uncertainty > middle.uncertainty


def test_conv_backward_with_both_gradients_is_the_two_passes():
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    key = ("bfloat16", True, 64, 64, 3, 1, 56, 1, 32, 2, False, 1, 1, 0)  # a 3x3 conv, channels_last, batch 32
    both = model._lookup_shape("conv", ("conv_bwd", *key))[0]
    parts = [model._lookup_shape("conv", (p, *key))[0] for p in ("conv_bwd_input", "conv_bwd_weight")]
    assert both == pytest.approx(sum(parts))


def test_an_item_size_curve_that_stops_short_borrows_the_whole_curve():
    import importlib
    import math

    cal = importlib.import_module("kernelcast.predict.calibrated")
    point = lambda nbytes, itemsize, us: cal._MemoryPoint(math.log2(nbytes), 10.0, math.log2(itemsize),  # noqa: E731
                                                          math.log(nbytes / us))
    # 2-byte points up to 256 KB (rate still growing), 4-byte points from 4 KB to 2 GB
    rows = [point(4 << 10, 2, 1.0), point(256 << 10, 2, 1.4),
            point(4 << 10, 4, 1.0), point(256 << 10, 4, 1.4), point(16 << 20, 4, 5.0), point(2 << 30, 4, 500.0)]
    ten_mb = math.log2(10 << 20)
    rate = math.exp(cal._along_bytes(rows, ten_mb, 1.0))  # bytes per µs
    # the whole curve: between 256 KB at 1.4 µs and 16 MB at 5 µs, not the 2-byte rate at 256 KB held flat
    assert (10 << 20) / rate < 6.0
    # beyond where rates saturate, an item size keeps its own last rate
    rows_big = [point(4 << 10, 2, 1.0), point(128 << 20, 2, 40.0), point(2 << 30, 4, 500.0)]
    rate = math.exp(cal._along_bytes(rows_big, math.log2(1 << 30), 1.0))
    assert rate == pytest.approx((128 << 20) / 40.0)


def test_attention_backward_timed_by_its_kernels_replaces_the_event_timed_row():
    from pathlib import Path

    from kernelcast.calibrate import read_raw
    from kernelcast.calibrate.profile import _attention_params, _sweep_rows

    root = Path(__file__).resolve().parents[2] / "validation"
    probe = [c for c in read_raw(str(root / "h200_attention_backward_raw.json.gz"))["sweep"] if "error" not in c]
    sweep = read_raw(str(root / "h200_sweep_raw.json.gz"))["sweep"]
    # the H200's CUDNN backward of 8 x (1 x 256 x 80) heads: its kernels took about 17 µs; the sweep's events
    # around forward + backward, less the forward, said hundreds (the host's time at this size)
    timed = next(c for c in probe if c["backend"] == "CUDNN_ATTENTION" and c["batch"] * c["heads"] == 8
                 and c["sq"] == 256 and c["d"] == 80)
    same = [c for c in sweep if c["kind"] == "attention" and _attention_params(c) == _attention_params(timed)]
    assert {c["pass"] for c in same} == {"forward", "backward"}
    event_rows = [r for r in _sweep_rows(same)[2] if r[1] == "bwd"]
    kernel_rows = [r for r in _sweep_rows(same + [timed])[2] if r[1] == "bwd"]
    assert len(event_rows) == len(kernel_rows) == 1
    assert event_rows[0][-2] > 10 * kernel_rows[0][-2]
    assert kernel_rows[0][-2] == timed["time_us"] < 30


def test_host_copies_run_at_each_gpus_own_host_link():
    from kernelcast.predict.kernel_model import RooflineModel

    copy = Cost(bytes_read=64e6, kernels=1, kind="h2d_pinned")
    # datasheet: 64 MB over PCIe 5 x16 (64 GB/s) is 1000 us, over the L4's PCIe 4 (32 GB/s) 2000 us
    assert RooflineModel(get_gpu("h100"), CaptureSettings()).estimate(copy).time_us == pytest.approx(1000)
    assert RooflineModel(get_gpu("l4"), CaptureSettings()).estimate(copy).time_us == pytest.approx(2000)
    # calibrated: the H200 host's measured rate, carried to the L4 by the two links' ratio (32 / 64)
    h200, l4 = _model("h200").estimate(copy), _model("l4").estimate(copy)
    assert l4.time_us == pytest.approx(2 * h200.time_us) and "scaled to pcie4" in l4.roof


def test_kernel_time_models_are_one_list_asked_in_order():
    """Every kind of kernel-time model is one entry of KERNEL_TIME_MODELS (issue 35): the first that prices a cost
    is its model, so a GEMM whose shape no table or fit covers falls to the datasheet roofline, never to the
    memory curves, and the memory curves, asked last, price any memory-bound kind."""
    from kernelcast.predict.calibrated import KERNEL_TIME_MODELS

    names = [m.name for m in KERNEL_TIME_MODELS]
    assert len(names) == len(set(names)) and names[-1] == "memory_curves"
    model = _model()

    def first(cost):
        return next(m.name for m in KERNEL_TIME_MODELS if m.prices(model, cost))

    gemm = Cost(flops=2 * 4096 ** 3, bytes_read=2 * 4096 * 4096 * 2, kernels=1, math="matmul", dtype="bfloat16",
                kind="gemm", key=("bfloat16", False, False, False, 4096, 4096, 4096))
    assert first(gemm) == "shape" and model.estimate(gemm).source == "measured-near"
    pointwise = Cost(bytes_read=8e6, bytes_written=4e6, kind="pointwise", key=(1024, 4))
    assert first(pointwise) == "memory_curves" and model.estimate(pointwise).source == "interpolated"
    foreach = Cost(bytes_read=8e6, bytes_written=4e6, kernels=2, kind="foreach", key=("chunks", 65536, 4))
    assert first(foreach) == "foreach_blocks"


@pytest.mark.parametrize("key", [
    ("conv_fwd", "float32", False, 3, 16, 3, 2, 32, 1, 128, 3, True, 1, 1, 0),  # KernelBench L2 #72's, transposed 3-D
    ("conv_fwd", "float32", False, 32, 64, 4, 2, 25, 1, 128, 3, True, 1, 1, 0),
    ("conv_bwd_input", "bfloat16", True, 64, 64, 3, 1, 56, 1, 96, 2, False, 1, 1, 0),
    ("conv_fwd", "float16", False, 3, 64, 7, 2, 224, 1, 64, 2, False, 3, 1, 0),  # a stem
])
def test_a_fitted_convolution_grows_no_faster_than_its_batch(key):
    # B samples can run as B / b launches of b samples, so no fitted time at batch B exceeds B / b times the time
    # at b, whichever leaves of the fitted tree the two batches fall in
    model = _model()
    times = {}
    batch = key[9]
    while batch >= 1:
        times[batch] = model._lookup_shape("conv", (*key[:9], batch, *key[10:]))[0]
        batch //= 2
    for big, big_us in times.items():
        for small, small_us in times.items():
            if small < big:
                assert big_us <= big / small * small_us * (1 + 1e-9), (big, small)
