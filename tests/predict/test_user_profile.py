"""`--profile FILE`: a profile calibrated on the user's own GPU takes the place of the shipped data for that GPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import subprocess_env
from kernelcast import profiles
from kernelcast.errors import KernelcastError

SHIPPED = Path(profiles.__file__).parent / "h200.json"


@pytest.fixture
def l4_profile(tmp_path):
    """The shipped H200 profile relabelled as an L4's, as `kernelcast calibrate --gpu l4` would write one."""
    data = json.loads(SHIPPED.read_text())
    data["gpu"], data["device_name"] = "l4", "NVIDIA L4"
    path = tmp_path / "l4.json"
    path.write_text(json.dumps(data))
    yield path
    profiles._USER_PROFILES.clear()


def test_a_users_profile_is_used_for_its_gpu(l4_profile):
    from kernelcast.devices import get_gpu
    from kernelcast.predict import kernel_model_label

    assert kernel_model_label(get_gpu("l4")).startswith("scaled from H200")
    profile = profiles.use_profile(str(l4_profile))
    assert profile.gpu == "l4" and profiles.load_profile("l4") is profile
    assert kernel_model_label(get_gpu("l4")) == "calibrated"
    assert profiles.load_profile("h200").gpu == "h200"  # other GPUs keep theirs


@pytest.mark.parametrize("content,expect", [
    (None, "cannot read profile"), ("{", "cannot read profile"), ('{"gpu": "l4"}', "is not a kernelcast profile"),
])
def test_a_bad_profile_is_one_clear_error(tmp_path, content, expect):
    path = tmp_path / "p.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KernelcastError, match=expect):
        profiles.use_profile(str(path))


@pytest.mark.slow
def test_the_cli_takes_a_profile_and_refuses_a_bad_one(tmp_path, l4_profile):
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    result = subprocess.run([sys.executable, "-m", "kernelcast", "predict", "example:cnn", "--gpu", "l4",
                             "--profile", str(bad)], capture_output=True, text=True, env=subprocess_env())
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not a kernelcast profile" in result.stderr
    out = tmp_path / "pred.json"
    result = subprocess.run([sys.executable, "-m", "kernelcast", "predict", "example:cnn", "--gpu", "l4",
                             "--profile", str(l4_profile), "--json", str(out)], capture_output=True, text=True,
                            env=subprocess_env())
    assert result.returncode == 0, result.stderr
    assert "calibrated (l4 profile" in json.loads(out.read_text())["kernel_model"]
