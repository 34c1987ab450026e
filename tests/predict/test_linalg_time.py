"""torch.linalg's kernel time from the profile's measured table (predict/linalg_time.py)."""

import pytest

from helpers import contiguous, op
from kernelcast.costs import cost_of
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.predict.linalg_time import linalg_time_us
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings

ROWS = [[16, 1, 40.0], [64, 1, 160.0], [16, 16, 80.0], [64, 16, 640.0]]


def test_the_table_is_read_in_log_size_and_log_batch():
    # n = 32 halfway between 16 and 64 in log n: the geometric mean, 80 us; at 16 matrices likewise, 226 us
    assert linalg_time_us(ROWS, 32, 1) == pytest.approx(80.0)
    assert linalg_time_us(ROWS, 32, 16) == pytest.approx((80.0 * 640.0) ** 0.5)
    # 4 matrices, halfway in log batch between 1 and 16
    assert linalg_time_us(ROWS, 16, 4) == pytest.approx((40.0 * 80.0) ** 0.5)
    # below the measured sizes: the smallest's time; more matrices than measured: linear in their count
    assert linalg_time_us(ROWS, 4, 1) == pytest.approx(40.0)
    # above: the last two sizes' slope (40 -> 160 us over 16 -> 64: linear), 128 twice 64
    assert linalg_time_us(ROWS, 128, 1) == pytest.approx(320.0)
    assert linalg_time_us(ROWS, 16, 64) == pytest.approx(80.0 * 4)
    assert linalg_time_us([], 16, 1) is None


def test_a_small_solve_takes_its_measured_time_not_its_roofline():
    # H200, zoo linalg_solve (the shared case tiny_solve_timing.py): a 30x30 fp32 solve with one right-hand side,
    # 630 us for ten _linalg_solve_ex calls; its FLOPs at the datasheet's rate would take well under a microsecond
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    a, b = contiguous((30, 30)), contiguous((30, 1))
    solve = op("aten._linalg_solve_ex.default", {"A": a, "B": b, "left": True, "check_errors": False},
               [contiguous((30, 1)), contiguous((30, 30)), contiguous((30,), "int32"), contiguous((), "int32")])
    estimate = model.estimate(cost_of(solve))
    assert estimate.time_us == pytest.approx(63.0, rel=0.15) and estimate.source.startswith("measured")


def test_another_gpu_is_given_the_profiled_gpus_measured_time():
    # no datasheet ratio holds for a chain of latency-bound panel kernels: the H200's time, labelled scaled
    h200 = get_gpu("h200")
    model = CalibratedModel(get_gpu("a100"), CaptureSettings(), load_profile("h200").data, h200)
    a, b = contiguous((30, 30)), contiguous((30, 1))
    solve = op("aten._linalg_solve_ex.default", {"A": a, "B": b, "left": True, "check_errors": False},
               [contiguous((30, 1)), contiguous((30, 30)), contiguous((30,), "int32"), contiguous((), "int32")])
    estimate = model.estimate(cost_of(solve))
    assert estimate.time_us == pytest.approx(63.0, rel=0.15) and estimate.source.endswith("scaled")
