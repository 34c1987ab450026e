"""The set-up recipe, as `make -n` prints it (nothing is run): where torch comes from, and the demo's hint.

The recipe itself runs in CI (`make test` on a clean clone, .ci/run); these check what a clean clone here
cannot show: the order of the torch sources, and what `make demo` tells the user at the end.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(target: str, tmp_path: Path) -> str:
    venv = tmp_path / "venv"  # missing, so make plans the whole set-up
    result = subprocess.run(["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.replace(str(venv), "VENV")


def test_torch_sources_in_order(tmp_path):
    plan = dry_run("setup", tmp_path)
    reuse = plan.index("venv --system-site-packages VENV")  # a CPU torch the base Python has
    in_venv = plan.index('VENV/bin/python -c "import torch"')  # torch the venv already sees
    cpu_index = plan.index("--timeout 10 --retries 0 --index-url https://download.pytorch.org/whl/cpu torch==2.13.0")
    default = plan.index("VENV/bin/pip install -q torch==2.13.0")
    assert reuse < in_venv < cpu_index < default < plan.index("pip install -q -e '.[test]'")
    assert "torch.version.cuda is not None" in plan  # a CUDA build in the base Python is not reused


def test_demo_ends_with_how_to_run_kernelcast(tmp_path):
    plan = dry_run("demo", tmp_path)
    assert plan.index("kernelcast predict example:gpt") < plan.index("source VENV/bin/activate")
    assert "VENV/bin/kernelcast" in plan
