"""Stage 3: predict each kernel's time and the step's wall time on one GPU."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kernelcast.costs import Cost, CostContext, cost_of
from kernelcast.costs.collectives import COLLECTIVE_KIND, collective_of
from kernelcast.costs.launch_table import LaunchTable
from kernelcast.costs.matmul import kernel_family
from kernelcast.devices import GPU, get_gpu
from kernelcast.devices.achieved import rate_class
from kernelcast.gc_pause import cyclic_gc_paused
from kernelcast.devices.interconnects import Interconnect, get_interconnect, natural_interconnect
from kernelcast.capture.cpu_speed import BUSY_WAIT_SHARE, LOADED_PYTHON_INFLATION, CpuBench
from kernelcast.profiles import launch_profile, profile_with
from kernelcast.records.common import time_text
from kernelcast.records import (COMM_STREAM, NEW_CUDNN_GRAPH_TAG, RECORD_EVENT_OP, TORCH_SAVE_OP, TORCH_SAVE_SYNC,
                                WAIT_EVENT_OP, Capture, OpRecord, PredictedOp, PredictionRecord, SyncPointGroup, host_phase, root_indices)

from .host import HostModel, library_extras_us
from .kernel_model import NO_KERNEL, TENSOR_MATH, KernelEstimate, KernelModel, RooflineModel
from .comm import call_host_us, collective_estimate
from .parallel_host import ParallelHost, load_parallel_costs, parallel_host
from .l2 import warm_shares
from .hazards import find_hazards, with_wait
from .memory import MemoryPrediction, predict_memory
from .overlap import CommSummary, comm_summary, with_stream_events
from .timeline import Launch, Timeline, simulate, steady_state_step_us, with_host

__all__ = ["PredictedOp", "OpPrediction", "Prediction", "predict_capture", "step_verdict", "HostModel", "RooflineModel"]


# The predict stage's per-op and per-sync-point results are the records the report stage reads
# (records.PredictedOp, records.SyncPointGroup); the old names stay for code written against them.
OpPrediction = PredictedOp
SyncGroup = SyncPointGroup


# What to do about a sync point, by what caused it.
SYNC_ADVICE = {
    "item": "keep the value on the GPU (e.g. accumulate the loss there) and read it every N steps",
    "tolist": "keep the values on the GPU; copy them to the host every N steps, or with non_blocking=True",
    "numpy": "keep the values on the GPU; copy them to the host every N steps, or with non_blocking=True",
    "print": "print every N steps, not every step",
    "torch.save": "save a checkpoint every N steps, not every step; or copy the state into pinned host buffers with "
                  "non_blocking=True and save from them on another thread",
    "cpu": "copy with .to('cpu', non_blocking=True) into pinned memory, or every N steps",
    "synchronize": "drop torch.cuda.synchronize() from the step; time with CUDA events instead",
    "nonzero": "avoid data-dependent shapes: torch.where, masked_fill or a multiply by the mask keep the shape",
    "boolean mask": "avoid data-dependent shapes: torch.where, masked_fill or a multiply by the mask keep the shape",
    "masked_select": "avoid data-dependent shapes: torch.where or masked_fill keep the shape",
    "h2d pageable": "pin the host tensor (DataLoader(pin_memory=True) or .pin_memory()) and copy it with "
                    "non_blocking=True, ideally on a side stream ahead of its use",
    "h2d blocking": "copy with non_blocking=True: the source is already pinned",
    "ctc lengths": "pass ctc_loss its input and target lengths as Python lists or CPU tensors: lengths on the GPU "
                   "are copied back to the host first",
    "linalg info": "torch.linalg.solve/inv/cholesky/lu_factor read the solver's status back after each call: "
                   "call the *_ex variant and check its info every N steps (eigh, svd, eig and lstsq always "
                   "check: batch the matrices into one call)",
    "histc range": "pass min and max to torch.histc: the default (0, 0) reads the input's range back",
    "nanmedian count": "use torch.median, or nanmedian along a dim: nanmedian over the whole tensor reads its NaN "
                       "count back",
    "multinomial check": "upgrade torch (torch 2.11 and later check multinomial's input on the GPU), sample "
                         "with replacement, or draw the samples on the GPU (torch.rand and a cumsum/searchsorted): "
                         "multinomial without replacement validates its input on the host here",
    "embedding renorm": "renormalise the embedding table once every N steps (torch.no_grad(): "
                        "weight.renorm_(2, 0, max_norm)) instead of nn.Embedding(max_norm=...), which counts the "
                        "unique indices on the host at every lookup",
    "matrix_exp norm": "batch the matrices into one call: matrix_exp reads their norms back to pick its degree",
    "padding mask check": "build the encoder with mask_check=False when every src_key_padding_mask is left-aligned "
                          "(padding only at the end), or enable_nested_tensor=False: either skips the check",
    "grouped_mm offsets": "use bf16 operands (the CUTLASS grouped GEMM on sm_90/sm_100 keeps the offsets on "
                          "the GPU); other cases copy them to the host",
}


@dataclass(frozen=True)
class Prediction:
    gpu: GPU
    kernel_model: str  # which model timed the kernels: "datasheet" or a calibrated profile
    host: str  # which CPU the host times are for
    ops: tuple[PredictedOp, ...]
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
    sync_groups: tuple[SyncPointGroup, ...] = ()
    comm: CommSummary | None = None  # a step with collectives: compute, communication, and how much is exposed
    parallel_host: ParallelHost | None = None  # what FSDP2's / DDP's hooks add to the host time (fitted costs)
    # Host side: the model's own Python (of host_time_us), ops whose kernels are shorter than their launch,
    # and the step time on a host whose CPU work is each factor slower (>1) or faster (<1) than this one's.
    python_time_us: float = 0.0
    launch_bound_ops: int = 0
    step_time_by_host_speed: tuple[tuple[float, float], ...] = ()
    compiled: bool = False  # the step runs torch.compile'd code (Capture.compiled)
    compiled_as: str = ""  # "inductor": Inductor's kernels; "eager": op by op, where Inductor could not run
    workload: str = ""  # what was captured (Capture.workload)
    memory: MemoryPrediction | None = None  # device memory: peak, resident, reserved, the OOM verdict (memory.py)
    hazards: tuple = ()  # stream-ordering hazards (records.Hazard, hazards.py)
    # Where the host side is uncertain: the model Python (python_time_us) and the step over the range of the
    # capture-to-target carrying (the three CPU benchmarks' ratios) and of the capture's own readings (the
    # fastest and the median over its timed steps); (0, 0): not computed. The CPUs the host times came from
    # and are for, and over how many recorded steps the model Python was read.
    python_time_range_us: tuple[float, float] = (0.0, 0.0)
    step_time_range_us: tuple[float, float] = (0.0, 0.0)
    # The step with every CPU cost at the slow and fast ends of this host's own calibration runs (host.py
    # run_speed_range, the factors beside it); (0, 0): not computed.
    step_time_run_range_us: tuple[float, float] = (0.0, 0.0)
    host_run_speed_range: tuple[float, float] = (1.0, 1.0)
    # The step's range: both host uncertainties at once (the model Python's low end with the host's fastest run
    # speed, its high end with the slowest); what the summary prints. (0, 0): not computed.
    step_range_us: tuple[float, float] = (0.0, 0.0)
    capture_cpu: str = ""
    target_cpu: str = ""
    python_timing_steps: int = 1
    # The model's Python priced by counted lines (HostModel.price_lines): the lines and µs per line; 0: timed
    python_lines: int = 0
    python_line_us: float = 0.0

    @property
    def bound(self) -> str:
        """"gpu", "host" or "mixed": see step_verdict."""
        return step_verdict(self.gpu_time_us, self.step_time_us)

    @property
    def gpu_idle_fraction(self) -> float:
        return max(0.0, 1.0 - self.gpu_time_us / self.step_time_us) if self.step_time_us else 0.0

    def record(self) -> PredictionRecord:
        """The prediction as data (records.PredictionRecord): what the report stage and `--json` read."""
        from .serialize import prediction_record

        return prediction_record(self)

    # Conveniences for notebooks. The report stage formats the record; it never imports this module.
    def show(self, top: int = 15) -> None:
        from kernelcast.report import print_prediction

        print_prediction(self.record(), top=top)

    def summary(self) -> str:
        from kernelcast.report import summary_line

        return summary_line(self.record())

    def to_json(self) -> dict:
        return self.record().to_json()

    def plot_roofline(self, measured=None):
        """The roofline as a matplotlib Figure (report/roofline.py); `measured`: a Measurement, a Validation, their
        JSON, or op index -> measured µs, for measured points beside the predicted ones."""
        from kernelcast.report.roofline import plot_roofline

        return plot_roofline(self.record(), measured=measured)

    def plot_timeline(self):
        """The simulated step as a matplotlib Figure: CPU lane, a lane per GPU stream (report/timeline_plot.py)."""
        from kernelcast.report.timeline_plot import plot_timeline

        return plot_timeline(self.record())

    def _repr_html_(self) -> str:
        """Jupyter shows a prediction as its summary, figures and top ops."""
        from kernelcast.report.html import notebook_html

        return notebook_html(self.record())

    def __repr__(self) -> str:
        return f"<Prediction {self.summary()}>"


# A step counts as GPU-bound when its kernels keep the GPU busy for at least this share of the step.
GPU_BOUND_BUSY_FRACTION = 0.85
# ... and host-bound when they keep it busy for at most this share (it waits for launches or syncs). In
# between, both sides are near the step: a faster CPU and faster kernels would each shorten it. The same
# thresholds classify measured steps in the validation (scripts/eval/report_validation.py).
HOST_BOUND_BUSY_FRACTION = 0.6


def step_verdict(gpu_time_us: float, step_time_us: float) -> str:
    """"gpu" when kernels fill the step, "host" when the GPU mostly waits for the CPU, else "mixed"."""
    busy = gpu_time_us / step_time_us if step_time_us else 1.0
    if busy >= GPU_BOUND_BUSY_FRACTION:
        return "gpu"
    return "host" if busy <= HOST_BOUND_BUSY_FRACTION else "mixed"


# How much a different CPU would change the step: its CPU work this many times as long. Host-side times on
# the workplace's H200 machines swung about 2x between runs (docs/validation.md), so the report spans that.
HOST_SPEED_FACTORS = (0.5, 2.0)


def _op_prediction(op: OpRecord, cost: Cost | None, est: KernelEstimate, host_us: float, python_us: float = 0.0,
                   launch_bound: bool = False) -> PredictedOp:
    costed = cost is not None
    cost = cost or Cost(kernels=0)
    return PredictedOp(
        index=op.index, op=op.op, phase=op.phase, module=op.module, source=op.source, flops=cost.flops,
        bytes=cost.bytes, intensity=cost.intensity, kernels=cost.kernels, time_us=est.time_us,
        bound=est.bound if costed else "uncosted", roof=est.roof, host_us=host_us, sync=op.sync,
        python_us=python_us, launch_bound=launch_bound,
        time_source=est.source if costed and cost.kernels else "", time_uncertainty=est.uncertainty if costed else 0.0,
        parent=op.parent, rate_class=rate_class(kernel_family(cost), est.roof) if costed else "",
    )


# Events the user's code records (torch.cuda.Event, wait_stream) get ids above any the data-flow ordering of
# NCCL's stream gives (op indices), so the two never mix.
USER_EVENT_BASE = 1 << 40


def _stream_marker(op: OpRecord) -> dict:
    if op.op == RECORD_EVENT_OP:
        return {"record_event": USER_EVENT_BASE + op.args["event"]}
    if op.op == WAIT_EVENT_OP:
        return {"wait_event": USER_EVENT_BASE + op.args["event"]}
    return {}


def capture_bench(capture: Capture) -> CpuBench:
    """The capture machine's CPU and benchmarks, as the capture recorded them."""
    s = capture.settings
    return CpuBench(python_us=s.python_bench_us, dispatch_us=s.dispatch_bench_us, module_us=s.module_bench_us,
                    cpu=s.cpu)


