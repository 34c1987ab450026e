"""Device profiles measured on real GPUs (JSON, versioned): what the predictor uses in place of guesses.

A profile names the GPU, torch, CUDA and cuDNN it was measured with, and the command that measured it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from kernelcast.gc_pause import cyclic_gc_paused

PROFILE_FORMAT = 1
# GPUs with a measured profile shipped here, in the order a prediction for another GPU borrows from them.
PROFILED_GPUS = ("h200",)
# GPUs whose kernels (and so launch counts) follow a profiled one: same architecture and libraries.
LAUNCH_PROXY = {"h100-sxm": "h200", "h100-pcie": "h200"}


@dataclass(frozen=True)
class Profile:
    gpu: str
    device_name: str
    torch: str
    cuda: str
    cudnn: int
    date: str
    data: dict

    @property
    def label(self) -> str:
        return f"{self.gpu} profile ({self.device_name}, torch {self.torch}, {self.date})"


# Profiles a user gave (`--profile FILE`, use_profile), by GPU id: they take the place of a shipped one.
_USER_PROFILES: dict[str, Profile] = {}
PROFILE_FIELDS = ("gpu", "device_name", "torch", "cuda", "cudnn", "date", "timings")


def load_profile(gpu_id: str) -> Profile | None:
    """The profile of this GPU: one the user gave (use_profile), else the one shipped here, else None."""
    return _USER_PROFILES.get(gpu_id) or _shipped_profile(gpu_id)


def _from_data(data: dict) -> Profile:
    return Profile(gpu=data["gpu"], device_name=data["device_name"], torch=data["torch"], cuda=data["cuda"],
                   cudnn=data["cudnn"], date=data["date"], data=data)


@lru_cache(maxsize=None)
def _shipped_profile(gpu_id: str) -> Profile | None:
    path = resources.files(__package__).joinpath(f"{gpu_id}.json")
    if not path.is_file():
        return None
    with cyclic_gc_paused():  # ~400k small objects (gc_pause.py)
        data = json.loads(path.read_text())
    if data.get("format") != PROFILE_FORMAT:
        raise ValueError(f"profile {gpu_id}.json has format {data.get('format')}, expected {PROFILE_FORMAT}")
    return _from_data(data)


def use_profile(path: str) -> Profile:
    """Read a profile `kernelcast calibrate --out FILE` wrote and use it for its GPU from now on (in place of a
    shipped one; other GPUs keep theirs). Raises KernelcastError, one line, for a file that is missing, is not
    JSON, is not a profile of this format, or names a GPU the catalogue lacks."""
    from pathlib import Path

    from kernelcast.devices import get_gpu
    from kernelcast.errors import KernelcastError

    try:
        with cyclic_gc_paused():
            data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KernelcastError(f"cannot read profile {path}: {exc}") from None
    missing = [f for f in PROFILE_FIELDS if not isinstance(data, dict) or f not in data]
    if missing:
        raise KernelcastError(f"{path} is not a kernelcast profile (no {', '.join(missing)}; `kernelcast calibrate "
                              "--gpu GPU --out FILE` writes one)")
    if data.get("format") != PROFILE_FORMAT:
        raise KernelcastError(f"profile {path} has format {data.get('format')}, this kernelcast reads format "
                              f"{PROFILE_FORMAT}: calibrate again with this version")
    gpu = get_gpu(str(data["gpu"]))  # an unknown GPU raises with the closest names
    profile = _from_data({**data, "gpu": gpu.id})
    _USER_PROFILES[gpu.id] = profile
    return profile


def launch_profile(gpu_id: str) -> Profile | None:
    """The profile whose measured launch counts apply to this GPU, if any."""
    return load_profile(gpu_id) or load_profile(LAUNCH_PROXY.get(gpu_id, ""))


def profile_with(gpu_id: str, section: str) -> Profile | None:
    """This GPU's profile if it has the section, else the first profiled GPU's that has it (which then
    stands in for this one), else None."""
    for candidate in (gpu_id, *PROFILED_GPUS):
        profile = load_profile(candidate)
        if profile is not None and profile.data.get(section):
            return profile
    return None
