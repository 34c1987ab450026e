"""scripts/eval/opinfo_sweep.py: bad input is one line and exit 2; a one-OpInfo sweep writes its JSON and summary."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "eval" / "opinfo_sweep.py"


def _run(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=ROOT)


@pytest.mark.slow
def test_bad_arguments_are_one_line_and_exit_2(tmp_path):
    for args in (["--samples", "0"], ["--render", str(tmp_path / "missing.json")]):
        done = _run(*args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and done.stderr.startswith("error:")


@pytest.mark.slow
def test_one_opinfo_sweep_writes_json_and_doc(tmp_path):
    out, doc = tmp_path / "sweep.json", tmp_path / "sweep.md"
    done = _run("--only", "addmv", "--samples", "1", "--out", str(out), "--doc", str(doc))
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(out.read_text())["summary"]
    # addmv's forward and backward (addmv, mv, transposes, mul): all captured and costed
    assert summary["opinfos"] == 1 and summary["samples_failed"] == 0 and summary["costed_share"] == 1.0
    text = doc.read_text()
    assert "--only addmv" in text and "| costed | " in text  # the doc is rendered from this run
