"""`kernelcast calibrate`: measure a GPU with microbenchmarks and write its device profile (needs a GPU)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from kernelcast.errors import KernelcastError
from kernelcast.outputs import write_text_atomic

from .profile import build_profile

__all__ = ["calibrate", "build_profile", "require_gpu"]


def require_gpu() -> None:
    import torch

    if not torch.cuda.is_available():
        raise KernelcastError("no CUDA GPU is visible here: calibrate, measure and validate run on a machine with "
                              "one (predict and capture do not need it)")


def _driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def calibrate(out: str, gpu: str, quick: bool = False, raw_out: str | None = None) -> dict:
    require_gpu()
    import torch

    from .host import host_costs
    from .microbench import run_all

    t0 = time.perf_counter()
    cases = run_all(quick=quick)
    host = host_costs()
    raw = {"meta": {"device": torch.cuda.get_device_name(), "driver": _driver(), "torch": torch.__version__,
                    "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                    "date": time.strftime("%Y-%m-%d"), "seconds": round(time.perf_counter() - t0, 1),
                    "command": f"kernelcast calibrate --gpu {gpu} --out {Path(out).name}" + (" --quick" if quick else "")},
           "cases": cases, "host": host}
    if raw_out:
        write_text_atomic(raw_out, json.dumps(raw))
    profile = build_profile(raw, gpu)
    write_text_atomic(out, json.dumps(profile, separators=(",", ":")) + "\n")
    return profile
