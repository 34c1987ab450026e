"""The fake-CUDA helper's build: one line on stderr when (and only when) it compiles."""

import subprocess
from pathlib import Path

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
