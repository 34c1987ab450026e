"""GPU specs as data: gpus.toml, with a datasheet source per entry."""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from kernelcast.errors import UnknownGPUError

# The GPU a prediction is for when none is named: the one kernelcast's shipped profile was measured on
# (profiles/h200.json), so its times are calibrated, not carried.
DEFAULT_GPU = "h200"

DATA_FILE = "gpus.toml"

# The peak each kind of math runs under, by dtype; tensor-core keys first where a matmul may use them.
TENSOR_CORE_KEY = {
    "float16": "fp16_tensor", "bfloat16": "bf16_tensor", "float8_e4m3fn": "fp8_tensor",
    "float8_e5m2": "fp8_tensor", "float64": "fp64_tensor", "tf32": "tf32_tensor",
}
VECTOR_KEY = {"float64": "fp64", "float32": "fp32"}
# FP32 add / multiply / fused multiply-add lanes per SM and clock, by compute capability (NVIDIA CUDA C++
# Programming Guide, "Arithmetic Instructions", throughput of native arithmetic instructions per clock cycle per
# multiprocessor): the datasheet's FP32 peak is SMs x lanes x 2 FLOPs x boost clock, so the clock follows from it.
FP32_LANES_PER_SM = {"7.0": 64, "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128, "9.0": 128,
                     "10.0": 128, "10.3": 128, "12.0": 128}


@dataclass(frozen=True)
class GPU:
    id: str
    name: str
    aliases: tuple[str, ...]
    vendor: str
    arch: str
    compute_capability: str
    sm_count: int
    memory_bytes: float
    mem_bw_bytes_per_s: float
    l2_bytes: float
    host_link: str
    host_link_bw_bytes_per_s: float
    peak_flops: dict[str, float]
    source: str
    notes: str = ""

    @property
    def capability(self) -> tuple[int, int]:
        """(major, minor) for NVIDIA parts; AMD parts have no CUDA capability and report (0, 0)."""
        if self.vendor != "nvidia":
            return (0, 0)
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    @property
    def cuda_arch(self) -> str:
        major, minor = self.capability
        return f"sm_{major}{minor}" if major else self.compute_capability

    @property
    def supports_bf16(self) -> bool:
        return "bf16_tensor" in self.peak_flops

    def matmul_peak(self, dtype: str, allow_tf32: bool) -> tuple[float, str]:
        """(FLOP/s, roof name) for a tensor-core-eligible op (matmul, conv, attention) in `dtype`."""
        key = TENSOR_CORE_KEY.get("tf32" if dtype == "float32" and allow_tf32 else dtype)
        if key in self.peak_flops:
            return self.peak_flops[key], key
        # bf16 without bf16 tensor cores (Turing, Volta: their tensor cores take FP16, INT8 and INT4 only, NVIDIA
        # Turing architecture whitepaper, 2018) runs on the CUDA cores, computing in fp32: vector_peak. On a T4,
        # bf16 GEMMs ran slower than fp32 ones (openxla/xla issue 12429, jax-ml/jax issue 21212).
        return self.vector_peak(dtype)

    def vector_peak(self, dtype: str) -> tuple[float, str]:
        """(FLOP/s, roof name) for elementwise and reduction math; CUDA kernels compute half types in fp32."""
        key = VECTOR_KEY.get(dtype, "fp32")
        return self.peak_flops.get(key, self.peak_flops["fp32"]), key

    @property
    def boost_clock_hz(self) -> float | None:
        """The clock the datasheet's FP32 peak assumes: peak / (SMs x FP32 lanes per SM x 2); None where the lanes
        per SM are not known (another vendor's GPU)."""
        lanes = FP32_LANES_PER_SM.get(self.compute_capability) if self.vendor == "nvidia" else None
        return self.peak_flops["fp32"] / (self.sm_count * lanes * 2) if lanes else None

    @property
    def sm_cycles_per_s(self) -> float | None:
        """SMs x clock: the rate at which the GPU issues work that is bound by neither DRAM nor the math units
        (a kernel of few thread blocks, a block's serial walk, index arithmetic)."""
        clock = self.boost_clock_hz
        return self.sm_count * clock if clock else None

    def ridge_flop_per_byte(self, key: str) -> float:
        return self.peak_flops[key] / self.mem_bw_bytes_per_s


@lru_cache(maxsize=1)
def all_gpus() -> dict[str, GPU]:
    raw = tomllib.loads(resources.files(__package__).joinpath(DATA_FILE).read_text())
    gpus = {}
    for gpu_id, entry in raw.items():
        fields = dict(entry)
        fields["aliases"] = tuple(fields.get("aliases", ()))
        fields["peak_flops"] = {k: float(v) for k, v in fields["peak_flops"].items()}
        gpus[gpu_id] = GPU(id=gpu_id, **fields)
    return gpus


def _normalise(name: str) -> str:
    return " ".join(name.strip().lower().replace("_", "-").split())


def find_by_name(name: str, entries: dict) -> tuple[object | None, str]:
    """(the entry whose id, name or alias is `name`, or None; "; closest: ..." naming the nearest spellings).
    Entries have .id, .name and .aliases."""
    wanted = _normalise(name)
    for entry in entries.values():
        if wanted in (entry.id, _normalise(entry.name), *entry.aliases):
            return entry, ""
    owner = {a: key for key, e in entries.items() for a in (key, *e.aliases)}
    close: list[str] = []  # the nearest spellings, one per entry (an alias of one already named adds nothing)
    for spelling in difflib.get_close_matches(wanted, sorted(owner), n=10, cutoff=0.4):
        if owner[spelling] not in (owner[c] for c in close):
            close.append(spelling)
    close = close[:3]
    return None, (f"; closest: {', '.join(close)}" if close else "")


def get_gpu(name: str) -> GPU:
    """Look a GPU up by id, alias or full name; an unknown name raises with the closest names."""
    gpu, hint = find_by_name(name, all_gpus())
    if gpu is None:
        raise UnknownGPUError(f"unknown GPU {name!r}{hint} (run `kernelcast devices` for the list)")
    return gpu
