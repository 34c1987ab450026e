"""The device script for compiled steps (scripts/device/compile_measure.py): what keeps one run's measurements honest
when the device gives one call of a few minutes."""

import importlib.util
import signal
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("compile_measure", ROOT / "scripts" / "device" / "compile_measure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_module_range_hooks_are_not_traced_by_dynamo():
    # H200, torch 2.11 (validation/compile/compile_measured.json.gz, bert_forward_fp16 default): the global
    # module hooks of the profiled step ran in the eager code between graph breaks, Dynamo traced them as
    # frames of their own until its recompile limit, and the profile showed 4737 kernels for a 132-kernel step.
    from torch._dynamo.utils import counters

    from kernelcast.measure import _module_ranges

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            x = self.lin(x)
            torch._dynamo.graph_break()
            return x.relu()

    model = nn.Sequential(Inner(), Inner(), nn.Dropout(0.0))
    x = torch.randn(4, 8)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: model(x), backend="eager")
    for _ in range(3):
        compiled(x)
    before = counters["frames"]["total"]
    with _module_ranges():
        compiled(x)
    assert counters["frames"]["total"] == before
    torch._dynamo.reset()


@pytest.mark.slow
def test_a_native_abort_or_a_hang_loses_one_workload_not_the_run():
    cm = _script()
    code, timed_out = cm.run_in_subprocess([sys.executable, "-c", "import os; os.abort()"], 60)
    assert (code, timed_out) == (-signal.SIGABRT, False)
    assert cm.how_it_ended(code, timed_out) == "died of SIGABRT"
    code, timed_out = cm.run_in_subprocess([sys.executable, "-c", "import time; time.sleep(60)"], 1)
    assert timed_out and cm.how_it_ended(code, timed_out) == "killed at its time limit"
    assert cm.how_it_ended(0, False) is None

    # what the worker wrote before it died is kept; the variants it never reached say why
    done = {"variants": {"eager": {"work_items": 3}}, "device": "NVIDIA H200"}
    entry = cm.merge_worker("w", "fam", "examples/zoo/x.py:w", done, "died of SIGABRT", 12.0)
    assert entry["variants"]["eager"] == {"work_items": 3}
    assert entry["variants"]["default"]["error"].startswith("not measured: the workload's process died of SIGABRT")
    assert entry["process"] == {"seconds": 12.0, "ended": "died of SIGABRT"}
    assert cm.merge_worker("w", "fam", "x:w", None, None, 1.0)["variants"] == {}


def test_reduce_overhead_calls_mark_each_step(monkeypatch):
    # cudagraph trees otherwise start a generation per compiled frame and invalidate the forward's outputs
    # before the backward reads them (H200, torch 2.11: zoo layernorm_odd_widths under reduce-overhead).
    cm = _script()
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    cm._caller(lambda x: x, (1,), "reduce-overhead")()
    cm._caller(lambda x: x, (1,), "default")()
    assert marks == [1]
