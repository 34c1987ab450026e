"""Ops over the channel dim of NC(D)HW maps (issue 30): cuDNN's batch norm in training by its blocks per channel
(costs/elementwise.py, calibrate/norm_blocks.py) and softmax over a dim that is not the last by its launch geometry
(costs/elementwise.py spatial_softmax_key, predict/spatial_softmax_time.py). Device figures: the H200's
channel_grid (validation/h200_channel_grid_raw.json.gz, torch 2.11)."""

import pytest

from helpers import contiguous, op
from kernelcast.costs import cost_of
from kernelcast.costs.common import is_blocks_key
from kernelcast.costs.elementwise import SPATIAL_SOFTMAX_KEY
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.predict.spatial_softmax_time import block_shape, serial_steps
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings, TensorMeta


def _model(gpu="h200"):
    return CalibratedModel(get_gpu(gpu), CaptureSettings(), load_profile("h200").data, get_gpu("h200"))


def _cudnn_bn(shape, training=True, dtype="float32"):
    c = shape[1]
    stat = contiguous((c,))
    args = {"input": contiguous(shape, dtype), "weight": stat, "bias": stat, "running_mean": stat,
            "running_var": stat, "training": training, "exponential_average_factor": 0.1, "epsilon": 1e-5}
    return op("aten.cudnn_batch_norm.default", args, [contiguous(shape, dtype), stat, stat, contiguous((0,), "uint8")])


@pytest.mark.parametrize("shape,measured_us", [
    ((16, 16, 256, 8191), 14953.8),  # 16 channels of 33.5 M values: 16 blocks on 132 SMs
    ((16, 1024, 181, 181), 2862.1),  # 1024 channels of 524 K: eight waves of blocks
    ((16, 64, 64, 64, 64), 2076.1),  # NCDHW
])
def test_cudnn_batch_norm_in_training_runs_a_block_per_channel(shape, measured_us):
    cost = cost_of(_cudnn_bn(shape))
    assert is_blocks_key(cost.key) and cost.key[1] == shape[1]
    assert _model().estimate(cost).time_us == pytest.approx(measured_us, rel=0.25)


def test_cudnn_batch_norm_in_inference_stays_elementwise():
    assert not is_blocks_key(cost_of(_cudnn_bn((16, 16, 64, 64), training=False)).key)


def test_the_spatial_softmax_block_follows_softmax_cu():
    assert block_shape(16, 12600) == (1, 1024)  # many inner positions: a thread each
    assert block_shape(1024, 16) == (64, 16)  # few inner positions, a long dim: threads share the dim
    assert block_shape(8, 16) == (1, 16)  # a short dim: no sharing
    # 4 x 1024 x 256: four blocks of 256 threads on the H200, each thread walking all 1024
    assert serial_steps(4, 1024, 256, 132, "9.0") == (1024, 0)
    # 1024 x 1024 x 16: 264 blocks of 64 x 16 threads, each over 4 outer slices, 16 of the dim each, and a
    # log2(64)-step reduction per slice
    assert serial_steps(1024, 1024, 16, 132, "9.0") == (64, 24)


def _softmax(shape, dim, dtype="float32"):
    return op("aten._softmax.default", {"self": contiguous(shape, dtype), "dim": dim, "half_to_float": False},
              [contiguous(shape, dtype)])


@pytest.mark.parametrize("shape,measured_us", [
    ((4, 1024, 256), 783.8),  # few long slices: latency-bound walks
    ((64, 1024, 256), 1235.0),
    ((2048, 16, 4096), 734.2),
    ((131072, 8, 16), 154.4),
])
def test_a_softmax_over_a_middle_dim_is_timed_by_its_walk(shape, measured_us):
    cost = cost_of(_softmax(shape, 1))
    assert cost.key[:5] == (SPATIAL_SOFTMAX_KEY, "forward", *shape)
    # the fit's own median is 19% (calibrate/spatial_rates.py): within 2x of measured, where the byte curve of
    # last-dim softmax had 4 MB of it at about 5 µs
    assert 0.5 < _model().estimate(cost).time_us / measured_us < 2.0


def test_a_softmax_over_the_last_dim_keeps_its_curve():
    cost = cost_of(_softmax((64, 1024), -1))
    assert cost.key == (1024, 4)


def test_on_a_gpu_with_fewer_sms_the_walks_are_longer():
    # one thread per inner position, the GPU full: a GPU with fewer SMs strides over more of them
    h200, t4 = get_gpu("h200"), get_gpu("t4")
    assert serial_steps(2048, 16, 4096, t4.sm_count, t4.compute_capability)[0] > \
        serial_steps(2048, 16, 4096, h200.sm_count, h200.compute_capability)[0]
    cost = cost_of(_softmax((2048, 16, 4096), 1))
    assert _model("t4").estimate(cost).time_us > _model().estimate(cost).time_us


def test_on_another_gpu_a_block_per_channel_is_never_faster_than_its_bandwidth():
    # KernelBench level 1 #33 (16 x 64 x 256 x 256 fp32 batch norm in training): on the H200 its 64 blocks set
    # the time; on a T4 (320 GB/s) the 805 MB it moves take at least 2.5 ms, whatever its 40 SMs' waves say
    cost = cost_of(_cudnn_bn((16, 64, 256, 256)))
    t4 = get_gpu("t4")
    assert _model("t4").estimate(cost).time_us >= cost.bytes / t4.mem_bw_bytes_per_s * 1e6
    assert _model("t4").estimate(cost).time_us > 2 * _model().estimate(cost).time_us


def test_a_spatial_softmax_whose_wave_fills_the_l2_reads_dram_again():
    """As the slices the resident blocks walk in one pass fill the L2, the later passes read DRAM again and every
    visit waits on it (predict/spatial_softmax_time.py FEATURES): the L2 terms are the visits and bytes times that
    fill, min(1, working set / this GPU's L2). A profile fitted before those terms (four features) still reads."""
    from kernelcast.predict.spatial_softmax_time import spatial_features, spatial_softmax_us, wave_bytes

    h200 = get_gpu("h200")
    big = (64, 64, 65536)  # 1 GiB fp32: the wave's 64 MiB outgrows the H200's 50 MB L2
    assert wave_bytes(*big, 4, h200.sm_count, h200.compute_capability) > h200.l2_bytes
    f = spatial_features(*big, 2 * 64 * 64 * 65536 * 4, 4, h200.sm_count, h200.compute_capability, h200.l2_bytes)
    assert f["serial visits x L2 fill"] == f["serial visits"] and f["bytes x L2 fill"] == f["bytes"]
    small = spatial_features(4, 16, 256, 2 * 4 * 16 * 256 * 4, 4, h200.sm_count, h200.compute_capability,
                             h200.l2_bytes)
    assert small["bytes x L2 fill"] < 1e-2 * small["bytes"]  # 64 KiB of a 50 MB L2
    old = {"features": ["floor", "serial visits", "reduction steps", "bytes"], "coefficients": [1.0, 2.0, 3.0, 0.0]}
    assert spatial_softmax_us(old, small) == 1.0 + 2.0 * small["serial visits"] + 3.0 * small["reduction steps"]
