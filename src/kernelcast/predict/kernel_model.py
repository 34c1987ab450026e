"""Kernel time models: from an op's Cost to its time on one GPU.

The model is a swappable object. This file holds the datasheet roofline; the calibrated model (measured
efficiency curves per device) plugs in behind the same `estimate` call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kernelcast.costs import Cost
from kernelcast.costs.common import TRANSFER_KINDS
from kernelcast.devices import GPU
from kernelcast.records import CaptureSettings

# Smallest time any GPU work item takes, launch-to-completion, on recent NVIDIA data-centre parts. A datasheet
# gives no such number; ~2 us is the usual order for an empty kernel plus its memory round trip. The calibrated
# profile measures it per device.
DATASHEET_MIN_KERNEL_US = 2.0

# Host <-> device copies on the datasheet run at the GPU's own host link, one direction (gpus.toml
# host_link_bw_bytes_per_s: PCIe 3/4/5 x16 = 16/32/64 GB/s, PCI-SIG). Pageable memory is slower (staged through a
# pinned buffer); only a calibrated profile knows by how much.

BOUNDS = ("compute", "memory", "latency")


@dataclass(frozen=True)
class KernelEstimate:
    time_us: float
    bound: str  # compute / memory / latency / none (no device work)
    roof: str  # the peak it ran under, e.g. "bf16_tensor", "fp32"
    compute_us: float = 0.0
    memory_us: float = 0.0
    # Where the time came from (predict.shape_model.SOURCES) and its relative uncertainty (0.1 = +-10%).
    source: str = "datasheet"
    uncertainty: float = 0.0


NO_KERNEL = KernelEstimate(0.0, "none", "")


# The kinds of math that run on tensor cores where the GPU has them for the dtype (GPU.matmul_peak).
TENSOR_MATH = ("matmul", "conv", "attention")


def combined(estimates: list[KernelEstimate]) -> KernelEstimate:
    """One op's kernels estimated part by part (Cost.parts): times add up; the bound, roof and source are the
    longest part's; the uncertainty is the time-weighted mean of the parts'."""
    parts = [e for e in estimates if e.bound != "none"] or [NO_KERNEL]
    total = sum(e.time_us for e in parts)
    main = max(parts, key=lambda e: e.time_us)
    uncertainty = sum(e.uncertainty * e.time_us for e in parts) / total if total else main.uncertainty
    return KernelEstimate(total, main.bound, main.roof, sum(e.compute_us for e in parts),
                          sum(e.memory_us for e in parts), main.source, uncertainty)


class KernelModel(Protocol):
    source: str  # "datasheet" or "calibrated: <profile>"

    def estimate(self, cost: Cost, l2_warm: float = 0.0) -> KernelEstimate:
        """Time of the op's kernels; l2_warm is the share of its input bytes already in L2."""
        ...


def _allow_tf32(cost: Cost, settings: CaptureSettings) -> bool:
    if cost.math == "conv":
        return settings.cudnn_allow_tf32
    if cost.math == "matmul":
        return settings.matmul_allow_tf32
    return False


@dataclass(frozen=True)
class RooflineModel:
    """time = max(FLOPs / peak[dtype, tensor cores or not], bytes / bandwidth, kernels * floor)."""

    gpu: GPU
    settings: CaptureSettings
    min_kernel_us: float = DATASHEET_MIN_KERNEL_US
    source: str = "datasheet"

    def peak(self, cost: Cost) -> tuple[float, str]:
        if cost.math in TENSOR_MATH:
            return self.gpu.matmul_peak(cost.dtype, _allow_tf32(cost, self.settings))
        return self.gpu.vector_peak(cost.dtype)

    def estimate(self, cost: Cost, l2_warm: float = 0.0) -> KernelEstimate:
        """A datasheet has no L2 bandwidth: l2_warm is ignored here."""
        if cost.kernels == 0:
            return NO_KERNEL
        if cost.kind in TRANSFER_KINDS:
            link_us = cost.bytes / self.gpu.host_link_bw_bytes_per_s * 1e6
            return KernelEstimate(max(link_us, self.min_kernel_us), "host link", f"{self.gpu.host_link}_x16", 0.0,
                                  link_us)
        peak, roof = self.peak(cost)
        compute_us = cost.flops / peak * 1e6
        memory_us = cost.bytes / self.gpu.mem_bw_bytes_per_s * 1e6
        floor_us = cost.kernels * self.min_kernel_us
        time_us = max(compute_us, memory_us, floor_us)
        if time_us == floor_us and floor_us > max(compute_us, memory_us):
            bound = "latency"
        else:
            bound = "compute" if compute_us >= memory_us else "memory"
        return KernelEstimate(time_us, bound, roof, compute_us, memory_us)
