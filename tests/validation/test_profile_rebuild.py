"""The shipped H200 profile is rebuilt from validation/ alone (scripts/fit/build_h200_profile.py, issue 35)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "fit"))

from build_h200_profile import differences  # noqa: E402

RELATIVE = 1e-9  # the rebuild here is byte-identical (--check); another CPU's vector paths may move a last bit


@pytest.mark.slow
def test_the_shipped_profile_is_rebuilt_from_validation_alone(tmp_path):
    """Every section, the host's included (it had been carried forward from the profile being replaced), comes
    out of the raw runs and fits in validation/; about 2.5 minutes on two cores."""
    out = tmp_path / "h200.json"
    result = subprocess.run([sys.executable, str(ROOT / "scripts/fit/build_h200_profile.py"), "--out", str(out)],
                            capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    shipped = json.loads((ROOT / "src/kernelcast/profiles/h200.json").read_text())
    assert differences(shipped, json.loads(out.read_text()), rel_tol=RELATIVE) == []


def test_rounding_leaves_tree_ensembles_whole():
    """A split threshold rounded onto a feature value would send it down the other branch."""
    from build_h200_profile import FLOAT_DIGITS, rounded

    tree = {"trees": [{"t": [0.1 + 0.2]}], "baseline": 1 / 3}
    value = {"coefficients": [1 / 3, 2.0, 7], "regressor": tree}
    out = rounded(value)
    assert out["regressor"] is tree and out["coefficients"][1:] == [2.0, 7]
    assert out["coefficients"][0] == float(f"{1 / 3:.{FLOAT_DIGITS}g}") != 1 / 3
