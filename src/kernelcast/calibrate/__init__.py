"""`kernelcast calibrate`: measure a GPU with microbenchmarks and write its device profile (needs a GPU)."""

from __future__ import annotations

import gzip
import json
import subprocess
import time
from pathlib import Path

from kernelcast import progress
from kernelcast.measure import require_gpu  # noqa: F401  (the one GPU check; calibrate's callers import it here)
from kernelcast.outputs import replaced_atomically, write_text_atomic

from .profile import build_profile

__all__ = ["calibrate", "build_profile", "require_gpu", "read_raw", "write_raw"]


def _driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def run_meta(command: str, started_s: float) -> dict:
    """The `meta` of a raw run on this machine's GPU: device, driver, library versions, date, the seconds since
    `started_s` (a time.perf_counter() reading) and the command that made it."""
    import torch

    return {"device": torch.cuda.get_device_name(), "driver": _driver(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"),
            "seconds": round(time.perf_counter() - started_s, 1), "command": command}


def write_raw(raw: dict, path: str) -> None:
    """Raw results as JSON, gzip-compressed when the path ends in .gz (a sweep's are tens of MB)."""
    text = json.dumps(raw, separators=(",", ":"))
    if not path.endswith(".gz"):
        write_text_atomic(path, text)
        return
    with replaced_atomically(path) as tmp, gzip.open(tmp, "wt") as f:
        f.write(text)


def read_raw(path: str) -> dict:
    if path.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            return json.load(f)
    return json.loads(Path(path).read_text())


def calibrate(out: str, gpu: str, quick: bool = False, raw_out: str | None = None, sweep: bool = False,
              sweep_budget_s: float | None = None, sections: list[str] | None = None) -> dict:
    """Microbenchmarks -> device profile. `sweep` adds the designed sweep of GEMM, convolution and attention
    shapes (calibrate/sweep.py; a few minutes on an H200), stopped after `sweep_budget_s` seconds if given."""
    require_gpu()
    from .host import host_costs
    from .microbench import run_all

    t0 = time.perf_counter()
    # Host costs first, before any torch.profiler session in this process: one leaves every later op's host cost
    # about 1.4x higher in the process (scripts/device/host_spread_probe.py --isolate profiler, H200 host: a 20-op chain
    # 0.160 -> 0.226 and 0.162 -> 0.233 ms; validation/host_spread/), and the microbenchmarks profile their kernels.
    progress.stage("host costs (dispatch and launch per kind of op)")
    host = host_costs() if sections is None else {}
    cases = run_all(quick=quick, sections=sections)
    sweep_results = None
    if sweep:
        from .sweep import run_sweep, sweep_cases

        sweep_results = run_sweep(sweep_cases(scale=0.1 if quick else 1.0), time_budget_s=sweep_budget_s)
    command = (f"kernelcast calibrate --gpu {gpu} --out {Path(out).name}" + (" --quick" if quick else "")
               + (" --sweep" if sweep_results is not None else "")
               + (" --sections " + ",".join(sections) if sections is not None else ""))
    raw = {"meta": run_meta(command, t0), "cases": cases, "host": host}
    if sweep_results is not None:
        raw["sweep"] = sweep_results
    if raw_out:
        write_raw(raw, raw_out)
    profile = build_profile(raw, gpu)
    write_text_atomic(out, json.dumps(profile, separators=(",", ":")) + "\n")
    return profile
