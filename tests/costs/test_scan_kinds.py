"""Scans by the kernel scan_dim runs (costs/scans.py): CUB's device scan, the innermost-dim kernel's grid, the
outer-dim kernel's, each priced as what it is; expected values from PyTorch's own source
(aten/src/ATen/native/cuda/ScanUtils.cuh) and the H200's grid (validation/h200_shape_kinds_grid_raw.json.gz)."""

import pytest

from helpers import contiguous, op
from kernelcast.costs import cost_of
from kernelcast.costs.common import blocks_key
from kernelcast.costs.scans import SCAN_OUTER_KIND, SCAN_ROWS_KIND, scan_blocks, scan_threads_y
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings


def test_innermost_scan_blocks_follow_scan_utils_thread_split():
    # get_log_num_threads_x_inner_scan: PyTorch's test has (4096 rows, 8 wide) -> log2 x = 4, so 32 rows a block
    assert scan_threads_y(4096, 8) == 32
    # KernelBench level 1 #89: 128 rows of 4000 -> x = 128 threads along a row, 4 rows a block, 32 blocks
    assert scan_threads_y(128, 4000) == 4 and scan_blocks(128, 4000) == 32
    # few long rows: x clamped to 512 threads, a block a row
    assert scan_threads_y(16, 1 << 20) == 1 and scan_blocks(16, 1 << 20) == 16


def _cumsum(shape, dim, dtype="float32"):
    x = contiguous(shape, dtype)
    return op("aten.cumsum.default", {"self": x, "dim": dim}, [contiguous(shape, dtype)])


def test_each_scan_kernel_is_its_own_kind_keyed_by_its_blocks_and_walk():
    assert cost_of(_cumsum((128, 4000), -1)).key == blocks_key(32, 4, 4000, 4)
    assert cost_of(_cumsum((128, 4000), -1)).kind == SCAN_ROWS_KIND
    # over the first dim: a thread per column walks all 128 rows, 512 columns a block -> 8 blocks
    first = cost_of(_cumsum((128, 4000), 0))
    assert first.kind == SCAN_OUTER_KIND and first.key == blocks_key(8, 512, 128, 4)
    assert cost_of(_cumsum((4000,), 0)).kind == "scan"  # one dim: CUB's device scan, a byte curve


@pytest.mark.parametrize("shape, dim, measured_us", [
    ((128, 4000), -1, 25.1),  # KernelBench level 1 #89's shape
    ((128, 4000), 0, 50.0),
    ((16, 1 << 20), -1, 1617.0),  # 16 blocks walking 1 M elements each (bf16 below)
])
def test_the_profile_prices_each_scan_near_its_measured_time(shape, dim, measured_us):
    # H200 grid, L2 flushed, at exactly these shapes; the block fits are within ~10% at the median (their own
    # held-out errors are in the profile)
    model = CalibratedModel(get_gpu("h200"), CaptureSettings(), load_profile("h200").data, get_gpu("h200"))
    dtype = "bfloat16" if shape[1] == 1 << 20 else "float32"
    assert model.estimate(cost_of(_cumsum(shape, dim, dtype))).time_us == pytest.approx(measured_us, rel=0.3)


def test_a_few_block_scan_carries_by_clock_not_dram_bandwidth():
    # 32 blocks on the H200's 132 SMs or an L4's 58: the blocks' walk sets the time, which follows the clocks,
    # not the L4's 16x slower DRAM (KernelBench #89 on an L4, published: 33 us a call)
    profile, h200 = load_profile("h200").data, get_gpu("h200")
    here = CalibratedModel(h200, CaptureSettings(), profile, h200)
    l4 = CalibratedModel(get_gpu("l4"), CaptureSettings(), profile, h200)
    cost = cost_of(_cumsum((128, 4000), -1))
    dram = h200.mem_bw_bytes_per_s / get_gpu("l4").mem_bw_bytes_per_s
    assert l4.estimate(cost).time_us < 2.5 * here.estimate(cost).time_us < dram * here.estimate(cost).time_us


def test_the_other_scans_run_the_same_kernels():
    # logcumsumexp runs scan_dim (CUB over a whole 1-D tensor); cummax / cummin run scan_dim_with_indices, the
    # same grids with no CUB path: a 1-D cummax is the innermost kernel with one row
    def scan(name, shape, dim):
        x = contiguous(shape, "float32")
        return cost_of(op(name, {"self": x, "dim": dim}, [contiguous(shape, "float32")]))

    assert scan("aten.logcumsumexp.default", (128, 4000), -1).key == blocks_key(32, 4, 4000, 4)
    assert scan("aten.logcumsumexp.default", (4000,), 0).kind == "scan"
    assert scan("aten.cummax.default", (128, 4000), 0).kind == SCAN_OUTER_KIND
    one_row = scan("aten.cummax.default", (4000,), 0)
    assert one_row.kind == SCAN_ROWS_KIND and one_row.key == blocks_key(1, 1, 4000, 4)
    assert scan("aten.searchsorted.Tensor", (128, 4000), -1).kind == "scan"  # a binary search: the byte curve
