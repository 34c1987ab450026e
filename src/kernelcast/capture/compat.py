"""Make model libraries take the path they take on a real GPU while kernelcast captures.

Some libraries ask "is this a fake tensor?" to detect graph tracing (torch.export, dynamo) and then take a
tracing-safe path that a real run does not take. transformers does (`is_tracing` treats FakeTensor as tracing):
a causal LM in training then materialises an attention mask that the real step skips, adding kernels the GPU
never runs. During a capture the answer is "no", as it is on the GPU. Each adapter applies only if its library
is already imported, and only for the length of the capture.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator
from unittest import mock


@contextlib.contextmanager
def real_run_paths() -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        import_utils = sys.modules.get("transformers.utils.import_utils")
        if import_utils is not None and hasattr(import_utils, "is_fake_tensor"):
            stack.enter_context(mock.patch.object(import_utils, "is_fake_tensor", lambda tensor: False))
        yield
