"""`torch.cuda` as the user's step sees it during a capture: one device of the target GPU, and no real calls.

User and library code asks torch.cuda questions (is_available, capability, bf16 support) and calls it
(synchronize, manual_seed). On a machine without a GPU those raise or answer "no", which would change the
path the code takes. During a capture they answer for the target GPU instead, and a synchronize is recorded
as a sync point. The patches are scoped to the capture and undone on exit.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator
from unittest import mock

import torch


@dataclass(frozen=True)
class FakeDeviceProperties:
    """The fields of torch.cuda.get_device_properties() that model code reads."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    L2_cache_size: int
    is_integrated: bool = False
    is_multi_gpu_board: bool = False
    warp_size: int = 32
    max_threads_per_multi_processor: int = 2048
    regs_per_multiprocessor: int = 65536
    gcnArchName: str = ""
    uuid: str = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class TargetDevice:
    name: str
    capability: tuple[int, int]
    memory_bytes: int
    sm_count: int
    l2_bytes: int
    supports_bf16: bool

    def properties(self) -> FakeDeviceProperties:
        return FakeDeviceProperties(
            name=self.name, major=self.capability[0], minor=self.capability[1],
            total_memory=self.memory_bytes, multi_processor_count=self.sm_count, L2_cache_size=self.l2_bytes,
        )


def _fakes(target: TargetDevice, on_sync: Callable[[str], None]) -> dict[str, object]:
    props = target.properties()

    def synchronize(device=None) -> None:
        on_sync("synchronize")

    return {
        "is_available": lambda: True,
        "_lazy_init": lambda: None,
        "init": lambda: None,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "get_device_capability": lambda device=None: target.capability,
        "get_device_name": lambda device=None: target.name,
        "get_device_properties": lambda device=None: props,
        "is_bf16_supported": lambda including_emulation=True: target.supports_bf16,
        "synchronize": synchronize,
        "manual_seed": lambda seed: None,
        "manual_seed_all": lambda seed: None,
        "seed": lambda: None,
        "seed_all": lambda: None,
        "empty_cache": lambda: None,
        "memory_allocated": lambda device=None: 0,
        "max_memory_allocated": lambda device=None: 0,
        "memory_reserved": lambda device=None: 0,
        "max_memory_reserved": lambda device=None: 0,
        "reset_peak_memory_stats": lambda device=None: None,
        "reset_max_memory_allocated": lambda device=None: None,
        "mem_get_info": lambda device=None: (target.memory_bytes, target.memory_bytes),
    }


@contextlib.contextmanager
def cuda_facade(target: TargetDevice, on_sync: Callable[[str], None]) -> Iterator[None]:
    with mock.patch.multiple(torch.cuda, **_fakes(target, on_sync)):
        yield
