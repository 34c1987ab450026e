"""What would make a step that runs out of memory fit: each change applied to the workload, the step captured
again, and its memory predicted again (nothing here is estimated from the first prediction alone).

The changes, tried in this order:
- a smaller batch, when build() takes one as a keyword argument (the largest that fits with `kernelcast fit`'s
  margin, searched over captures as it does);
- activation checkpointing of the largest modules: each layer of the model's largest nn.ModuleList (else the
  root's children) runs under torch.utils.checkpoint (use_reentrant=False), so backward recomputes its
  forward instead of keeping its activations;
- bf16 autocast around the step (when its matrix products run in fp32), then bf16 weights as well
  (model.to(torch.bfloat16) under autocast: parameters, gradients and optimizer state in bf16);
- a fused optimizer (Adam, AdamW, SGD, Adagrad with fused=True: no foreach lists of temporaries); an 8-bit
  optimizer (bitsandbytes) is named where installed, but its kernels do not run on fake tensors;
- FSDP2 at world size 2, 4, 8 (fully_shard on each layer and the root, the optimizer given the sharded
  parameters), captured as rank 0 of torch's fake process group; a step that already shards is captured again
  at larger world sizes.
The changes are made to the model that build() makes inside the capture (fake tensors), never to the user's.
"""

from __future__ import annotations

import importlib.util
from typing import Callable

from kernelcast.capture.workload import build_parameters
from kernelcast.errors import KernelcastError
from kernelcast.predict import Prediction, predict_capture
from kernelcast.predict.memory import MemoryFix

from .transforms import (batch_parameter, bf16_weights, checkpoint_layers, fully_sharded, fused_optimizers,
                         under_autocast)

FSDP_WORLD_SIZES = (2, 4, 8)


# -- re-predicting -----------------------------------------------------------------------------------------
def _fix(name: str, pred: Prediction | None, note: str = "") -> MemoryFix:
    mem = pred.memory if pred is not None else None
    if mem is None or mem.fit is None:
        return MemoryFix(name, None, None, None, None, note or "no memory prediction")
    oom = mem.fit.oom
    if oom is not None:
        where = (f"{oom.op.op.removeprefix('aten.').removesuffix('.default')} at {oom.op.source}"
                 if oom.op is not None else f"the {oom.stage}")
        note = "; ".join(filter(None, (note, f"fails in {where}")))
    return MemoryFix(name, mem.peak_bytes, mem.fit.peak_reserved_bytes, mem.fit.fits, pred.step_time_us, note)


def _repredict(spec: str, gpu: str, args: dict, world_size: int = 1, prepare: Callable | None = None,
               interconnect: str | None = None) -> Prediction:
    from kernelcast.api import capture_file

    return predict_capture(capture_file(spec, gpu, world_size, args, prepare=prepare), gpu, interconnect=interconnect)


def _attempt(name: str, run: Callable[[], Prediction], note: str = "") -> MemoryFix:
    try:
        return _fix(name, run(), note)
    except KernelcastError as exc:
        return MemoryFix(name, None, None, None, None, f"the step failed with this change: {str(exc)[:200]}")


def fp32_matmuls(pred: Prediction) -> bool:
    """The step's matrix products run in fp32 (autocast would change them)."""
    return not any(p.flops and p.roof in ("bf16_tensor", "fp16_tensor") for p in pred.ops)


def memory_fixes(spec: str, gpu: str, pred: Prediction, args: dict | None = None, world_size: int = 1,
                 interconnect: str | None = None) -> tuple[MemoryFix, ...]:
    """Each change that applies to this workload, re-predicted (see the module docstring)."""
    from kernelcast.capture.workload import load_build

    args = dict(args or {})
    build, _ = load_build(spec)
    fixes: list[MemoryFix] = []
    name = batch_parameter(build)
    if name is not None:
        fixes.append(_smaller_batch(spec, gpu, args, name, build_parameters(build)[name], world_size))
    fixes.append(_attempt("activation checkpointing of each layer",
                          lambda: _repredict(spec, gpu, args, world_size, checkpoint_layers, interconnect)))
    if fp32_matmuls(pred):
        fixes.append(_attempt("bf16 autocast", lambda: _repredict(spec, gpu, args, world_size, under_autocast,
                                                                  interconnect)))
    fixes.append(_attempt("bf16 weights under autocast (parameters, gradients, optimizer state in bf16)",
                          lambda: _repredict(spec, gpu, args, world_size, bf16_weights, interconnect)))
    if any(p.phase == "optimizer" for p in pred.ops):
        fixes.append(_attempt("fused optimizer (fused=True)",
                              lambda: _repredict(spec, gpu, args, world_size, fused_optimizers, interconnect)))
        installed = importlib.util.find_spec("bitsandbytes") is not None
        fixes.append(MemoryFix("8-bit optimizer (bitsandbytes)", None, None, None, None,
                               "bitsandbytes' kernels do not run on fake tensors" if installed
                               else "bitsandbytes is not installed here"))
        fixes.append(_fsdp(spec, gpu, args, world_size, interconnect))
    return tuple(fixes)


def _smaller_batch(spec: str, gpu: str, args: dict, name: str, default: int, world_size: int) -> MemoryFix:
    from .fit import FIT_MARGIN, fits_with_margin, largest_fitting

    current = int(args.get(name, default))
    if current <= 1:
        return MemoryFix(f"a smaller {name}", None, None, None, None, f"{name} is already {current}")
    found: dict[int, Prediction] = {}

    def fits(value: int) -> bool:
        pred = _repredict(spec, gpu, {**args, name: value}, world_size)
        found[value] = pred
        # as `kernelcast fit` searches: with FIT_MARGIN of the usable memory left for what the prediction misses
        return fits_with_margin(pred.memory.fit if pred.memory else None, FIT_MARGIN)

    try:
        search = largest_fitting(fits, 1, current - 1)
    except KernelcastError as exc:
        return MemoryFix(f"a smaller {name}", None, None, None, None, f"the step failed: {str(exc)[:200]}")
    if search.max_fit is None:
        return _fix(f"{name}={1}", found.get(1), f"even {name}=1 does not fit")
    return _fix(f"{name}={search.max_fit} (from {current}; {name}={search.first_oom} does not fit with a "
                f"{FIT_MARGIN:.0%} margin)", found[search.max_fit])


def _fsdp(spec: str, gpu: str, args: dict, world_size: int, interconnect: str | None) -> MemoryFix:
    """FSDP2 at the smallest world size of FSDP_WORLD_SIZES (above the step's own) that fits."""
    prepare = None if world_size > 1 else fully_sharded
    sizes = sorted({n for n in FSDP_WORLD_SIZES if n > world_size} | {world_size * k for k in (2, 4, 8)})
    last = None
    for n in sizes:
        fix = _attempt(f"FSDP2 at world size {n} (per rank)",
                       lambda n=n: _repredict(spec, gpu, args, n, prepare, interconnect or "nvlink"))
        if fix.fits or fix.peak_bytes is None:
            return fix
        last = fix
    return last if last is not None else MemoryFix("FSDP2", None, None, None, None, "no larger world size tried")
