"""scripts/eval/host_range_check.py: which printed ranges hold each measured step, and the verdicts against the runs."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, doc: dict) -> str:
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return str(path)


def test_ranges_and_verdicts_are_counted_against_every_run(tmp_path):
    predicted = {"workloads": [
        {"name": "small_mlp", "predicted": {"bound": "host", "step_time_us": 100.0, "step_time_range_us": [90, 110],
                                            "step_time_run_range_us": [95, 130], "step_range_us": [80, 150]}},
        {"name": "big_gemm", "predicted": {"bound": "gpu", "step_time_us": 1000.0, "step_time_range_us": [0, 0],
                                           "step_time_run_range_us": [1000, 1000], "step_range_us": [1000, 1000]}}]}
    (tmp_path / "pred.json").write_text(json.dumps(predicted))
    runs = [_write(tmp_path / f"run{i}.json.gz", {"date": "d", "workloads": [
        {"name": "small_mlp", "measured": {"step_ms_median": ms}},
        {"name": "big_gemm", "measured": {"step_ms_median": 1.0}}]}) for i, ms in enumerate((0.14, 0.12, 0.10))]
    gpu = _write(tmp_path / "gpu.json.gz", {"workloads": [
        {"name": "small_mlp", "measured": {"gpu_time_us": 20.0}},  # busy 14-20%: host in every run
        {"name": "big_gemm", "measured": {"gpu_time_us": 990.0}}]})  # busy 99%: gpu
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval" / "host_range_check.py"), str(tmp_path / "pred.json"),
                          *runs, "--gpu-times", gpu], capture_output=True, text=True, check=True).stdout
    median_line = next(line for line in out.splitlines() if line.startswith("median of the 3 runs"))
    # the median run, 120 us: outside the model-Python range (90-110), inside the run range and the step's range
    assert "model-Python range 0" in median_line and "calibration-run range 1" in median_line
    assert "(both at once) 1 of 1" in median_line
    assert "verdicts: right on 2 of 2 steps" in out
