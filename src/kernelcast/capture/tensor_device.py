"""The device a tensor stands for in a capture."""

from __future__ import annotations

import torch


def device_type(t: torch.Tensor) -> str:
    """A tensor's device type ("cuda", "cpu", ...) without dispatching prim.device (slow under FakeTensorMode): a
    fake tensor's fake device, else its own."""
    fake = getattr(t, "fake_device", None)
    return (fake if fake is not None else t.device).type
