"""The fake-CUDA helper's build: one line on stderr when (and only when) it compiles."""

import subprocess
from pathlib import Path

import pytest

from kernelcast import _fake_cuda


def _fake_compiler(cmd, **kwargs):
    """Stands in for the C++ compiler: writes the shared object it was asked for."""
    Path(cmd[cmd.index("-o") + 1]).write_bytes(b"not really a shared object")
    return subprocess.CompletedProcess(cmd, 0, "", "")


def test_compile_says_so_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(_fake_cuda.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("CXX", "c++")
    monkeypatch.setattr(_fake_cuda, "_compile_flags", lambda: {"inc": [], "lib": [], "abi": 1})
    monkeypatch.setattr(_fake_cuda.subprocess, "run", _fake_compiler)
    first = _fake_cuda.build("9.9.9")
    assert first.is_file() and first.parent == tmp_path
    err = capsys.readouterr().err
    assert err == "kernelcast: compiling the fake-CUDA helper for torch 9.9.9 (once, ~5 s)...\n"
    assert _fake_cuda.build("9.9.9") == first  # cached: no compile, no line
    assert capsys.readouterr().err == ""


def test_a_torch_that_refuses_to_override_a_meta_kernel_keeps_it(monkeypatch):
    """torch 2.11 refuses register_fake for an op with a Meta kernel (aten::_ctc_loss): the capture keeps the
    build's kernel for that op instead of failing every capture (the H200 machine's torch did)."""
    import torch

    from kernelcast.capture import capture_workload
    from kernelcast.capture import cuda_only
    from kernelcast.capture.cuda_path import load_op_table

    registered = []
    original = torch.library.register_fake

    def refusing(name, fake, lib=None):
        if name == "aten::_ctc_loss":
            raise RuntimeError("register_fake(...): the operator aten::_ctc_loss already has an DispatchKey::Meta "
                               "implementation via a pre-existing torch.library or TORCH_LIBRARY registration.")
        registered.append(name)
        return original(name, fake, lib=lib)

    monkeypatch.setattr(torch.library, "register_fake", refusing)

    def build():
        lin = torch.nn.Linear(8, 8).cuda()
        x = torch.ones(4, 8, device="cuda")
        return (lambda m, v: m(v).sum().backward()), (lin, x)

    cap = capture_workload(build, "h200")
    assert any(op.op == "aten.addmm.default" for op in cap.ops)
    assert "aten::_ctc_loss_backward" in registered  # the others were still registered
    monkeypatch.setattr(torch.library, "register_fake", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")))
    import pytest

    with pytest.raises(RuntimeError):  # any other refusal is not swallowed
        with cuda_only.cuda_only_fakes(load_op_table()):
            pass


def test_a_cuda_build_loads_the_helper_only_where_no_gpu_is_usable(monkeypatch, tmp_path):
    """The CUDA build on a machine without a GPU needs the helper (its real hooks fail the first backward);
    with a GPU it keeps torch's own."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not _fake_cuda.gpu_usable()  # every device hidden
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(_fake_cuda, "NVIDIA_DEVICE_GLOB", "no-such-device-node-*")
    assert not _fake_cuda.gpu_usable()  # no /dev/nvidia* node: the driver made none
    monkeypatch.setattr(_fake_cuda, "NVIDIA_DEVICE_GLOB", "*")  # some node exists in /dev
    monkeypatch.setattr(_fake_cuda, "CUDA_DRIVER_LIBRARY", str(tmp_path / "libcuda-missing.so.1"))
    assert not _fake_cuda.gpu_usable()  # no driver library


def test_this_machines_torch_has_the_helper_loaded():
    """CI runs the suite on machines without a GPU, under a CPU build and a CUDA build: the helper is loaded in
    both, before torch (tests/conftest.py imports kernelcast first)."""
    import torch

    state = _fake_cuda.state()
    if torch.version.cuda is not None and _fake_cuda.gpu_usable():
        pytest.skip("a GPU is usable here: torch's own CUDA hooks are kept")
    assert state.needed and state.loaded and state.before_torch, state.detail
