"""The CLI: one clear error line and a non-zero exit for bad input; the --json contract."""

import json
import subprocess
import sys

import pytest

from helpers import subprocess_env

CONTRACT_KEYS = {"step_time_us", "gpu_time_us", "host_time_us", "kernels", "bound", "uncosted", "ops"}
OP_KEYS = {"op", "module", "source", "flops", "bytes", "intensity", "kernels", "time_us", "bound"}


def run(*args, cwd=None, columns=None):
    env = subprocess_env()
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "kernelcast", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


def test_unknown_gpu_is_one_line_with_suggestions():
    result = run("predict", "example:gpt", "--gpu", "h1000")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "unknown GPU 'h1000'" in result.stderr and "h100" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("content,expect", [
    ("def build(:\n", "SyntaxError"),
    ("import no_such_module_xyz\n", "ModuleNotFoundError"),
    ("x = 1\n", "no function 'build'"),
    ("def build():\n    return 42\n", "must return (step, args)"),
    ("def build():\n    raise ValueError('boom')\n", "ValueError: boom"),
])
@pytest.mark.slow
def test_broken_workload_files(tmp_path, content, expect):
    path = tmp_path / "work.py"
    path.write_text(content)
    result = run("predict", f"{path}:build", "--gpu", "h100")
    assert result.returncode == 2, result.stderr
    assert expect in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1


def test_missing_file_and_bad_spec():
    assert "not found" in run("predict", "nope.py:build").stderr
    assert "FILE.py:FUNCTION" in run("predict", "nope").stderr


@pytest.mark.slow
def test_workload_folder_is_importable(tmp_path):
    (tmp_path / "helper_mod.py").write_text("import torch\nWIDTH = 8\n")
    (tmp_path / "work.py").write_text(
        "import torch\nimport helper_mod\n"
        "def build():\n"
        "    m = torch.nn.Linear(helper_mod.WIDTH, 4).cuda()\n"
        "    x = torch.randn(2, helper_mod.WIDTH, device='cuda')\n"
        "    return (lambda x: m(x).sum().backward()), (x,)\n")
    out = tmp_path / "out.json"
    result = run("predict", f"{tmp_path / 'work.py'}:build", "--gpu", "a100", "--json", str(out))
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert CONTRACT_KEYS <= set(data) and data["bound"] in ("gpu", "host")
    assert data["ops"] and OP_KEYS <= set(data["ops"][0])
    assert any(op["op"] == "aten.addmm.default" for op in data["ops"])


def test_devices_lists_the_catalogue():
    result = run("devices")
    assert result.returncode == 0 and "H200" in result.stdout and "MI300X" in result.stdout


@pytest.mark.slow
def test_saved_capture_predicts_again(tmp_path):
    cap = tmp_path / "cap.json"
    assert run("capture", "example:cnn", "-o", str(cap)).returncode == 0
    result = run("predict", str(cap), "--gpu", "l4")
    assert result.returncode == 0 and "L4" in result.stdout
    (tmp_path / "bad.json").write_text("{not json")
    bad = run("predict", str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "could not read capture" in bad.stderr


def test_version_names_kernelcast_and_torch_without_importing_torch():
    import kernelcast
    import torch

    result = run("--version")
    assert result.returncode == 0 and result.stdout.startswith(f"kernelcast {kernelcast.__version__}, ")
    assert f"torch {torch.__version__} " in result.stdout
    probe = ("import sys\nfrom kernelcast.cli import main\n"
             "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
             "assert 'torch' not in sys.modules, 'torch was imported'\n")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).returncode == 0