def host_model_for(gpu: GPU, capture: Capture, target: CpuBench | None = None) -> HostModel:
    """Host costs from the profile of this GPU's machine, else of a profiled one (its CPU stands in for this
    machine's, and the label says so); the capture's Python time scaled by the two CPUs' Python speed.
    target: the target host's benchmarks when it was measured apart from the calibration."""
    profile = profile_with(gpu.id, "host")
    if profile is None:
        return HostModel()
    label = f"the CPU of the {profile.device_name} machine that calibrated ({profile.date})"
    if profile.gpu != gpu.id:
        label += f", standing in for the {gpu.name}'s host: unvalidated"
    if target is not None:
        label += ", at the speed its benchmarks were measured at apart from the calibration"
    model = HostModel.from_profile(profile.data["host"], label, capture_bench(capture), target)
    if capture.settings.python_lines_counted and model.python_line_us > 0:
        model = dataclasses.replace(model, price_lines=True)
    return model


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
        capability=gpu.capability,
        multi_tensor_large_args=gpu.vendor == "nvidia" and _version(torch_version) >= MULTI_TENSOR_LARGE_ARGS_FROM,
        launches=LaunchTable.from_profile(profile.data["launches"]) if profile and "launches" in profile.data else None,
    )


def kernel_model_label(gpu: GPU) -> str:
    """How kernel_model_for times this GPU's kernels, in a few words (for `kernelcast devices`): "calibrated"
    from its own profile; "scaled from <GPU>" from another's, with this GPU's achieved rates fitted to KernelBench
    timings and their held-out error, or its architecture's (devices/achieved.py), or "(unvalidated)" with the
    datasheet ratios alone; or "datasheet" (roofline)."""
    from kernelcast.devices.achieved import achieved_rates

    profile = profile_with(gpu.id, "timings")
    if profile is None:
        return "datasheet"
    if profile.gpu == gpu.id:
        return "calibrated"
    rates = achieved_rates(gpu.id, gpu.compute_capability)
    scaled = f"scaled from {profile.gpu.upper()}"
    held = f", held-out error {rates.held_out_error:.0%}" if rates.held_out_error is not None else ""
    if rates.source == "fitted":
        return f"{scaled}, rates fitted to {rates.timings or 'KernelBench timings'}{held}"
    if rates.source == "prior":
        return f"{scaled}, its architecture's fitted rates{held}"
    return f"{scaled} (unvalidated)"


