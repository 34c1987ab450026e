"""Scans by the kernel scan_dim runs (costs/scans.py): the innermost-dim kernel's grid, the outer-dim kernel as a
kind of its own, and how a few-block scan carries to another GPU. Expected values from PyTorch's own source
(aten/src/ATen/native/cuda/ScanUtils.cuh) and the H200's grid (validation/h200_shape_kinds_grid_raw.json.gz)."""

import pytest

from helpers import contiguous, op
from kernelcast.costs import cost_of
from kernelcast.costs.scans import SCAN_OUTER_KIND, scan_blocks, scan_threads_y
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings


def test_innermost_scan_blocks_follow_scan_utils_thread_split():
    # get_log_num_threads_x_inner_scan: PyTorch's test has (4096 rows, 8 wide) -> log2 x = 4, so 32 rows a block
    assert scan_threads_y(4096, 8) == 32
    # KernelBench level 1 #89: 128 rows of 4000 -> x = 128 threads along a row, 4 rows a block, 32 blocks
    assert scan_threads_y(128, 4000) == 4 and scan_blocks(128, 4000) == 32
    # one long row: x clamped to 512 threads
    assert scan_threads_y(2, 1 << 20) == 1


def _cumsum(shape, dim, dtype="float32"):
    x = contiguous(shape, dtype)
    return op("aten.cumsum.default", {"self": x, "dim": dim}, [contiguous(shape, dtype)])


def test_a_scan_over_an_outer_dim_is_its_own_kind_keyed_by_its_walk():
    last, first = cost_of(_cumsum((128, 4000), -1)), cost_of(_cumsum((128, 4000), 0))
    assert last.kind == "scan" and last.key == (4000, 4)
    assert first.kind == SCAN_OUTER_KIND and first.key == (128, 4)
    assert cost_of(_cumsum((4000,), 0)).kind == "scan"  # one dim: CUB's device scan


def test_the_profile_prices_the_two_scans_apart():
    # measured on the H200 at exactly these shapes (fp32, L2 flushed): 25.1 us over the last dim, 50.0 us over
    # the first; one curve over both had priced the first at ~32 us
    model = CalibratedModel(get_gpu("h200"), CaptureSettings(), load_profile("h200").data, get_gpu("h200"))
    assert model.estimate(cost_of(_cumsum((128, 4000), -1))).time_us == pytest.approx(25.1, rel=0.15)
    assert model.estimate(cost_of(_cumsum((128, 4000), 0))).time_us == pytest.approx(50.0, rel=0.15)


def test_a_few_block_scan_carries_by_clock_not_dram_bandwidth():
    # 32 blocks on the H200's 132 SMs or an L4's 58: the blocks' walk sets the time, which follows SMs in use x
    # clock, not the L4's 16x slower DRAM (KernelBench #89 on an L4, published: 33 us a call)
    profile, h200 = load_profile("h200").data, get_gpu("h200")
    here = CalibratedModel(h200, CaptureSettings(), profile, h200)
    l4 = CalibratedModel(get_gpu("l4"), CaptureSettings(), profile, h200)
    cost = cost_of(_cumsum((128, 4000), -1))
    dram = h200.mem_bw_bytes_per_s / get_gpu("l4").mem_bw_bytes_per_s
    assert l4.estimate(cost).time_us < 2.5 * here.estimate(cost).time_us < dram * here.estimate(cost).time_us
