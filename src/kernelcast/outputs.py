"""Files kernelcast writes: checked before the work that fills them, and written whole or not at all.

A capture takes seconds to minutes; an output path with a typo should fail before it starts, not after. And an
interrupted or failed write must not leave half a JSON file that a later `predict` would try to read: each
file is written to a temporary file beside it and renamed over it (os.replace is atomic on one file system).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from kernelcast.errors import KernelcastError

# New files get the permissions open() would give (0o666 less the umask), not mkstemp's private 0o600.
DEFAULT_FILE_MODE = 0o666


def check_writable(path: str | Path, flag: str = "output") -> None:
    """Raise a KernelcastError naming `flag` unless `path` can be created or replaced by write_text_atomic."""
    p = Path(path)
    if p.is_dir():
        raise KernelcastError(f"{flag} {path} is a folder, not a file")
    folder = p.parent
    if not folder.is_dir():
        raise KernelcastError(f"{flag} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise KernelcastError(f"{flag} {path}: folder {folder} is not writable")
    # os.access answers for the permission bits: root is let into /proc and read-only mounts, where the write
    # then fails after the whole capture. A file made and removed there says it can be written.
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{p.name}.", suffix=".probe")
    except OSError as exc:
        raise KernelcastError(f"{flag} {path}: cannot create a file in {folder}: {exc.strerror or exc}") from exc
    os.close(fd)
    os.unlink(probe)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def replaced_atomically(path: str | Path) -> Iterator[Path]:
    """A temporary file beside `path` to write; it becomes `path` only if the block finishes without error."""
    p = Path(path)
    try:
        fd, tmp_name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as exc:
        raise KernelcastError(f"could not write {path}: {exc.strerror or exc}") from exc
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, DEFAULT_FILE_MODE & ~_umask())
        os.replace(tmp, p)
    except OSError as exc:
        raise KernelcastError(f"could not write {path}: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_text_atomic(path: str | Path, text: str) -> None:
    with replaced_atomically(path) as tmp:
        tmp.write_text(text)