# The capture follows CUDA's dispatch: kernel counts, launch paths and the cuBLAS / cuDNN / attention backend
# choices are NVIDIA's. Another vendor's GPU runs its own libraries' kernels (ROCm's for AMD), which kernelcast
# does not model, so its predictions carry this warning.
OTHER_VENDOR_NOTE = ("{name} is not an NVIDIA GPU: its step is predicted with CUDA's kernels and launch counts "
                     "(its own libraries launch others) and NVIDIA-measured efficiencies scaled by datasheet "
                     "ratios; unvalidated")


# cuBLAS and cuDNN pick their kernels per architecture: a call may run a split-K GEMM and its reduction, or a
# convolution with its layout transposes. Those counts are measured per shape where a profile's launch tables
# apply (profiles.launch_profile: the H200, and the H100 through it); elsewhere each library call is one kernel.
LIBRARY_LAUNCHES_NOTE = ("kernel counts on {name}: one kernel per cuBLAS / cuDNN call (which calls the libraries "
                         "split into several kernels, split-K GEMMs and their reductions, cuDNN's layout "
                         "transposes, is measured only where a profile's launch tables apply: {profiled}); the "
                         "same step can count more kernels there")
LIBRARY_KINDS = {"gemm", "conv"}  # Cost.kind of a cuBLAS / cuDNN call


