"""Stage 3: predict each kernel's time and the step's wall time on one GPU."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcast.costs import Cost, CostContext, cost_of
from kernelcast.costs.launch_table import LaunchTable
from kernelcast.devices import GPU, get_gpu
from kernelcast.profiles import PROFILED_GPUS, launch_profile, load_profile
from kernelcast.records import Capture, OpRecord

from .host import HostModel
from .kernel_model import NO_KERNEL, KernelEstimate, KernelModel, RooflineModel
from .l2 import L2Tracker
from .timeline import Launch, Timeline, simulate, steady_state_step_us

__all__ = ["OpPrediction", "Prediction", "predict_capture", "HostModel", "RooflineModel"]


@dataclass(frozen=True)
class OpPrediction:
    index: int
    op: str
    phase: str
    module: str
    source: str
    flops: float
    bytes: float
    intensity: float
    kernels: int
    time_us: float  # device time of the op's kernels (0 for a view or an uncosted op)
    bound: str  # compute / memory / latency / none / uncosted
    roof: str
    host_us: float
    sync: str | None
    costed: bool


# What to do about a sync point, by what caused it.
SYNC_ADVICE = {
    "item": "keep the value on the GPU (e.g. accumulate the loss there) and read it every N steps",
    "tolist": "keep the values on the GPU; copy them to the host every N steps, or with non_blocking=True",
    "numpy": "keep the values on the GPU; copy them to the host every N steps, or with non_blocking=True",
    "print": "print every N steps, not every step",
    "cpu": "copy with .to('cpu', non_blocking=True) into pinned memory, or every N steps",
    "synchronize": "drop torch.cuda.synchronize() from the step; time with CUDA events instead",
    "nonzero": "avoid data-dependent shapes: torch.where, masked_fill or a multiply by the mask keep the shape",
    "boolean mask": "avoid data-dependent shapes: torch.where, masked_fill or a multiply by the mask keep the shape",
    "masked_select": "avoid data-dependent shapes: torch.where or masked_fill keep the shape",
}


@dataclass(frozen=True)
class SyncGroup:
    """The sync points of one kind issued from one source line."""

    source: str
    kind: str
    count: int  # per step
    stall_us: float  # CPU time spent waiting for the GPU queue to drain at these points, one step from idle
    saving_us: float  # predicted steady-state step time saved without them
    advice: str


@dataclass(frozen=True)
class Prediction:
    gpu: GPU
    kernel_model: str  # which model timed the kernels: "datasheet" or a calibrated profile
    host: str  # which CPU the host times are for
    ops: tuple[OpPrediction, ...]
    step_time_us: float  # steady-state wall time per step, back-to-back steps
    first_step_us: float  # one step from an idle GPU (what a step with a sync at its end takes)
    naive_host_timer_us: float  # what a host timer around one step reads without torch.cuda.synchronize()
    gpu_time_us: float  # sum of predicted kernel times
    host_time_us: float  # sum of host time per op
    kernels: int  # GPU work items launched per step
    uncosted: tuple[str, ...]  # op names with no formula; their time is unknown, not zero
    sync_points: int
    notes: tuple[str, ...] = ()
    timeline: Timeline | None = None  # one step from an idle CPU and GPU, span by span (for traces)
    sync_groups: tuple[SyncGroup, ...] = ()

    @property
    def bound(self) -> str:
        """"gpu" when the GPU is busy most of the step, else "host" (the GPU waits for launches or syncs)."""
        return "gpu" if self.gpu_time_us >= self.step_time_us * GPU_BOUND_BUSY_FRACTION else "host"

    @property
    def gpu_idle_fraction(self) -> float:
        return max(0.0, 1.0 - self.gpu_time_us / self.step_time_us) if self.step_time_us else 0.0

    # Conveniences for notebooks; the report stage does the formatting.
    def show(self, top: int = 15) -> None:
        from kernelcast.report import print_prediction

        print_prediction(self, top=top)

    def summary(self) -> str:
        from kernelcast.report import summary_line

        return summary_line(self)

    def to_json(self) -> dict:
        from kernelcast.report import prediction_json

        return prediction_json(self)

    def __repr__(self) -> str:
        return f"<Prediction {self.summary()}>"


# A step counts as GPU-bound when its kernels keep the GPU busy for at least this share of the step.
GPU_BOUND_BUSY_FRACTION = 0.8


def _op_prediction(op: OpRecord, cost: Cost | None, est: KernelEstimate, host_us: float) -> OpPrediction:
    costed = cost is not None
    cost = cost or Cost(kernels=0)
    return OpPrediction(
        index=op.index, op=op.op, phase=op.phase, module=op.module, source=op.source, flops=cost.flops,
        bytes=cost.bytes, intensity=cost.intensity, kernels=cost.kernels, time_us=est.time_us,
        bound=est.bound if costed else "uncosted", roof=est.roof, host_us=host_us, sync=op.sync, costed=costed,
    )


# multi_tensor_apply took its 32 KB kernel-argument tables in the CUDA 13 builds of torch 2.12 (2.11+cu130 was
# measured with the 4 KB tables; the 2.13 headers carry the 32 KB ones).
MULTI_TENSOR_LARGE_ARGS_FROM = (2, 12)


def _version(text: str) -> tuple[int, int]:
    parts = (text.split("+")[0].split(".") + ["0", "0"])[:2]
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts)  # type: ignore[return-value]


def cost_context(gpu: GPU, capture: Capture) -> CostContext:
    torch_version = capture.settings.torch_version or "2.13"
    profile = launch_profile(gpu.id)
    return CostContext(
        sm_count=gpu.sm_count,
        multi_tensor_large_args=gpu.vendor == "nvidia" and _version(torch_version) >= MULTI_TENSOR_LARGE_ARGS_FROM,
        launches=LaunchTable.from_profile(profile.data["launches"]) if profile and "launches" in profile.data else None,
    )


def kernel_model_for(gpu: GPU, capture: Capture, model: str = "calibrated") -> KernelModel:
    """The calibrated model from this GPU's profile, or from a profiled GPU carried over by datasheet ratios;
    the datasheet roofline when asked for, or when no profile exists."""
    if model == "calibrated":
        from .calibrated import CalibratedModel

        for gpu_id in (gpu.id, *PROFILED_GPUS):
            profile = load_profile(gpu_id)
            if profile is not None and "timings" in profile.data:
                return CalibratedModel(gpu, capture.settings, profile.data, get_gpu(profile.gpu))
    return RooflineModel(gpu, capture.settings)


def _sync_groups(preds: list[OpPrediction], launches: list[Launch], timeline: Timeline,
                 step_us: float) -> tuple[SyncGroup, ...]:
    groups: dict[tuple[str, str], list[int]] = {}
    for i, p in enumerate(preds):
        if p.sync:
            groups.setdefault((p.source, p.sync), []).append(i)
    out = []
    for (source, kind), indices in groups.items():
        without = [Launch(lc.host_us, lc.gpu_us, lc.stream) if i in indices else lc for i, lc in enumerate(launches)]
        out.append(SyncGroup(
            source=source, kind=kind, count=len(indices),
            stall_us=sum(timeline.spans[i].sync_wait_us for i in indices),
            saving_us=max(step_us - steady_state_step_us(without), 0.0),
            advice=SYNC_ADVICE.get(kind, "read it less often"),
        ))
    return tuple(sorted(out, key=lambda g: -g.saving_us))


def predict_capture(capture: Capture, gpu: str | GPU, kernel_model: KernelModel | None = None,
                    host_model: HostModel | None = None) -> Prediction:
    spec = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    model = kernel_model or kernel_model_for(spec, capture)
    host = host_model or HostModel()
    ctx = cost_context(spec, capture)
    preds: list[OpPrediction] = []
    launches: list[Launch] = []
    l2 = L2Tracker(spec.l2_bytes)
    for op in capture.ops:
        cost = cost_of(op, ctx)
        est = model.estimate(cost, l2.warm_fraction(op)) if cost is not None else NO_KERNEL
        l2.touch(op)
        host_us = host.op_us(op, cost)
        preds.append(_op_prediction(op, cost, est, host_us))
        launches.append(Launch(host_us, est.time_us, op.stream, sync=op.sync is not None,
                               sync_return_us=host.sync_return_us if op.sync else 0.0))
    timeline = simulate(launches)
    step_us = steady_state_step_us(launches)
    uncosted = tuple(sorted({p.op for p in preds if not p.costed}))
    return Prediction(
        gpu=spec, kernel_model=model.source, host=host.host, ops=tuple(preds),
        step_time_us=step_us, first_step_us=timeline.end_us,
        naive_host_timer_us=timeline.cpu_end_us, timeline=timeline,
        gpu_time_us=sum(p.time_us for p in preds), host_time_us=sum(p.host_us for p in preds),
        kernels=sum(p.kernels for p in preds), uncosted=uncosted,
        sync_points=sum(1 for p in preds if p.sync), notes=capture.notes,
        sync_groups=_sync_groups(preds, launches, timeline, step_us),
    )
