"""Find the line of user (or model-library) code that issued the current op."""

from __future__ import annotations

import os
import sys
import sysconfig
from functools import lru_cache
from types import FrameType

import torch

# Frames from these trees are machinery, not the code a user would want to edit. kernelcast's own example
# workloads are user code.
_KERNELCAST_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_EXAMPLES_ROOT = _KERNELCAST_ROOT + "examples" + os.sep
_INTERNAL_ROOTS = (os.path.dirname(torch.__file__) + os.sep, _KERNELCAST_ROOT,
                   sysconfig.get_paths()["stdlib"] + os.sep)
_SITE_MARKERS = ("site-packages" + os.sep, "dist-packages" + os.sep)
MAX_FRAMES = 200  # deep enough for any model; bounds the walk when something recurses


@lru_cache(maxsize=1)
def _inductor_cache_root() -> str:
    """Where Inductor writes the Python wrappers it generates (torch.compile'd code calls them): machinery."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:
        return os.sep + "nonexistent" + os.sep
    return os.path.abspath(cache_dir()) + os.sep


@lru_cache(maxsize=4096)
def _is_internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    if path.startswith(_EXAMPLES_ROOT):
        return False
    return path.startswith(_INTERNAL_ROOTS) or filename.startswith("<frozen") or path.startswith(_inductor_cache_root())


@lru_cache(maxsize=4096)
def display_path(filename: str) -> str:
    """Short path: from the package root for installed code, relative to the cwd for the user's own files."""
    for marker in _SITE_MARKERS:
        if marker in filename:
            return filename.split(marker, 1)[1]
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith(".." + os.sep + "..") else rel


def user_frame(start: FrameType | None = None) -> FrameType | None:
    frame = start or sys._getframe(1)
    for _ in range(MAX_FRAMES):
        if frame is None:
            return None
        if not _is_internal(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def current_source() -> str:
    frame = user_frame(sys._getframe(1))
    if frame is None:
        return ""
    return f"{display_path(frame.f_code.co_filename)}:{frame.f_lineno} in {frame.f_code.co_name}"