def launch_count_notes(gpu: GPU, ctx: CostContext, costs: list[Cost | None]) -> tuple[str, ...]:
    """Said where this GPU has no measured launch counts and the step calls cuBLAS or cuDNN."""
    if ctx.launches is not None or not any(c is not None and c.kind in LIBRARY_KINDS for c in costs):
        return ()
    from kernelcast.profiles import LAUNCH_PROXY, PROFILED_GPUS

    profiled = ", ".join(get_gpu(g).name for g in (*PROFILED_GPUS, *LAUNCH_PROXY))
    return (LIBRARY_LAUNCHES_NOTE.format(name=gpu.name, profiled=profiled),)


# A GPU whose published machine ran its longer calls in a slow state of its own (calibrate/gpu_rates.py
# slow_state): its rates are the card's, fitted on the other calls, so a user measuring on a machine like that one
# is told why a long step can come out several times slower there.
SLOW_STATE_NOTE = ("{name}: the published timings its rates are fitted to ran calls of {from_ms:g} ms or more "
                   "about {factor:g}x slower than its shorter ones (a state of that machine: clocks or cooling); "
                   "this prediction is for the card at its normal rate")


def gpu_notes(gpu: GPU) -> tuple[str, ...]:
    """What a prediction for this GPU must say about itself, whatever the step."""
    from kernelcast.devices.achieved import published_slow_state

    if gpu.vendor != "nvidia":
        return (OTHER_VENDOR_NOTE.format(name=gpu.name),)
    state = published_slow_state(gpu.id)
    return (SLOW_STATE_NOTE.format(name=gpu.name, **state),) if state else ()


BF16_WITHOUT_TENSOR_CORES_NOTE = (
    "{name} has no bf16 tensor cores: {time} of this step's bf16 matrix math ({share:.0%} of its GPU time) "
    "runs on the CUDA cores; fp16 (torch.autocast(dtype=torch.float16), with a GradScaler in training) would run "
    "it on the fp16 tensor cores")


# fp32 matrix products where TF32 tensor cores exist: PyTorch leaves TF32 off for matmuls and on for cuDNN's
# convolutions by default (torch.backends.cuda.matmul.allow_tf32 = False, torch.backends.cudnn.allow_tf32 = True),
# so an fp32 model's GEMMs run on the CUDA cores beside convolutions on the tensor cores, which a user rarely
# knows. Said where the FP32-roof GEMMs are at least this share of the GPU time.
FP32_MATMUL_NOTE_SHARE = 0.05
FP32_MATMUL_NOTE = (
    "{time} of this step's fp32 matrix products ({share:.0%} of its GPU time) run on the CUDA cores: "
    "PyTorch leaves TF32 off for matmuls by default; torch.set_float32_matmul_precision('high') puts them on "
    "{name}'s TF32 tensor cores (10 mantissa bits for the products), bf16 autocast on its bf16 ones")
