"""Stage 1: capture a PyTorch step on fake CUDA tensors, without a GPU.

The entry points (api.py) import torch, which takes seconds; they load on first use, so that workload.py can
check a workload spec and list the examples before torch is imported.
"""

__all__ = ["capture", "capture_step", "capture_workload"]


def __getattr__(name: str):
    if name in __all__:
        try:
            from . import api
        except AttributeError as exc:
            # Python turns an AttributeError raised here into "cannot import name 'capture'", which hides the
            # cause (an op or attribute this torch lacks); say what it was and which torch.
            import torch

            raise ImportError(f"kernelcast's capture stage does not import on torch {torch.__version__}: "
                              f"{exc}") from exc
        return getattr(api, name)
    raise AttributeError(f"module 'kernelcast.capture' has no attribute {name!r}")
