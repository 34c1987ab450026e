"""`kernelcast advise` and `kernelcast sweep`: fixes applied and re-predicted, ranked; what does not apply is said."""

import json
import subprocess
import sys
import textwrap

import pytest

from helpers import subprocess_env
from kernelcast.whatif.advise import Fix, advise
from kernelcast.whatif.sweep import SweepPoint, sweep_values, turns_gpu_bound

WORKLOAD = textwrap.dedent('''
    import torch

    def build(batch=4096):
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
        opt = torch.optim.AdamW(model.parameters(), foreach=True)
        x = torch.randn(batch, 1024, device="cuda")

        def step(x):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step, (x,)
''')


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "mlp_step.py"
    path.write_text(WORKLOAD)
    return f"{path}:build"


def test_sweep_values_and_where_the_step_turns_gpu_bound():
    assert sweep_values(1, 256) == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert sweep_values(3, 20) == (3, 4, 8, 16, 20)
    assert sweep_values(5, 5) == (5,)
    points = tuple(SweepPoint(v, 100.0, 50.0, b, True) for v, b in
                   ((1, "host"), (2, "gpu"), (4, "mixed"), (8, "gpu"), (16, "gpu")))
    assert turns_gpu_bound(points) == 8  # from 8 on every point is GPU-bound
    assert turns_gpu_bound(points[:3]) is None


def test_a_fix_saving_is_the_step_before_less_after():
    fix = Fix("x", "re-captured", 1000.0, 750.0)
    assert fix.saving_us == 250.0 and fix.saving_share == 0.25


@pytest.mark.slow
def test_advise_tries_the_fixes_that_apply_and_ranks_them(workload):
    advice = advise(workload, "h100")
    tried = {f.name for f in advice.fixes + advice.no_gain}
    assert "bf16 autocast" in tried and "fused optimizer (fused=True)" in tried
    larger = next(f for f in advice.fixes + advice.no_gain if f.name.startswith("batch=8192"))
    assert "the optimizer sees" in larger.cost  # a training step: the optimizer's batch changes too
    assert {name for name, _ in advice.not_tried} >= {"channels_last"}  # no convolutions: said, not tried
    savings = [f.saving_us for f in advice.fixes]
    assert savings == sorted(savings, reverse=True) and all(f.saving_share >= 0.02 for f in advice.fixes)
    # bf16 autocast on a GPU-bound fp32 MLP: its GEMMs move to tensor cores (on a host-bound one the casts add
    # launches and it is slower: measured so on the H200, validation/advise)
    autocast = next(f for f in advice.fixes + advice.no_gain if f.name == "bf16 autocast")
    assert autocast.step_after_us < autocast.step_before_us
    # its fp32 GEMMs run on the CUDA cores (PyTorch's default): TF32 for matmuls is tried, and the setting is put
    # back for the fixes captured after it
    tf32 = next(f for f in advice.fixes if f.name.startswith("TF32 matmuls"))
    assert tf32.step_after_us < 0.5 * tf32.step_before_us
    import torch
    assert torch.backends.cuda.matmul.allow_tf32 is False


@pytest.mark.slow
def test_advise_does_not_offer_bf16_where_the_gpu_has_no_bf16_tensor_cores(workload):
    """A T4 (Turing) runs bf16 GEMMs on its CUDA cores: bf16 autocast is not tried, and the reason says what to
    try instead."""
    advice = advise(workload, "t4")
    assert "bf16 autocast" not in {f.name for f in advice.fixes + advice.no_gain}
    reason = dict(advice.not_tried)["bf16 autocast"]
    assert "no bf16 tensor cores" in reason and "fp16 autocast" in reason
    assert "TF32 matmuls" in dict(advice.not_tried)  # Turing has no TF32


@pytest.mark.slow
def test_cli_advise_writes_json_and_refuses_a_saved_capture(workload, tmp_path):
    out = tmp_path / "advice.json"
    run = subprocess.run([sys.executable, "-m", "kernelcast", "advise", workload, "--gpu", "h100", "--json", str(out)],
                         capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    assert doc["gpu"] == "h100-sxm" and doc["fixes"] and all("saving_us" in f for f in doc["fixes"])
    saved = tmp_path / "cap.json"
    saved.write_text("{}")
    bad = subprocess.run([sys.executable, "-m", "kernelcast", "advise", str(saved)], capture_output=True, text=True,
                         env=subprocess_env(), timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_fixes_change_only_the_models_of_the_capture_they_run_in():
    """A model alive from an earlier capture, or the user's real one, is never found by a fix (root_modules)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernelcast.whatif.transforms import root_modules

    users = torch.nn.Linear(2, 2)
    with FakeTensorMode():
        captured = torch.nn.Linear(2, 2)
        found = root_modules()
        assert any(m is captured for m in found) and not any(m is users for m in found)
    assert any(m is users for m in root_modules())  # no capture running: every model is a candidate


def test_the_sweeps_table_rows_verdict_and_json():
    from kernelcast.report.whatif_text import sweep_header, sweep_json, sweep_row, sweep_verdict

    points = [SweepPoint(8, 4000.0, 1000.0, "host", True), SweepPoint(64, 8000.0, 7600.0, "gpu", False)]
    assert sweep_header("batch", "samples/s").split() == ["batch", "step", "GPU", "samples/s", "bound", "memory"]
    rows = [sweep_row(p) for p in points]
    assert rows[0].split() == ["8", "4.00", "ms", "1.00", "ms", "2,000.0", "host", "fits"]
    assert rows[1].endswith("gpu    out of memory")
    assert sweep_verdict("batch", 8, 64, 64) == "GPU-bound from batch=64 on"
    assert sweep_verdict("batch", 8, 64, None).startswith("not GPU-bound anywhere in batch=8..64")
    doc = sweep_json(points, "h100-sxm", "batch", 64)
    assert doc["gpu_bound_from"] == 64 and doc["points"][1] == {
        "value": 64, "step_time_us": 8000.0, "gpu_time_us": 7600.0, "bound": "gpu", "fits": False,
        "throughput_per_s": 8000.0}