CUDNN_TF32_NOTE = ("fp32 {what} run on TF32 tensor cores here, as PyTorch sets cuDNN by default "
                   "(torch.backends.cudnn.allow_tf32 = True): they are priced under the TF32 roof")
CUDNN_KINDS = {"conv": "convolutions", "cudnn_rnn": "cuDNN RNNs"}  # Cost.kind: cuDNN's work under its TF32 switch
FP32_GEMM_CLASS = rate_class("matmul", "fp32")
NEW_CUDNN_GRAPH_NOTE = (
    "cuDNN attention runs at a shape no earlier step ran ({calls} call{s} a step, first at {where}): PyTorch builds "
    "a cuDNN graph for each new shape and caches it, priced {time} of host a step (a published 55-70 ms a build, "
    "not yet measured here). A step whose attention shapes change every call (a KV cache that grows by a token "
    "a step) pays it every step; a static cache or padding to fixed lengths keeps the shapes, and another SDPA "
    "backend (torch.nn.attention.sdpa_kernel) builds nothing")


def new_cudnn_graph_notes(ops, preds: list[PredictedOp]) -> tuple[str, ...]:
    """NEW_CUDNN_GRAPH_NOTE where the step runs cuDNN attention at shapes no earlier step ran (the capture's
    NEW_CUDNN_GRAPH_TAG; predict/host.py CUDNN_GRAPH_BUILD_US prices each)."""
    new = [(op, p) for op, p in zip(ops, preds) if NEW_CUDNN_GRAPH_TAG in op.tags]
    if not new:
        return ()
    build_us = sum(p.host_us for _, p in new)
    return (NEW_CUDNN_GRAPH_NOTE.format(calls=len(new), s="" if len(new) == 1 else "s",
                                        where=new[0][0].source or "set-up", time=time_text(build_us)),)


def fp32_gemm(p: PredictedOp) -> bool:
    """Whether the op is a matrix product run on the CUDA cores in fp32 (its kernels' rate class: the cost's math
    "matmul" under the fp32 roof, TF32 off for matmuls): the one test the precision note and advise's TF32 trial
    share."""
    return p.rate_class == FP32_GEMM_CLASS


def precision_notes(gpu: GPU, preds: list[PredictedOp], costs: list[Cost | None]) -> tuple[str, ...]:
    """What the step's precision costs on this GPU that another precision would not: bf16 matrix math on a GPU
    with fp16 tensor cores and no bf16 ones (Turing, Volta: devices.GPU.matmul_peak); fp32 GEMMs on the CUDA cores
    of a GPU with TF32 tensor cores; fp32 convolutions on the TF32 ones (PyTorch's defaults, said so)."""
    total_us = sum(p.time_us for p in preds)
    if total_us <= 0:
        return ()
    notes = []
    pairs = [(p, c) for p, c in zip(preds, costs) if c is not None and c.math in TENSOR_MATH]
    if "bf16_tensor" not in gpu.peak_flops and "fp16_tensor" in gpu.peak_flops:
        slow_us = sum(p.time_us for p, c in pairs if c.dtype == "bfloat16" and not p.roof.endswith("_tensor"))
        if slow_us > 0:
            notes.append(BF16_WITHOUT_TENSOR_CORES_NOTE.format(name=gpu.name, time=time_text(slow_us),
                                                               share=slow_us / total_us))
    if "tf32_tensor" in gpu.peak_flops:
        fp32_gemm_us = sum(p.time_us for p in preds if fp32_gemm(p))
        if fp32_gemm_us >= FP32_MATMUL_NOTE_SHARE * total_us:
            notes.append(FP32_MATMUL_NOTE.format(name=gpu.name, time=time_text(fp32_gemm_us),
                                                 share=fp32_gemm_us / total_us))
        cudnn = [CUDNN_KINDS[k] for k in CUDNN_KINDS
                 if any(c.kind == k and p.roof == "tf32_tensor" for p, c in zip(preds, costs) if c is not None)]
        if cudnn:
            notes.append(CUDNN_TF32_NOTE.format(what=" and ".join(cudnn)))
    return tuple(notes)


def kernel_model_for(gpu: GPU, capture: Capture, model: str = "calibrated") -> KernelModel:
    """The calibrated model from this GPU's profile, or from a profiled GPU carried over by datasheet ratios;
    the datasheet roofline when asked for, or when no profile exists."""
    if model == "calibrated":
        from .calibrated import CalibratedModel

        profile = profile_with(gpu.id, "timings")
        if profile is not None:
            return CalibratedModel(gpu, capture.settings, profile.data, get_gpu(profile.gpu))
    return RooflineModel(gpu, capture.settings)


