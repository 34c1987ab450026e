"""The README's examples run as written: every ```python block, and every `kernelcast ...` line of its ```bash
blocks. The README may then never again show code that crashes. Its ```text blocks are output excerpts, each
under the command that printed it (a first line `$ kernelcast ...`): that command must parse, and the GPU and
workload it names must exist; it is not run (an excerpt of `advise` or of an out-of-memory step took minutes).

The examples name a user's workload file, train.py; the tests write a small one (TRAIN_PY) where they run.
Lines that need a GPU are parsed, and the names in them (GPU, workload) checked, but not run. Any other shell
line must be listed in NOT_RUN with the reason, so a new one cannot slip by unchecked.
"""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import subprocess_env
from kernelcast.capture.workload import check_spec
from kernelcast.cli import build_parser, main
from kernelcast.capture.inductor import triton_missing
from kernelcast.devices import get_gpu

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)

# A small training step, for the README's train.py.
TRAIN_PY = """\
import torch
import torch.nn.functional as F


def build(batch=32):
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(batch, 64, device="cuda"), torch.randint(0, 10, (batch,), device="cuda")

    def step(x, y):
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    return step, (x, y)
"""

NEEDS_GPU = {"calibrate", "measure", "validate"}  # without --from-raw: run on a machine with a GPU
NOT_RUN = {
    "make demo": "the set-up itself: CI runs `make test` on a clean clone (.ci/run), which shares its recipe",
    "make test": "the set-up itself: CI runs it on a clean clone (.ci/run)",
    "make test-cuda-build": "CI runs it after `make test` on a clean clone (.ci/run); several GB to install",
    "source .venv/bin/activate": "shell state; here the CLI runs in-process from the checkout",
}


def blocks(lang: str) -> list[str]:
    return [body for fence_lang, body in FENCE.findall(README.read_text()) if fence_lang == lang]


def shell_lines() -> list[list[str]]:
    """Each command line of the bash blocks as argv, comments dropped."""
    return [argv for body in blocks("bash") for line in body.splitlines() if (argv := shlex.split(line, comments=True))]


def test_readme_has_the_blocks_this_file_checks():
    assert blocks("python") and shell_lines()
    assert {lang for lang, _ in FENCE.findall(README.read_text())} <= {"python", "bash", "text"}


def test_output_excerpts_name_the_command_that_printed_them():
    for body in blocks("text"):
        first = body.splitlines()[0]
        assert first.startswith("$ kernelcast "), f"README output excerpt without its command: {first!r}"
        for line in body.splitlines():
            if line.startswith("$ "):  # a block may show more than one command and its output
                argv = shlex.split(line[2:])
                assert argv[0] == "kernelcast", line
                _check_names(argv[1:])


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_block_runs(tmp_path, index):
    (tmp_path / "train.py").write_text(TRAIN_PY)
    code = "import kernelcast  # first, as the README says\n" + blocks("python")[index]
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            env=subprocess_env())
    assert result.returncode == 0, f"README python block {index} failed:\n{result.stderr[-3000:]}"
    assert "step " in result.stdout  # pred.show() printed a summary line


def _check_names(argv: list[str]) -> None:
    """What a GPU-only line names must exist: its GPU and its workload."""
    args = build_parser().parse_args(argv)
    if getattr(args, "gpu", None):
        get_gpu(args.gpu)
    if getattr(args, "workload", None):
        check_spec(args.workload)


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # --version and --help exit from argparse
        return exc.code


@pytest.mark.slow
def test_shell_lines_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(TRAIN_PY)
    monkeypatch.chdir(tmp_path)
    ran = []
    for argv in shell_lines():
        line = shlex.join(argv)
        if argv[0] != "kernelcast":
            assert line in NOT_RUN, f"README shell line {line!r} is neither a kernelcast command nor in NOT_RUN"
            continue
        if argv[1] in NEEDS_GPU and "--from-raw" not in argv:
            _check_names(argv[1:])
            continue
        if "--compile" in argv and triton_missing() is not None:  # Inductor needs triton (docs/compile.md)
            _check_names(argv[1:])
            continue
        code = _run(argv[1:])
        out = capsys.readouterr()
        assert code == 0, f"README line {line!r} exited {code}: {out.err}"
        ran.append(argv[1])
    assert {"predict", "capture", "devices"} <= set(ran)