def test_the_command_exits_fast_with_its_code_and_its_output_flushed(tmp_path):
    """`kernelcast` (cli.run) leaves by os._exit, skipping the interpreter's teardown: what main printed must
    still arrive through a pipe, and the exit code be main's."""
    ok = run("devices", cwd=tmp_path)
    assert ok.returncode == 0 and "h200" in ok.stdout.lower() and ok.stdout.endswith("\n")
    bad = run("predict", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "is not FILE.py:FUNCTION" in bad.stderr


@pytest.mark.parametrize("argv,expect", [
    (["predict", "nope.py:build"], "workload file not found: nope.py"),
    (["predict", "example:gtp"], "unknown example 'gtp'"),
    (["capture", "example:gtp", "-o", "cap.json"], "unknown example 'gtp'"),
    (["predict", "nope"], "is not FILE.py:FUNCTION"),
    (["predict", "no_such_capture.json"], "capture file not found"),
    (["examples"], ""),
])
@pytest.mark.slow
def test_workload_typos_fail_before_torch_is_imported(tmp_path, argv, expect):
    probe = (f"import sys\nfrom kernelcast.cli import main\nrc = main({argv!r})\n"
             "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)\nsys.exit(rc)\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                            env=subprocess_env())
    assert result.stderr.endswith("no torch\n"), result.stderr
    assert expect in result.stderr and result.returncode == (2 if expect else 0)
    assert not (tmp_path / "cap.json").exists()


SHAPE_MISMATCH = ("import torch\n"
                  "def build():\n"
                  "    x = torch.randn(4, 4, device='cuda')\n"
                  "    return (lambda x: x @ torch.randn(5, 3, device='cuda')), (x,)\n")


@pytest.mark.slow
def test_failing_step_is_one_line_without_torch_error_log(tmp_path, monkeypatch, caplog, capfd):
    from kernelcast.cli import main
    from kernelcast.errors import CaptureError

    (tmp_path / "work.py").write_text(SHAPE_MISMATCH)
    result = run("predict", f"{tmp_path / 'work.py'}:build", "--gpu", "h100")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "same reduction dim" in result.stderr and "(at work.py:4)" in result.stderr
    monkeypatch.setenv("KERNELCAST_DEBUG", "1")  # the traceback, and torch's log with it
    with pytest.raises(CaptureError, match="same reduction dim"):
        main(["predict", f"{tmp_path / 'work.py'}:build", "--gpu", "h100"])
    # torch's log reaches the root logger (caplog) or, where torch._logging has set up its own handler and stopped
    # propagation (it does so depending on what configured logging first), stderr
    message = "failed while attempting to run meta for aten.mm.default"
    assert any(message in r.getMessage() for r in caplog.records) or message in capfd.readouterr().err


CPU_ONLY = ("import torch\n"
            "def build():\n"
            "    model, x = torch.nn.Linear(64, 64), torch.randn(8, 64)\n"
            "    return (lambda x: model(x)), (x,)\n")


@pytest.mark.slow
def test_a_step_that_never_touches_the_gpu_is_one_clear_error(tmp_path):
    """A new user's model never moved to 'cuda': the step ran on the CPU and had been predicted as 0 kernels,
    host-bound, with no word about why."""
    (tmp_path / "work.py").write_text(CPU_ONLY)
    result = run("predict", f"{tmp_path / 'work.py'}:build", "--gpu", "h100")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "the step ran on the CPU" in result.stderr and "model.cuda()" in result.stderr


def test_devices_says_how_each_gpu_is_modelled_and_lists_aliases():
    out = run("devices", columns=200).stdout  # wide: each GPU's model in full
    assert "calibrated" in out and "scaled from H200" in out and "(unvalidated)" in out
    assert "h100-sxm5" in out and "amd-mi300x" in out and "AMD: CUDA" in out
    assert "kernelcast devices --interconnects" in out


def test_devices_interconnects_lists_every_link():
    from kernelcast.devices.interconnects import all_interconnects

    result = run("devices", "--interconnects")
    assert result.returncode == 0
    assert all(link_id in result.stdout for link_id in all_interconnects()) and "nvswitch" in result.stdout


@pytest.mark.slow
def test_other_vendor_prediction_warns_in_table_and_json(tmp_path, capsys):
    from kernelcast.cli import main

    cap, out = str(tmp_path / "cap.json"), tmp_path / "pred.json"
    assert main(["capture", "example:cnn", "-o", cap]) == 0
    assert main(["predict", cap, "--gpu", "mi300x", "--json", str(out)]) == 0
    assert "note: AMD Instinct MI300X 192GB is not an NVIDIA GPU" in capsys.readouterr().out
    assert json.loads(out.read_text())["notes"][0].startswith("AMD Instinct MI300X 192GB is not an NVIDIA GPU")
    assert main(["predict", cap, "--gpu", "h100", "--json", str(out)]) == 0
    notes = json.loads(out.read_text())["notes"]
    assert "not an NVIDIA GPU" not in capsys.readouterr().out and not any("NVIDIA" in n for n in notes)