# The advice for a pageable copy is to pin the host memory: the DMA engine then reads it directly, at the
# pinned rate, with no staging copy on the CPU. The saving prices that, not just the host's wait.
PINNED_KIND = {"h2d_pageable": "h2d_pinned", "d2h_pageable": "d2h_pinned", "h2d_pageable_into": "h2d_pinned",
               "d2h_pageable_into": "d2h_pinned"}


def _fixed(launch: Launch, cost: Cost | None, model: KernelModel) -> Launch:
    """The launch once its sync point's advice is followed: no host wait, and a pageable copy made pinned."""
    fixed = dataclasses.replace(launch, sync=False, sync_return_us=0.0)
    if cost is not None and cost.kind in PINNED_KIND:
        fixed = dataclasses.replace(fixed, gpu_us=model.estimate(dataclasses.replace(
            cost, kind=PINNED_KIND[cost.kind])).time_us)
    return fixed


def _sync_groups(preds: list[PredictedOp], costs: list[Cost | None], launches: list[Launch], timeline: Timeline,
                 step_us: float, model: KernelModel) -> tuple[SyncPointGroup, ...]:
    groups: dict[tuple[str, str], list[int]] = {}
    for i, p in enumerate(preds):
        if p.sync:
            groups.setdefault((p.source, p.sync), []).append(i)
    out = []
    for (source, kind), indices in groups.items():
        without = [_fixed(lc, costs[i], model) if i in indices else lc for i, lc in enumerate(launches)]
        if kind == TORCH_SAVE_SYNC:  # its fix (fewer saves, or saving pinned copies on another thread) takes the
            # serialization off the step too: the host time of the save's marker past the Python before it
            without = [with_host(lc, preds[i].python_us) if preds[i].op == TORCH_SAVE_OP and preds[i].source == source
                       else lc for i, lc in enumerate(without)]
        out.append(SyncPointGroup(
            source=source, kind=kind, count=len(indices),
            stall_us=sum(timeline.spans[i].sync_wait_us for i in indices),
            saving_us=max(step_us - steady_state_step_us(without), 0.0),
            advice=SYNC_ADVICE.get(kind, "read it less often"),
        ))
    return tuple(sorted(out, key=lambda g: -g.saving_us))


def parallel_host_for(gpu: GPU, capture: Capture) -> ParallelHost | None:
    """FSDP2's and DDP's hook costs (predict/parallel_host.py) from the fitted file of the host that calibrated
    this GPU's host costs; None for a single-GPU step or where no fitted file ships."""
    if capture.world_size <= 1:
        return None
    profile = profile_with(gpu.id, "host")
    costs = load_parallel_costs(profile.gpu if profile is not None else gpu.id)
    if costs is None:
        return None
    return parallel_host(capture.ops, costs, _is_all_reduce)


def _is_all_reduce(op: OpRecord) -> bool:
    found = collective_of(op)
    return found is not None and found[0] == "all_reduce"


def interconnect_for(gpu: GPU, capture: Capture, name: str | Interconnect | None = None) -> Interconnect | None:
    """The interconnect asked for, else the GPU's natural one when the step has collectives; else None."""
    if isinstance(name, Interconnect):
        return name
    if name is not None:
        return get_interconnect(name)
    if any(collective_of(op) is not None for op in capture.ops):
        return natural_interconnect(gpu)
    return None


def launched_for(ops, costs: list[Cost | None]) -> dict[int, Cost]:
    """What each decomposed op launches through the ops it calls (its descendants' kernels), by its index: its
    host side launches them, as one op launching that many kernels (a cuBLAS call among them costs more)."""
    roots = root_indices(ops)
    kernels: dict[int, int] = {}
    gemm: set[int] = set()
    for op, cost, root in zip(ops, costs, roots):
        if op.parent >= 0 and cost is not None:
            kernels[root] = kernels.get(root, 0) + cost.kernels
            if cost.kind == "gemm" and cost.kernels:
                gemm.add(root)
    return {root: Cost(kernels=n, kind="gemm" if root in gemm else "") for root, n in kernels.items()}


def python_range_factors(capture: Capture, host: HostModel) -> tuple[float, float]:
    """What the captured model Python is multiplied by at the low and high end of its range. Priced by its
    counted lines: the per-line fit's held-out spread (HostModel.python_line_range). Timed: the lowest
    benchmark ratio with each op's fastest reading (lowered by LOADED_PYTHON_INFLATION when the capture
    machine was busy), the highest with its median reading."""
    if host.price_lines:
        return host.python_line_range
    fastest = sum(op.python_us for op in capture.ops)
    median = capture.settings.python_median_us
    spread = median / fastest if median and fastest else 1.0
    low, high = host.python_scale_range
    if capture.settings.capture_wait_share > BUSY_WAIT_SHARE:
        low /= 1.0 + LOADED_PYTHON_INFLATION
    scale = host.python_scale or 1.0
    return low / scale, max(spread, 1.0) * high / scale


