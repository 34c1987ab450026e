"""The prediction record: what predict/ hands report/, and what `--json` writes. report/ reads only it, so a saved
prediction renders where torch is not installed."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import SRC, subprocess_env
from kernelcast.capture import capture
from kernelcast.predict import predict_capture
from kernelcast.records import PredictionRecord, is_prediction_json
from kernelcast.report import prediction_json
from report_records import small_record

REPORT = SRC / "kernelcast" / "report"
# The keys `--json` wrote before the record existed: other tools read them.
JSON_CONTRACT = {"gpu", "gpu_name", "kernel_model", "host", "step_time_us", "first_step_us", "naive_host_timer_us",
                 "gpu_time_us", "host_time_us", "kernels", "bound", "gpu_idle_fraction", "sync_points", "uncosted",
                 "notes", "compiled", "python_time_us", "launch_bound_ops", "step_time_by_host_speed",
                 "sync_points_by_source", "comm", "parallel_host", "ops"}
OP_CONTRACT = {"op", "phase", "module", "source", "flops", "bytes", "intensity", "kernels", "time_us", "bound", "roof",
               "host_us", "python_us", "launch_bound", "sync", "time_source", "time_uncertainty"}


@pytest.fixture(scope="module")
def prediction():
    with capture("h100") as cap:
        with cap.paused():
            model = torch.nn.Linear(256, 256).cuda()
            x = torch.randn(32, 256, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        loss.item()
    return predict_capture(cap.capture, "h100")


@pytest.mark.slow
def test_record_round_trips_through_json(prediction):
    record = prediction.record()
    again = PredictionRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again.ops == record.ops and again.sync_groups == record.sync_groups
    assert again.gpu_spec == record.gpu_spec and len(again.spans) == len(record.ops)
    assert PredictionRecord.from_json(again.to_json()) == again  # spans are rounded to ns once, then stable
    assert again.spans[0].cpu_start_us == pytest.approx(record.spans[0].cpu_start_us, abs=1e-3)


def test_json_keeps_the_contract_and_adds_the_timeline_and_roofs(prediction):
    d = prediction_json(prediction)
    assert JSON_CONTRACT <= set(d) and OP_CONTRACT <= set(d["ops"][0])
    assert d == prediction.to_json() == prediction.record().to_json()
    assert d["record"] == "kernelcast.prediction" and d["format"] == 1
    assert d["timeline"]["fields"] == ["cpu_start_us", "cpu_end_us", "gpu_start_us", "gpu_end_us", "stream",
                                       "sync_wait_us"]
    assert d["gpu_spec"]["mem_bw_bytes_per_s"] == 3.35e12  # the H100's datasheet entry
    assert d["sync_points_by_source"][0]["kind"] == "item"


def test_an_older_prediction_without_timeline_or_roofs_still_loads():
    d = small_record().to_json()
    for key in ("record", "format", "timeline", "gpu_spec", "workload"):
        d.pop(key)
    assert is_prediction_json(d)
    old = PredictionRecord.from_json(d)
    assert old.spans == () and old.gpu_spec is None and old.ops == small_record().ops


def test_keys_a_newer_writer_adds_are_kept():
    d = {**small_record().to_json(), "memory_timeline": [[0, 1e9]], "something_new": {"a": 1}}
    rec = PredictionRecord.from_json(d)
    assert rec.memory_timeline == [[0, 1e9]] and rec.extra == {"something_new": {"a": 1}}
    assert rec.to_json()["something_new"] == {"a": 1} and rec.to_json()["memory_timeline"] == [[0, 1e9]]


def test_a_capture_is_not_a_prediction(prediction):
    assert not is_prediction_json({"format": 1, "ops": [], "workload": ""})
    with pytest.raises(ValueError, match="not a kernelcast prediction"):
        PredictionRecord.from_json({"format": 1, "ops": []})


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(("." * node.level) + (node.module or ""))
    return names


@pytest.mark.parametrize("path", sorted(REPORT.glob("*.py")), ids=lambda p: p.name)
def test_report_reads_only_records(path):
    """report/ imports no stage before it and no torch: it formats the serialized record."""
    forbidden = ("kernelcast.predict", "kernelcast.capture", "kernelcast.costs", "kernelcast.measure", "torch")
    assert not {n for n in _imports(path) if n.startswith(forbidden)}


@pytest.mark.parametrize("path", sorted((SRC / "kernelcast" / "records").glob("*.py")), ids=lambda p: p.name)
def test_records_import_no_torch(path):
    assert not {n for n in _imports(path) if n.startswith("torch")}


# On the path before kernelcast's: any `import torch` fails, as on a machine without it.
TORCH_BLOCKER = 'raise ImportError("torch is not installed here (kernelcast test: a report must not need it)")\n'


def test_report_of_a_saved_prediction_needs_no_torch(prediction, tmp_path):
    saved = tmp_path / "prediction.json"
    prediction.record().save(saved)
    blocker = tmp_path / "no_torch"
    blocker.mkdir()
    (blocker / "torch.py").write_text(TORCH_BLOCKER)
    env = {**subprocess_env(), "PYTHONPATH": f"{blocker}:{SRC}"}
    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "torch is not installed here" in probe.stderr  # the blocker works
    out = tmp_path / "report.html"
    result = subprocess.run([sys.executable, "-m", "kernelcast", "report", str(saved), "-o", str(out)],
                            env=env, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    page = out.read_text()
    assert page.count('<figure class="roofline"') == 1 and page.count('<figure class="timeline"') == 1
    compared = subprocess.run([sys.executable, "-m", "kernelcast", "compare", str(saved), str(saved)], env=env,
                              capture_output=True, text=True, cwd=tmp_path)
    assert compared.returncode == 0 and "step time" in compared.stdout, compared.stderr[-3000:]
