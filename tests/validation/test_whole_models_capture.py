"""Every whole-model program of benchmarks/whole_models captures and is priced whole: our own held-out programs
in KernelBench's format (scripts/eval/whole_models_check.py compares them with an H100's measurements)."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "benchmarks" / "whole_models").glob("*.py"))
sys.path.insert(0, str(ROOT / "scripts" / "eval"))


@pytest.mark.slow
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_a_whole_model_program_captures_and_every_op_is_costed(path):
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
    from kernelcast.capture import capture_workload
    from kernelcast.predict import predict_capture

    from kernelbench_validate import _build_for, _load

    if "einops" in path.read_text():
        pytest.importorskip("einops")
    cap = capture_workload(_build_for(_load(path)), "h200", workload=f"whole_models:{path.stem}")
    pred = predict_capture(cap, "h200")
    assert pred.uncosted == () and pred.kernels > 0 and pred.gpu_time_us > 0
    assert pred.first_step_us >= pred.gpu_time_us * 0.5  # a call is at least its kernels' critical path, roughly
