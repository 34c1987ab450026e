"""Build (once) and load the fake CUDA runtime that lets a torch without a GPU run autograd on fake CUDA tensors.

Two kinds of torch need it: a CPU-only build (no CUDA hooks or guard at all), and a CUDA build on a machine
where no GPU can be used (no driver, no device node, or CUDA_VISIBLE_DEVICES hiding every device), whose real
hooks fail the first backward. A CUDA build with a GPU keeps its own: the validation captures run there.

This module must not import torch: the hooks in `_fake_cuda.cpp` only take effect if they are registered
before `import torch` runs. `kernelcast/__init__.py` calls `preload()` first thing.

The shared object is compiled against the installed torch's headers with the system C++ compiler, and cached
per torch version and source hash, so the cost (a few seconds) is paid once per environment.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SOURCE_PATH = Path(__file__).with_name("_fake_cuda.cpp")
CACHE_ENV = "KERNELCAST_CACHE_DIR"
DISABLE_ENV = "KERNELCAST_NO_FAKE_CUDA"
# A CUDA build loads the shim only where no GPU is usable; "1" here loads it on a machine with a GPU too.
FORCE_ENV = "KERNELCAST_FAKE_CUDA"
# The CUDA driver's library; without it a CUDA build of torch sees no device.
CUDA_DRIVER_LIBRARY = "libcuda.so.1"
# Device nodes the NVIDIA driver makes, one per GPU (/dev/nvidia0, ...); none in a container given no GPU.
NVIDIA_DEVICE_GLOB = "nvidia[0-9]*"
COMPILE_TIMEOUT_S = 300


@dataclass(frozen=True)
class FakeCudaState:
    """What `preload()` did, so capture can explain a failure instead of crashing."""

    needed: bool  # torch has no GPU to use (a CPU-only build, or a CUDA build with no GPU), so it needs the shim
    loaded: bool  # the shim is loaded into this process
    before_torch: bool  # it was loaded before torch, so the CUDA hooks (needed by autograd) are active
    detail: str  # why not, when it is not loaded


_state: FakeCudaState | None = None


def _torch_dir() -> Path | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _torch_build(torch_dir: Path) -> tuple[str, bool]:
    """(version, is_cpu_only) read from torch/version.py as text, since importing torch is what we must avoid."""
    text = (torch_dir / "version.py").read_text()
    values: dict[str, str] = {}
    for line in text.splitlines():
        for key in ("__version__", "cuda", "hip"):
            if line.startswith(f"{key} ") or line.startswith(f"{key}:") or line.startswith(f"{key}="):
                values[key] = line.split("=", 1)[1].strip().strip("'\"")
    version = values.get("__version__", "unknown")
    cpu_only = values.get("cuda", "None") == "None" and values.get("hip", "None") == "None"
    return version, cpu_only


def gpu_usable() -> bool:
    """Whether a CUDA build of torch could use a GPU here, told without initialising CUDA (a cuInit in this
    process would be inherited, broken, by forked workers): the driver library loads, the driver made a
    device node, and CUDA_VISIBLE_DEVICES does not hide every device."""
    import ctypes

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    if not any(Path("/dev").glob(NVIDIA_DEVICE_GLOB)):
        return False
    try:
        ctypes.CDLL(CUDA_DRIVER_LIBRARY)
    except OSError:
        return False
    return True


def installed_torch() -> tuple[str, bool] | None:
    """(version, is_cpu_only) of the torch this Python would import, read without importing it; None if none."""
    torch_dir = _torch_dir()
    return _torch_build(torch_dir) if torch_dir is not None else None


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelcast"


def _artifact_path(torch_version: str) -> Path:
    digest = hashlib.sha256(SOURCE_PATH.read_bytes()).hexdigest()[:12]
    tag = f"{torch_version}-py{sys.version_info.major}{sys.version_info.minor}-{digest}"
    return cache_dir() / f"fake_cuda-{tag}.so"


def _compile_flags() -> dict:
    """Include/lib paths and ABI of the installed torch, asked of a child Python (it may import torch)."""
    probe = (
        "import json, torch, torch.utils.cpp_extension as c;"
        "print(json.dumps({'inc': c.include_paths(), 'lib': c.library_paths(),"
        " 'abi': int(torch._C._GLIBCXX_USE_CXX11_ABI)}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=COMPILE_TIMEOUT_S,
        env={**os.environ, DISABLE_ENV: "1"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def build(torch_version: str) -> Path:
    """Compile `_fake_cuda.cpp` into the cache (atomically) unless it is there already."""
    target = _artifact_path(torch_version)
    if target.exists():
        return target
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        raise RuntimeError("no C++ compiler found (install g++, or set CXX)")
    # The first import would otherwise sit silent for seconds; later ones find the cached file and say nothing.
    print(f"kernelcast: compiling the fake-CUDA helper for torch {torch_version} (once, ~5 s)...",
          file=sys.stderr, flush=True)
    flags = _compile_flags()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        tmp_so = Path(tmp) / target.name
        cmd = [compiler, "-shared", "-fPIC", "-O1", "-std=c++20", "-w"]
        cmd += [f"-D_GLIBCXX_USE_CXX11_ABI={flags['abi']}"]
        cmd += [f"-I{p}" for p in flags["inc"]]
        cmd += [str(SOURCE_PATH), "-o", str(tmp_so)]
        for lib in flags["lib"]:
            cmd += [f"-L{lib}", f"-Wl,-rpath,{lib}"]
        cmd += ["-lc10", "-ltorch_cpu"]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if result.returncode != 0:
            raise RuntimeError(f"compiling the fake CUDA shim failed:\n{result.stderr[-2000:]}")
        os.replace(tmp_so, target)  # atomic: parallel builders never see half a file
    return target


def preload() -> FakeCudaState:
    """Load the shim if this torch needs it. Never raises: the state says what happened."""
    global _state
    if _state is not None:
        return _state
    import ctypes

    torch_dir = _torch_dir()
    if os.environ.get(DISABLE_ENV) or torch_dir is None:
        _state = FakeCudaState(False, False, False, "disabled" if torch_dir else "torch is not installed")
        return _state
    version, cpu_only = _torch_build(torch_dir)
    if not cpu_only and gpu_usable() and not os.environ.get(FORCE_ENV):
        # A CUDA build with a GPU has a real CUDA guard and hooks; FakeTensorMode keeps every tensor fake.
        _state = FakeCudaState(False, False, False, "torch is a CUDA build and a GPU is usable")
        return _state
    before_torch = "torch" not in sys.modules
    try:
        if not cpu_only:
            # The CUDA build's own hooks and guard register when libtorch_cuda.so loads; loading it first
            # lets the shim's hooks take the key above them and its guard be stored last (_fake_cuda.cpp).
            ctypes.CDLL(str(torch_dir / "lib" / "libtorch_cuda.so"), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(build(version)), mode=ctypes.RTLD_GLOBAL)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        _state = FakeCudaState(True, False, False, str(exc).strip().splitlines()[0])
        return _state
    _state = FakeCudaState(True, True, before_torch, "" if before_torch else "torch was imported first")
    return _state


def state() -> FakeCudaState:
    return preload()
