"""scripts/eval/wall_validate.py: the measured verdict, what counts as right, and the per-family summary."""

import sys
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "scripts" / d) for d in ("device", "fit", "eval")]

import wall_validate as wv  # noqa: E402

from kernelcast.predict.kernel_model import KernelEstimate  # noqa: E402


def _measured(step_ms, gpu_us):
    return {"step_ms": step_ms, "step_ms_median": sorted(step_ms)[len(step_ms) // 2], "gpu_time_us": gpu_us}


def test_a_measured_verdict_is_clear_when_every_window_gives_it():
    # 9.5 ms of kernels in windows of 10, 10.5, 11 ms: busy 95%, 90%, 86%, all >= 85%
    assert wv.measured_verdict(_measured([10.0, 10.5, 11.0], 9500.0)) == ("gpu", True)
    # windows of 10 and 12 ms: 90% (gpu) and 75% (mixed): the median window says gpu, but not clearly
    assert wv.measured_verdict(_measured([10.0, 12.0, 10.0], 9000.0)) == ("gpu", False)
    # 2 ms of kernels in 8-9 ms windows: 25% and 22%, host-bound
    assert wv.measured_verdict(_measured([8.0, 9.0, 8.5], 2000.0)) == ("host", True)


def _pred(step_us, bound, step_range=(0.0, 0.0)):
    return {"step_time_us": step_us, "bound": bound, "step_time_range_us": list(step_range)}


def test_compare_judges_the_verdict_the_error_and_the_spread():
    m = _measured([8.0, 9.0, 8.5], 2000.0)
    c = wv.compare(m, {"a": _pred(8200.0, "host", (7000.0, 7900.0)), "b": _pred(17000.0, "host"),
                       "c": _pred(2100.0, "gpu")})
    assert c["measured_verdict"] == "host" and c["clear"]
    assert c["a"]["inside_spread"] and c["a"]["verdict_right"] and c["a"]["error"] == pytest.approx(-0.3 / 8.5)
    assert not c["a"]["range_overlaps_spread"]  # 7.0-7.9 ms misses 8.0-9.0
    assert not c["b"]["inside_spread"] and c["b"]["error"] == pytest.approx(1.0)  # 17 ms for 8.5: +100%
    assert not c["c"]["verdict_right"]


def test_family_summary_counts_only_clear_verdicts():
    rows = []
    for name, family, m, p in (("g", "f1", _measured([10.0, 10.2, 10.1], 9800.0), _pred(11100.0, "gpu")),
                               ("h", "f1", _measured([8.0, 9.0, 8.5], 2000.0), _pred(8600.0, "host")),
                               ("u", "f2", _measured([10.0, 12.0, 10.0], 9000.0), _pred(9000.0, "host"))):
        rows.append({"name": name, "family": family, "measured": m, "predicted": {"v": p},
                     "comparison": wv.compare(m, {"v": p})})
    text, totals = wv.family_table(rows, "v")
    assert totals["clear"] == 2 and totals["verdict_right"] == 2  # the unclear step is not judged
    assert totals["gpu_bound"] == 1 and totals["gpu_error_median"] == pytest.approx(1.0 / 10.1)
    assert totals["host_bound"] == 1 and totals["host_inside_spread"] == 1
    assert "f1" in text and "f2" in text


def test_measured_gpu_substitution_scales_every_kernel_estimate():
    class Inner:
        source = "x"

        def estimate(self, cost, l2_warm=0.0):
            return KernelEstimate(10.0, "memory", "hbm")

    scaled = wv.ScaledKernels(Inner(), 1.5)
    assert scaled.estimate(None).time_us == 15.0 and "measured GPU time" in scaled.source
