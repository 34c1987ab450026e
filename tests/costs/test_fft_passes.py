"""cuFFT transforms as passes over their data (costs/fft.py) and their kernel floor (predict/calibrated.py
CUFFT_KERNEL_FLOOR_US), against the cuFFT grid measured on an H100 (validation/h100/h100_fft_grid_raw.json.gz)."""

import gzip
import json
import statistics
from pathlib import Path

import pytest

import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
from kernelcast.costs import cost_of
from kernelcast.costs.fft import c2c_kernels, real_kernels
from kernelcast.records import OpRecord

GRID = Path(__file__).resolve().parents[2] / "validation" / "h100" / "h100_fft_grid_raw.json.gz"


def _cases():
    return [c for c in json.loads(gzip.open(GRID).read())["cases"] if "error" not in c]


def test_kernel_counts_follow_the_grid():
    """Each transform's work items as cuFFT and torch ran them (the clone and normalization included), but the
    one shape cuFFT ran otherwise (a 65536-point r2c of 256 signals in one kernel)."""
    wrong = []
    for case in _cases():
        kernels = sum(cost_of(OpRecord.from_json(o)).kernels for o in case["ops"])
        if kernels != case["n_items"]:
            wrong.append((case["kind"], case["dims"], case["n"], case["batch"], kernels, case["n_items"]))
    assert wrong == [("fft_r2c", 1, 65536, 256, 3, 1), ("fft_c2r", 1, 65536, 256, 5, 3)]


def test_a_clone_and_a_normalization_are_passes_of_their_own():
    """irfft of 262144 signals of 64 points: the clone of its input, the c2r kernel and the normalizing mul_,
    three passes (145 µs measured on the H100; one pass over the op's bytes had priced it at a third)."""
    case = next(c for c in _cases() if c["kind"] == "fft_c2r" and c["n"] == 64 and c["batch"] == 262144)
    cost = cost_of(OpRecord.from_json(case["ops"][0]))
    assert sorted(p.kind for p in cost.parts) == ["copy", "pointwise"] and cost.kernels == 3
    complex_in = 262144 * 33 * 8
    real_out = 262144 * 64 * 4
    assert cost.bytes == pytest.approx(2 * complex_in + (complex_in + real_out) + 2 * real_out)


def test_kernel_rules():
    assert c2c_kernels((128, 128), 512) == 1 and c2c_kernels((128, 128), 64) == 2  # vector_2d_fft from 512
    assert c2c_kernels((100, 100), 4096) == 2  # not a power of two: a kernel per dim
    assert real_kernels((16384,)) == 1 and real_kernels((65536,)) == 3  # two factors and a post-processing kernel


def test_the_grid_is_priced_within_its_spread_on_the_h100():
    """The H200 profile carried to the H100, per case kind: median |error| at most 25% (it was 43-59% with one
    pass over the op's bytes)."""
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    model = CalibratedModel(get_gpu("h100"), CaptureSettings(), load_profile("h200").data, get_gpu("h200"))
    errors: dict[str, list[float]] = {}
    for case in _cases():
        predicted = sum(model.estimate(cost_of(OpRecord.from_json(o))).time_us for o in case["ops"])
        errors.setdefault(case["kind"], []).append(abs(predicted / case["device_us"] - 1))
    assert {k: statistics.median(v) < 0.25 for k, v in errors.items()} == {k: True for k in errors}
