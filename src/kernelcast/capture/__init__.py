"""Stage 1: capture a PyTorch step on fake CUDA tensors, without a GPU."""

from .api import capture, capture_step, capture_workload

__all__ = ["capture", "capture_step", "capture_workload"]