def _python_ranges(capture: Capture, host: HostModel, preds: list[PredictedOp], launches: list[Launch],
                   captured_python: list[float]) -> dict:
    """The host side's ranges (Prediction's fields of those names): the model Python's alone, and the step's
    with both host uncertainties at once. The two are independent (how a program's lines cost against the
    fitted µs per line; how fast the target host runs this process against its other runs), so the step's
    range takes each at its own end: the Python's low factor on the fastest run speed, its high on the slowest.
    Either alone held the measured median of the zoo's host-bound steps on 61% and 59% of them
    (scripts/eval/host_range_check.py, docs/validation.md "Ranges that hold")."""
    low, high = python_range_factors(capture, host)
    python_us, captured_us = sum(p.python_us for p in preds), sum(captured_python)
    fast, slow = min(host.run_speed_range), max(host.run_speed_range)
    run_range = tuple(steady_state_step_us(launches, host_scale=f) for f in host.run_speed_range)

    def step_at(factor: float, host_scale: float = 1.0) -> float:
        return steady_state_step_us([with_host(lc, lc.host_us + part * (factor - 1.0))
                                     for lc, part in zip(launches, captured_python)], host_scale=host_scale)

    step_range = (step_at(low, fast), step_at(high, slow)) if captured_us else (min(run_range), max(run_range))
    return {"python_time_range_us": (python_us + captured_us * (low - 1.0), python_us + captured_us * (high - 1.0)),
            "step_time_range_us": (step_at(low), step_at(high)) if captured_us else (0.0, 0.0),
            "step_time_run_range_us": run_range, "step_range_us": step_range,
            "capture_cpu": host.capture_cpu, "target_cpu": host.target_cpu,
            "python_timing_steps": capture.settings.python_timing_steps,
            # the lines priced per line: a heavy stretch priced as read is not in the count the report gives
            "python_lines": sum(op.python_lines for op in capture.ops if host.priced_by_lines(op)),
            "python_line_us": host.python_line_us if host.price_lines else 0.0}


def _capture_notes(capture: Capture, model: KernelModel) -> tuple[str, ...]:
    """The capture's notes, with what the kernel model knows better in place of a capture's stand-in note."""
    from kernelcast.capture.compiled import GENERATED_TIMES_NOTE

    notes_for = getattr(model, "notes_for", None)
    return capture.notes if notes_for is None else notes_for(capture.notes, GENERATED_TIMES_NOTE)


def _hazards_with_fix_costs(capture: Capture, spec: GPU, model, host_model, interconnect, host_speed,
                            target_host) -> tuple:
    """The step's stream hazards (hazards.py), each unordered one with the step re-predicted with its fix (the
    wait the fix adds)."""
    out = []
    for hazard in find_hazards(capture):
        fixed = with_wait(capture, hazard)
        if fixed is not None:
            step_us = predict_capture(fixed, spec, kernel_model=model, host_model=host_model,
                                      interconnect=interconnect, host_speed=host_speed, target_host=target_host,
                                      reprice_fixes=False).step_time_us
            hazard = dataclasses.replace(hazard, step_with_fix_us=step_us)
        out.append(hazard)
    return tuple(out)


