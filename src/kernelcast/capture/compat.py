"""Make model libraries take the path they take on a real GPU while kernelcast captures.

Some libraries ask "is this a fake tensor?" to detect graph tracing (torch.export, dynamo) and then take a
tracing-safe path that a real run does not take. transformers does (`is_tracing` treats FakeTensor as tracing):
a causal LM in training then materialises an attention mask that the real step skips, adding kernels the GPU
never runs. During a capture the answer is "no", as it is on the GPU. Each adapter applies to its library once
it is imported, for the length of the capture: when the capture starts, and again after build() (which may
import the library itself: zoo qwen2_train imports transformers inside build(); captured first in a fresh
process, it ran 1519 ops where the GPU ran the 1375 of a capture made after another, +4.4% kernels).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Callable
from unittest import mock


def _transformers_fake_tensor_check() -> contextlib.AbstractContextManager | None:
    import_utils = sys.modules.get("transformers.utils.import_utils")
    if import_utils is None or not hasattr(import_utils, "is_fake_tensor"):
        return None
    return mock.patch.object(import_utils, "is_fake_tensor", lambda tensor: False)


# (library, the patch that makes it take its real-GPU path; None while the library is not imported)
ADAPTERS: tuple[tuple[str, Callable[[], contextlib.AbstractContextManager | None]], ...] = (
    ("transformers", _transformers_fake_tensor_check),
)


class RealRunPaths:
    """The adapters in force for a capture: `refresh()` applies those whose library was imported since."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._applied: set[str] = set()

    def refresh(self) -> None:
        for library, adapter in ADAPTERS:
            if library in self._applied:
                continue
            patch = adapter()
            if patch is not None:
                self._stack.enter_context(patch)
                self._applied.add(library)

    def __enter__(self) -> "RealRunPaths":
        self.refresh()
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()
