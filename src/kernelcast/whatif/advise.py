"""`kernelcast advise`: what would make a step faster, each fix applied and re-predicted.

Every fix that changes the step is applied to the workload and the step captured again (the changes are made
to what build() makes inside the capture, on fake tensors, never to the user's objects), then predicted on the
same GPU; nothing is estimated from the first prediction alone. The fixes, where they apply:
- torch.compile, default mode and mode="reduce-overhead" (CUDA graphs), as `--compile MODE` captures it
  (capture/inductor.py; needs the triton package). A step that already calls torch.compile is not compiled
  again.
- bf16 autocast around the step, where its matrix products run in fp32 (transforms.under_autocast).
- TF32 for fp32 matmuls (torch.set_float32_matmul_precision('high')), where fp32 GEMMs run on the CUDA cores of a
  GPU with TF32 tensor cores: the step captured with the setting on, restored after.
- the fused optimizer (fused=True) for Adam, AdamW, SGD and Adagrad on the foreach or for-loop path
  (transforms.fused_optimizers).
- channels_last for 2-d convolutions in NCHW: the model's parameters and the step's 4-d inputs converted once,
  before the step (as a data loader would hand them over).
- a larger batch (twice build()'s batch argument), compared per sample.
- removing a sync point: its saving is the step simulated without that sync (the timeline's own figure,
  SyncPointGroup.saving_us), not a re-capture.
A fix whose precondition does not hold (launch-bound advice on a GPU-bound step is not a fix of its own here:
compile and CUDA graphs are tried and their predicted step says whether they help) is not tried, and the
answer says why. A fix that was tried and predicts no saving is listed apart, with its predicted change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from dataclasses import dataclass
from typing import Callable

from kernelcast.errors import KernelcastError

# A fix must save at least this share of the step to be advised (below it, the prediction's own uncertainty
# is larger than the change).
MIN_SAVING_SHARE = 0.02
LARGER_BATCH_FACTOR = 2
CONV_OPS = ("aten.convolution.default", "aten.cudnn_convolution.default")
FUSED_OPTIMIZER_OPS = ("aten._fused_adam_.default", "aten._fused_adamw_.default", "aten._fused_sgd_.default",
                       "aten._fused_adagrad_.default")
COMPILE_TIME_RE = re.compile(r"compile: Dynamo, AOTAutograd and Inductor took ([0-9.]+) s")


@dataclass(frozen=True)
class Fix:
    """One fix, re-predicted. Times in µs of one step (per sample times for a larger batch: per the original
    batch's worth of samples); peak_bytes: max_memory_allocated over the step after the fix."""

    name: str
    how: str  # "re-captured" | "timeline without the sync"
    step_before_us: float
    step_after_us: float
    gpu_after_us: float | None = None
    bound_after: str = ""
    peak_before_bytes: int | None = None
    peak_after_bytes: int | None = None
    cost: str = ""  # what the fix costs besides its effect on the step: compile time, memory, a caveat

    @property
    def saving_us(self) -> float:
        return self.step_before_us - self.step_after_us

    @property
    def saving_share(self) -> float:
        return self.saving_us / self.step_before_us if self.step_before_us else 0.0


@dataclass(frozen=True)
class Advice:
    workload: str
    gpu: str
    step_us: float
    bound: str
    fixes: tuple[Fix, ...]  # predicted to save at least MIN_SAVING_SHARE, largest saving first
    no_gain: tuple[Fix, ...]  # tried, predicted to save less (or to be slower)
    not_tried: tuple[tuple[str, str], ...]  # (fix, why it does not apply or could not be tried)


def prepared_fixes() -> dict[str, Callable]:
    """The fixes made by changing what build() made (a `prepare` each), by name: advise applies them on fake
    tensors, scripts/device/advise_check.py on the GPU."""
    from .transforms import channels_last, fused_optimizers, under_autocast

    return {"bf16 autocast": under_autocast, "fused optimizer": fused_optimizers, "channels_last": channels_last}


# -- when each fix applies ------------------------------------------------------------------------------------
def _nchw_convolutions(capture) -> bool:
    """2-d convolutions whose input is stored NCHW (channels_last would change their kernels)."""
    from kernelcast.costs.common import channels_last as stored_nhwc

    inputs = [op.tensors_in()[0] for op in capture.ops if op.op in CONV_OPS and op.tensors_in()]
    return any(len(t.shape) == 4 and not stored_nhwc(t) for t in inputs)


def _fp32_gemms(pred) -> bool:
    """Whether some of the step's matrix products run under the FP32 roof (TF32 off for matmuls)."""
    from kernelcast.predict import fp32_gemm

    return any(fp32_gemm(p) and p.flops for p in pred.ops)


@contextlib.contextmanager
def _tf32_matmuls():
    """torch.backends.cuda.matmul.allow_tf32 on for what runs inside (the capture reads it into its settings),
    as it was after: advise captures every fix in this one process."""
    import torch

    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def _trains(pred) -> bool:
    """Whether the step runs a backward or an optimizer (a larger batch then changes what the optimizer sees)."""
    return any(p.phase in ("backward", "optimizer") for p in pred.ops)


def _has_unfused_optimizer(pred) -> bool:
    return any(p.phase == "optimizer" for p in pred.ops) and not any(p.op in FUSED_OPTIMIZER_OPS for p in pred.ops)


def _compile_seconds(pred) -> float | None:
    for note in pred.notes:
        m = COMPILE_TIME_RE.search(note)
        if m:
            return float(m.group(1))
    return None


def _peak(pred) -> int | None:
    return pred.memory.peak_bytes if pred.memory is not None else None


def _memory_cost(before, after) -> str:
    from kernelcast.report.memory_text import human_bytes

    if before is None or after is None or before == after:
        return ""
    return f"peak memory {human_bytes(before)} -> {human_bytes(after)}"


# -- the advice --------------------------------------------------------------------------------------------
def advise(spec: str, gpu: str, args: dict | None = None, world_size: int = 1,
           progress: Callable[[str], None] | None = None) -> Advice:
    """Each fix that applies to the workload `spec` (FILE.py:build or example:NAME), re-predicted on `gpu`.
    Raises KernelcastError for a saved capture (it cannot be built again) or a workload that fails to capture."""
    from kernelcast.api import capture_file
    from kernelcast.capture.inductor import triton_missing
    from kernelcast.capture.workload import build_parameters, load_build
    from .memory_fixes import fp32_matmuls
    from .transforms import BATCH_NAMES, batch_parameter, channels_last, fused_optimizers, under_autocast
    from kernelcast.devices import get_gpu
    from kernelcast.predict import predict_capture

    if spec.endswith(".json"):
        raise KernelcastError("advise captures the workload again with each fix: give FILE.py:build or "
                              "example:NAME, not a saved capture")
    args = dict(args or {})
    say = progress or (lambda _text: None)

    def captured(prepare=None, compile_mode=None, build_args=None):
        return capture_file(spec, gpu, world_size, build_args if build_args is not None else args, prepare=prepare,
                            compile_mode=compile_mode)

    def predicted(**how):
        return predict_capture(captured(**how), gpu)

    say("the step as it is")
    base_capture = captured()
    base = predict_capture(base_capture, gpu)
    before = base.step_time_us
    tried: list[Fix] = []
    not_tried: list[tuple[str, str]] = []

    def attempt(name: str, cost: str = "", **how) -> None:
        say(name)
        try:
            pred = predicted(**how)
        except KernelcastError as exc:
            not_tried.append((name, f"the step failed with this change: {str(exc)[:200]}"))
            return
        extra = cost
        if how.get("compile_mode") is not None:
            seconds = _compile_seconds(pred)
            extra = "; ".join(filter(None, (f"compile time {seconds:.1f} s on this machine, plus Triton's on the "
                                            "device's host" if seconds is not None else "", cost)))
        tried.append(Fix(name, "re-captured", before, pred.step_time_us, pred.gpu_time_us, pred.bound,
                         _peak(base), _peak(pred),
                         "; ".join(filter(None, (extra, _memory_cost(_peak(base), _peak(pred)))))))

    missing = triton_missing()
    if base.compiled:
        not_tried.append(("torch.compile", "the step already runs torch.compile'd code (set its mode there)"))
    elif missing is not None:
        not_tried.append(("torch.compile", f"Inductor cannot run here: {missing}"))
    else:
        attempt("torch.compile (default mode)", compile_mode="default")
        attempt("torch.compile(mode=\"reduce-overhead\") (CUDA graphs)",
                "the CUDA graph pool's memory is not modelled", compile_mode="reduce-overhead")
    target = get_gpu(gpu)
    if not target.supports_bf16:
        not_tried.append(("bf16 autocast", f"{target.name} has no bf16 tensor cores: bf16 would run on its "
                                           "CUDA cores, slower than fp32 (fp16 autocast with a GradScaler is the "
                                           "change to try)"))
    elif fp32_matmuls(base) and any(p.flops for p in base.ops):
        attempt("bf16 autocast", prepare=under_autocast)
    else:
        not_tried.append(("bf16 autocast", "the matrix products already run in 16-bit (or there are none)"))
    if "tf32_tensor" in target.peak_flops and _fp32_gemms(base):
        with _tf32_matmuls():
            attempt("TF32 matmuls (torch.set_float32_matmul_precision('high'))",
                    "products rounded to TF32's 10 mantissa bits")
    else:
        not_tried.append(("TF32 matmuls", "no fp32 matrix products on the CUDA cores, or no TF32 tensor cores"))
    if _has_unfused_optimizer(base):
        attempt("fused optimizer (fused=True)", prepare=fused_optimizers)
    else:
        not_tried.append(("fused optimizer", "no optimizer step, or it is fused already"))
    if _nchw_convolutions(base_capture):
        attempt("channels_last (model and 4-d inputs)", "inputs converted once, before the step",
                prepare=channels_last)
    else:
        not_tried.append(("channels_last", "no 2-d convolutions in NCHW"))
    build, _ = load_build(spec)
    batch = batch_parameter(build)
    if batch is not None:
        value = int(args.get(batch, build_parameters(build)[batch]))
        name = (f"{batch}={value * LARGER_BATCH_FACTOR} (compared per {value} samples: the larger step's time / "
                f"{LARGER_BATCH_FACTOR} against one of today's)")
        say(name)
        try:
            pred = predicted(build_args={**args, batch: value * LARGER_BATCH_FACTOR})
            fits = pred.memory is None or pred.memory.fit is None or pred.memory.fit.fits
            tried.append(Fix(name, "re-captured", before, pred.step_time_us / LARGER_BATCH_FACTOR,
                             pred.gpu_time_us / LARGER_BATCH_FACTOR, pred.bound, _peak(base), _peak(pred),
                             "; ".join(filter(None, (f"the optimizer sees a {LARGER_BATCH_FACTOR}x larger batch"
                                                     if _trains(base) else "",
                                                     "" if fits else "does not fit in memory",
                                                     _memory_cost(_peak(base), _peak(pred)))))))
        except KernelcastError as exc:
            not_tried.append((name, f"the step failed with this change: {str(exc)[:200]}"))
    else:
        not_tried.append(("a larger batch", f"build() has no batch argument ({', '.join(BATCH_NAMES)})"))
    for group in base.sync_groups:
        if group.saving_us > 0:
            tried.append(Fix(f"remove the {group.kind} sync at {group.source} ({group.advice})",
                             "timeline without the sync", before, before - group.saving_us))
    threshold = MIN_SAVING_SHARE * before
    fixes = tuple(sorted((f for f in tried if f.saving_us >= threshold), key=lambda f: -f.saving_us))
    no_gain = tuple(f for f in tried if f.saving_us < threshold)
    return Advice(base.workload or spec, base.gpu.id, before, base.bound, fixes, no_gain, tuple(not_tried))


def advice_json(advice: Advice) -> dict:
    def fix(f: Fix) -> dict:
        return {**dataclasses.asdict(f), "saving_us": f.saving_us, "saving_share": f.saving_share}

    return {"workload": advice.workload, "gpu": advice.gpu, "step_time_us": advice.step_us, "bound": advice.bound,
            "fixes": [fix(f) for f in advice.fixes], "no_gain": [fix(f) for f in advice.no_gain],
            "not_tried": [{"fix": name, "why": why} for name, why in advice.not_tried]}


def _signed_share(share: float) -> str:
    """+12%, -3%, or "no change" (never "-0%")."""
    return "no change" if round(share * 100) == 0 else f"{share:+.0%}"


def advice_text(advice: Advice) -> str:
    from kernelcast.report import time_text

    lines = [f"{advice.workload} on {advice.gpu}: step {time_text(advice.step_us)} ({advice.bound}-bound)"]
    if advice.fixes:
        lines.append("fixes, largest predicted saving first (each applied and re-predicted):")
        for i, f in enumerate(advice.fixes, 1):
            lines.append(f"  {i}. {f.name}: {time_text(f.step_before_us)} -> {time_text(f.step_after_us)} "
                         f"(saves {time_text(f.saving_us)}, {f.saving_share:.0%}; {f.how})")
            if f.cost:
                lines.append(f"     cost: {f.cost}")
    else:
        lines.append(f"no fix tried here is predicted to save {MIN_SAVING_SHARE:.0%} of the step or more")
    for f in advice.no_gain:
        change = -f.saving_share
        what = "slower" if change > 0 else f"under {MIN_SAVING_SHARE:.0%} saved, within the prediction's uncertainty"
        lines.append(f"  not advised ({what}): {f.name}: {time_text(f.step_before_us)} -> "
                     f"{time_text(f.step_after_us)} ({_signed_share(change)})" + (f"; {f.cost}" if f.cost else ""))
    for name, why in advice.not_tried:
        lines.append(f"  not tried: {name}: {why}")
    return "\n".join(lines)
