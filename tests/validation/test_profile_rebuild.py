"""The shipped H200 profile is rebuilt from validation/ alone (scripts/fit/build_h200_profile.py, issue 35)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "fit"))

RELATIVE = 1e-9  # the rebuild here is byte-identical (--check); another CPU's vector paths may move a last bit


def _close(a, b, path="") -> list[str]:
    if isinstance(a, float) or isinstance(b, float):
        ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
            math.isclose(a, b, rel_tol=RELATIVE, abs_tol=1e-300)
        return [] if ok else [path]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(set(a) ^ set(b))[:5]}"]
        return [p for k in a for p in _close(a[k], b[k], f"{path}/{k}")][:10]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} != {len(b)} items"]
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in _close(x, y, f"{path}[{i}]")][:10]
    return [] if a == b else [path]


@pytest.mark.slow
def test_the_shipped_profile_is_rebuilt_from_validation_alone(tmp_path):
    """Every section, the host's included (it had been carried forward from the profile being replaced), comes
    out of the raw runs and fits in validation/; about 2.5 minutes on two cores."""
    out = tmp_path / "h200.json"
    result = subprocess.run([sys.executable, str(ROOT / "scripts/fit/build_h200_profile.py"), "--out", str(out)],
                            capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    shipped = json.loads((ROOT / "src/kernelcast/profiles/h200.json").read_text())
    assert _close(shipped, json.loads(out.read_text())) == []


def test_rounding_leaves_tree_ensembles_whole():
    """A split threshold rounded onto a feature value would send it down the other branch."""
    from build_h200_profile import FLOAT_DIGITS, rounded

    tree = {"trees": [{"t": [0.1 + 0.2]}], "baseline": 1 / 3}
    value = {"coefficients": [1 / 3, 2.0, 7], "regressor": tree}
    out = rounded(value)
    assert out["regressor"] is tree and out["coefficients"][1:] == [2.0, 7]
    assert out["coefficients"][0] == float(f"{1 / 3:.{FLOAT_DIGITS}g}") != 1 / 3