@cyclic_gc_paused()  # ~10 objects per op, no cycles among them (gc_pause.py)
def predict_capture(capture: Capture, gpu: str | GPU, kernel_model: KernelModel | None = None,
                    host_model: HostModel | None = None, interconnect: str | Interconnect | None = None,
                    host_speed: dict[str, float] | None = None, expandable_segments: bool = False,
                    target_host: CpuBench | None = None, reprice_fixes: bool = True) -> Prediction:
    """host_speed: {phase: factor} multiplies the CPU time of that phase's ops (forward, backward, optimizer),
    for a host measured to run one thread slower than the one that calibrated (backward runs on torch's autograd
    thread, the rest on the Python thread). expandable_segments: the caching allocator's option of that name
    (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) for the memory prediction. target_host: the target host's
    three benchmarks (capture/cpu_speed.py) when it runs at another speed than it calibrated at. reprice_fixes:
    re-predict the step with each stream hazard's wait added (Prediction.hazards, step_with_fix_us)."""
    spec = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    link = interconnect_for(spec, capture, interconnect)
    model = kernel_model or kernel_model_for(spec, capture)
    host = (host_model or host_model_for(spec, capture, target_host)).for_step(capture.ops)
    hooks = parallel_host_for(spec, capture)
    ctx = cost_context(spec, capture)
    preds: list[PredictedOp] = []
    costs: list[Cost | None] = []
    launches: list[Launch] = []
    l2_warm = warm_shares(capture.ops, spec.l2_bytes)
    all_costs = [cost_of(op, ctx) for op in capture.ops]
    launched = launched_for(capture.ops, all_costs)
    library_extras = library_extras_us(capture.ops)
    captured_python: list[float] = []  # per op, the part of its host time timed on the capture machine
    for op, cost, warm in zip(capture.ops, all_costs, l2_warm):
        if op.parent >= 0:  # called from C++ by a decomposed op, which pays the dispatch and launches
            dispatch_us, python_us, overlap_us = 0.0, 0.0, 0.0
        else:
            launched_cost = launched.get(op.index, cost)
            dispatch_us, python_us = host.dispatch_us(op, launched_cost), host.python_us(op)
            dispatch_us += host.cpu_scale * library_extras.get(op.index, 0.0)
            overlap_us = host.library_overlap_us(op, launched_cost)
        if cost is not None and cost.kind == COLLECTIVE_KIND:  # timed by the interconnect, not a roofline
            est = collective_estimate(cost, link)[0]
            call_us = call_host_us(cost.key[0], link)  # the link's measured CPU time per call, where measured
            dispatch_us = dispatch_us if call_us is None else call_us
        else:
            est = model.estimate(cost, warm) if cost is not None else NO_KERNEL
        costs.append(cost)
        if hooks is not None and op.index in hooks.op_us:  # FSDP2's copy ops: Python kernels, fitted per call
            dispatch_us = hooks.op_us[op.index]
        if hooks is not None:  # FSDP2's hooks: their Python from the device fit, not the capture machine's
            python_us = (0.0 if op.index in hooks.replaced_python else python_us) + hooks.extra_us.get(op.index, 0.0)
        phase_speed = (host_speed or {}).get(host_phase(op.phase), 1.0)
        host_us = (dispatch_us + python_us) * phase_speed
        replaced = op.parent >= 0 or (hooks is not None and op.index in hooks.replaced_python)
        captured_python.append(0.0 if replaced else host.captured_python_us(op) * phase_speed)
        preds.append(_op_prediction(op, cost, est, host_us, python_us, launch_bound=0 < est.time_us < dispatch_us))
        launches.append(Launch(host_us, est.time_us, op.stream, sync=op.sync is not None,
                               sync_return_us=host.sync_return if op.sync else 0.0,
                               overlap_us=min(overlap_us * phase_speed, host_us), **_stream_marker(op)))
    if any(lc.stream == COMM_STREAM for lc in launches):  # NCCL's stream: ordered by data flow
        launches = with_stream_events(capture.ops, launches)
    timeline = simulate(launches)
    step_us = steady_state_step_us(launches)
    uncosted = tuple(sorted({p.op for p in preds if not p.costed}))
    return Prediction(
        gpu=spec, kernel_model=model.source, host=host.host, ops=tuple(preds),
        step_time_us=step_us, first_step_us=timeline.end_us,
        naive_host_timer_us=timeline.cpu_end_us, timeline=timeline,
        gpu_time_us=sum(p.time_us for p in preds), host_time_us=sum(p.host_us for p in preds),
        kernels=sum(p.kernels for p in preds), uncosted=uncosted,
        sync_points=sum(1 for p in preds if p.sync),
        notes=(gpu_notes(spec) + precision_notes(spec, preds, costs) + launch_count_notes(spec, ctx, costs)
               + new_cudnn_graph_notes(capture.ops, preds) + _capture_notes(capture, model)),
        compiled=capture.compiled, compiled_as=capture.compiled_as or ("eager" if capture.compiled else ""),
        workload=capture.workload,
        sync_groups=_sync_groups(preds, costs, launches, timeline, step_us, model),
        python_time_us=sum(p.python_us for p in preds), launch_bound_ops=sum(p.launch_bound for p in preds),
        **_python_ranges(capture, host, preds, launches, captured_python),
        step_time_by_host_speed=tuple((f, steady_state_step_us(launches, host_scale=f)) for f in HOST_SPEED_FACTORS),
        host_run_speed_range=host.run_speed_range,
        comm=comm_summary(capture.ops, [p.time_us for p in preds], launches, step_us, link, capture.world_size)
        if link is not None else None,
        parallel_host=hooks,
        memory=predict_memory(capture, spec, expandable_segments=expandable_segments),
        hazards=_hazards_with_fix_costs(capture, spec, model, host_model, interconnect, host_speed, target_host)
        if reprice_fixes else find_hazards(capture),
    )
