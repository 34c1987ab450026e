"""kernelcast: predict what a PyTorch step costs on a GPU, without one.

    import kernelcast                      # before torch, so backward can be captured on a machine without a GPU
    pred = kernelcast.predict_file("train.py:build", gpu="h100")
    pred.show()
"""

import sys
import types

from kernelcast import _fake_cuda

# Before anything imports torch: a torch without a GPU needs fake CUDA hooks registered first (see _fake_cuda.py).
_fake_cuda.preload()

__version__ = "0.1.0"

_API = {
    "capture": "kernelcast.api", "capture_file": "kernelcast.api", "predict": "kernelcast.api",
    "predict_file": "kernelcast.api", "get_gpu": "kernelcast.devices", "all_gpus": "kernelcast.devices",
    "Capture": "kernelcast.records", "KernelcastError": "kernelcast.errors",
}
__all__ = sorted(_API)


def __getattr__(name: str):
    """Import the API (and with it torch) on first use, so `kernelcast devices` and reports stay light."""
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'kernelcast' has no attribute {name!r}")


class _Package(types.ModuleType):
    """`kernelcast.capture` and `kernelcast.predict` name both an API function and a stage's subpackage.

    Python's import system sets a package attribute to every submodule it loads, so once anything imported the
    subpackage (`kernelcast.predict_file` does), `kernelcast.capture("h100")` would call a module. The API
    names win here; the subpackages stay importable (`from kernelcast.capture import session`), only not as
    attributes of this package (so not `import kernelcast.capture.session as s` either).
    """

    def __setattr__(self, name: str, value) -> None:
        if name in _API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
