"""Bad input, one table: each case is one line on stderr, exit status 2, and no output file left behind.

Cases run through cli.main in this process (torch is already imported here, so they take milliseconds), with
stderr captured at the file descriptor, and log records captured too: torch's loggers must stay quiet (their
handler may hold a stream from before this test's capture, so the records are checked, not only stderr).
"""

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import subprocess_env
from kernelcast.cli import EXIT_BAD_INPUT, main

WORKLOADS = {
    "syntax_error.py": "def build(:\n",
    "import_error.py": "import no_such_module_xyz\n",
    "no_build.py": "x = 1\n",
    "build_raises.py": "def build():\n    raise ValueError('boom')\n",
    "build_returns_int.py": "def build():\n    return 42\n",
    "build_returns_step_only.py": "def build():\n    return lambda: None\n",
    "build_returns_triple.py": "def build():\n    return (lambda: None), (), ()\n",
    "build_returns_uncallable.py": "def build():\n    return None, ()\n",
    "step_raises.py": "def build():\n    def step():\n        raise ValueError('boom')\n    return step, ()\n",
    "step_shape_mismatch.py": ("import torch\n"
                               "def build():\n"
                               "    x = torch.randn(4, 4, device='cuda')\n"
                               "    return (lambda x: x @ torch.randn(5, 3, device='cuda')), (x,)\n"),
}

# Saved captures and raw calibration results that do not parse, or parse into the wrong thing.
BROKEN_JSON = {
    "not_json.json": "{not json",
    "truncated.json": '{"format": 1, "workload": "example:cnn", "ops": [{"index": 0, "op": "aten.mm',
    "a_list.json": "[]",
    "no_ops.json": '{"format": 1}',
    "bad_op.json": '{"format": 1, "ops": [{"op": 3}]}',
    "old_format.json": '{"format": 0, "ops": []}',
    "empty.json": "",
    "bad_case.json": '{"format": 1, "meta": {}, "cases": [{"ops": [{"index": 0}]}]}',
}

OUT = "out.json"  # every case is given an output path; none may appear

CASES = {
    "unknown GPU": (["predict", "example:cnn", "--gpu", "h1000", "--json", OUT], "unknown GPU 'h1000'"),
    "unknown interconnect": (["predict", "example:gpt_ddp", "--world-size", "2", "--interconnect", "warp",
                              "--json", OUT], "unknown interconnect 'warp'"),
    "world size 0": (["predict", "example:cnn", "--world-size", "0", "--json", OUT], "--world-size must be 1"),
    "missing file": (["predict", "missing.py:build", "--json", OUT], "workload file not found: missing.py"),
    "unknown example": (["capture", "example:gtp", "-o", OUT], "unknown example 'gtp'"),
    "not a spec": (["predict", "train", "--json", OUT], "is not FILE.py:FUNCTION"),
    "syntax error": (["predict", "syntax_error.py:build", "--json", OUT], "SyntaxError"),
    "import error": (["predict", "import_error.py:build", "--json", OUT], "No module named 'no_such_module_xyz'"),
    "no build()": (["predict", "no_build.py:build", "--json", OUT], "has no function 'build'"),
    "build() raises": (["predict", "build_raises.py:build", "--json", OUT], "ValueError: boom (at build_raises.py:2)"),
    "build() returns 42": (["capture", "build_returns_int.py:build", "-o", OUT], "must return (step, args)"),
    "build() returns a step only": (["predict", "build_returns_step_only.py:build", "--json", OUT],
                                    "must return (step, args)"),
    "build() returns 3 things": (["predict", "build_returns_triple.py:build", "--json", OUT],
                                 "must return (step, args)"),
    "build() returns no step": (["predict", "build_returns_uncallable.py:build", "--json", OUT],
                                "must return (step, args)"),
    "step raises": (["predict", "step_raises.py:build", "--json", OUT, "--save-capture", "cap.json"],
                    "ValueError: boom (at step_raises.py:3)"),
    "step shape mismatch": (["predict", "step_shape_mismatch.py:build", "--trace", OUT],
                            "same reduction dim, but got [4, 4] X [5, 3]. (at step_shape_mismatch.py:4)"),
    "measure without a GPU": (["measure", "example:cnn", "--json", OUT], "no CUDA GPU is visible here"),
    "validate without a GPU": (["validate", "example:cnn", "--json", OUT], "no CUDA GPU is visible here"),
    "calibrate without a GPU": (["calibrate", "--gpu", "h200", "--out", OUT], "no CUDA GPU is visible here"),
    "missing capture": (["predict", "missing.json", "--json", OUT], "capture file not found: missing.json"),
    **{f"capture {name}": (["predict", name, "--json", OUT], f"could not read capture {name}")
       for name in BROKEN_JSON},
    **{f"raw results {name}": (["calibrate", "--gpu", "h200", "--from-raw", name, "--out", OUT],
                               f"could not read {name}") for name in BROKEN_JSON},
    "missing raw results": (["calibrate", "--gpu", "h200", "--from-raw", "missing.json", "--out", OUT],
                            "could not read missing.json"),
    "unwritable --json": (["predict", "example:cnn", "--json", "/nonexistent/dir/x.json"],
                          "folder /nonexistent/dir does not exist"),
    "--trace is a folder": (["predict", "example:cnn", "--trace", "."], "--trace . is a folder"),
    "unwritable -o": (["capture", "example:cnn", "-o", "/nonexistent/dir/x.json"], "-o/--output"),
}


@pytest.mark.parametrize("argv,expect", CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_exit_2_and_no_output(tmp_path, monkeypatch, capfd, caplog, argv, expect):
    for name, text in {**WORKLOADS, **BROKEN_JSON}.items():
        (tmp_path / name).write_text(text)
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNELCAST_DEBUG", raising=False)
    assert main(argv) == EXIT_BAD_INPUT
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kernelcast: error: "), err
    assert expect in err, err
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, not even a temp file
    assert not Path("/nonexistent").exists()


@pytest.mark.slow
def test_same_capture_predicts_to_identical_json(tmp_path):
    """Two `kernelcast predict cap.json --json` runs write the same bytes, in separate processes with different
    hash seeds (so set and dict orders that depend on string hashes would show)."""
    cap = str(tmp_path / "cap.json")
    assert main(["capture", "example:gpt", "-o", cap]) == 0
    for seed in ("1", "2"):
        result = subprocess.run([sys.executable, "-m", "kernelcast", "predict", cap, "--gpu", "h100", "--json",
                                 str(tmp_path / f"{seed}.json")], capture_output=True, text=True,
                                env={**subprocess_env(), "PYTHONHASHSEED": seed})
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "1.json").read_bytes() == (tmp_path / "2.json").read_bytes()
    assert json.loads((tmp_path / "1.json").read_text())["ops"]
