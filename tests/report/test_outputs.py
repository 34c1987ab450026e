"""Output files: checked before any capture starts, and written whole or not at all."""

import os
import stat
import subprocess
import sys

import pytest

from helpers import subprocess_env
from kernelcast.errors import KernelcastError
from kernelcast.outputs import check_writable, replaced_atomically, write_text_atomic

OUTPUT_FLAGS = [
    ["predict", "example:cnn", "--json"],
    ["predict", "example:cnn", "--trace"],
    ["predict", "example:cnn", "--save-capture"],
    ["capture", "example:cnn", "-o"],
    ["capture", "example:cnn", "--output"],
    ["calibrate", "--gpu", "h200", "--out"],
    ["measure", "example:cnn", "--json"],
    ["measure", "example:cnn", "--trace"],
    ["validate", "example:cnn", "--json"],
]


# Every output flag with a missing folder; the other kinds of unwritable path with one flag.
CASES = [(argv, "missing folder") for argv in OUTPUT_FLAGS] + \
    [(OUTPUT_FLAGS[0], "a folder"), (OUTPUT_FLAGS[0], "under a file")]


@pytest.mark.slow
@pytest.mark.parametrize("argv,where", CASES, ids=[f"{a[0]} {a[-1]}, {w}" for a, w in CASES])
def test_unwritable_output_fails_before_the_capture(tmp_path, argv, where):
    (tmp_path / "file.txt").write_text("")
    out = {"missing folder": "/nonexistent/dir/x.json", "a folder": str(tmp_path),
           "under a file": str(tmp_path / "file.txt" / "x.json")}[where]
    # Run in a child that reports whether torch was imported: it must not be, so no capture started.
    probe = (f"import sys\nfrom kernelcast.cli import main\nrc = main({[*argv, out]!r})\n"
             "print('torch imported' if 'torch' in sys.modules else 'no torch')\nsys.exit(rc)\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                            env=subprocess_env())
    assert result.returncode == 2 and result.stdout == "no torch\n", result.stderr
    assert result.stderr.count("\n") == 1 and out in result.stderr and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_check_writable_accepts_new_and_existing_files(tmp_path):
    check_writable(tmp_path / "new.json")
    (tmp_path / "old.json").write_text("{}")
    check_writable(tmp_path / "old.json")
    with pytest.raises(KernelcastError, match="--json .* is a folder"):
        check_writable(tmp_path, "--json")


def test_failed_write_leaves_no_file_and_keeps_the_old_one(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(RuntimeError), replaced_atomically(target) as tmp:
        tmp.write_text('{"half": ')
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    target.write_text("old")
    with pytest.raises(RuntimeError), replaced_atomically(target) as tmp:
        tmp.write_text('{"half": ')
        raise RuntimeError("interrupted")
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"] and target.read_text() == "old"


def test_written_file_has_the_usual_permissions(tmp_path):
    write_text_atomic(tmp_path / "out.json", "{}")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "out.json").read_text() == "{}"
    assert stat.S_IMODE((tmp_path / "out.json").stat().st_mode) == 0o666 & ~mask
