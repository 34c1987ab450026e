"""Host (CPU) cost of FSDP2's and DDP's machinery, from the structure of the step and costs calibrated on the
device (profiles/<gpu>_parallel.json, fitted by scripts/fit/fit_parallel.py to scripts/device/validate_distributed.py's
profiles).

What the machinery does on the CPU, per step, as PyTorch's code does it:

FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py, _fsdp_state.py, _fsdp_collectives.py). Every
fully_shard() call makes one unit (an FSDPParamGroup) of P parameters; the root also runs per-step hooks. Each
hook is a profiler range ("FSDP::<kind> (<unit>)"), which the capture records (capture/distributed.py):
- root_pre_forward / inputs_to_device / cast_forward_inputs: the root's checks and input moves, once a step
  (casts once per unit under a mixed-precision policy);
- pre_forward: unshard() = all_gather (per parameter, its all-gather input: a dtype cast under a policy; then
  the copy-in, a foreach copy, and the collective on the all-gather stream), wait_for_unshard() =
  all_gather_copy_out (the stream waits, split_with_sizes_copy, and per parameter the unsharded view swapped
  in), then the post-backward hook registered on the outputs;
- post_forward: reshard() (per parameter the sharded tensor swapped back, the unsharded storage freed);
- pre_backward: unshard() again (or its prefetch from the unit after: backward_prefetch) and its copy-out;
- post_backward: post_backward_accumulate, post_backward_reshard, and post_backward_reduce = foreach_reduce()
  (the chunk_cat copy-in, the reduce-scatter on its stream, the division, and per parameter the sharded
  gradient made a DTensor and accumulated);
- root_post_backward_callback: once a step, finalize_backward() for every unit (per parameter bookkeeping).
The Python of each hook (the range's time outside the aten ops, runtime calls and inner ranges in it) is
priced base_us + per_param_us * P, per kind, as fitted on the device's profiles of two models; the aten ops
the hooks launch (copies, casts, collectives, views) are recorded by the capture and priced like any op. The
capture's own Python time inside these ranges is dropped: it runs FSDP2 on fake tensors and stand-in streams
(several times the device's time), and Python in backward is not timed at all.

DDP (torch/nn/parallel/distributed.py, torch/csrc/distributed/c10d/reducer.cpp): per parameter, the reducer's
autograd hook copies the gradient into its bucket (mul_out by 1 / world size, or copy_ under a comm hook) and,
after the bucket's all-reduce, copies it back to .grad (copy_bucket_to_grad); per bucket, one all-reduce.
The copies are recorded as ops; the reducer's own C++ around each is priced per parameter (reducer_copy_us,
grad_copy_us). Each collective's host issue cost (ProcessGroupNCCL: stream waits, event records, the kernel
launch) comes from the interconnect's measured fit (devices/interconnects.toml), where there is one.

Not modelled: DTensor's sharding propagation on the optimizer's ops (the capture times it as torch's own
work), and hooks of kinds the fitted file does not hold (listed in `unmodelled`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Sequence

from kernelcast.records import RANGE_BEGIN_OP, RANGE_END_OP, OpRecord

FSDP_RANGE = re.compile(r"^FSDP::(?P<kind>[a-z_]+?)(?: for (?P<target>\S+)| \((?P<unit>.*)\))?$")
ROOT_UNIT = ""  # the root module's fully_shard: its ranges carry no module name
COPY_IN_OP = "fsdp.all_gather_copy_in.default"
ALL_GATHER_KIND = "all_gather"
# Hooks whose per-parameter work runs over every unit's parameters, not one unit's.
PER_STEP_KINDS = ("root_post_backward_callback",)
PARALLEL_PROFILE = "{gpu}_parallel.json"


def fsdp_range_kind(name: str) -> tuple[str, str] | None:
    """("pre_forward", "layers.0") from "FSDP::pre_forward (layers.0)"; ("backward_prefetch", "layers.6") from
    "FSDP::backward_prefetch for layers.6"; (kind, "") for the root's; None for any other range."""
    m = FSDP_RANGE.match(name)
    if m is None:
        return None
    return m["kind"], m["unit"] or m["target"] or ROOT_UNIT


@dataclass(frozen=True)
class FsdpRange:
    kind: str
    unit: str
    begin: int  # op index of its begin marker
    end: int  # op index of its end marker


def fsdp_ranges(ops: Sequence[OpRecord]) -> tuple[FsdpRange, ...]:
    """The FSDP2 hook ranges of a captured step, in order of their begin markers (nesting matched per name)."""
    open_at: dict[str, list[int]] = {}
    out: list[FsdpRange] = []
    for i, op in enumerate(ops):
        if op.op not in (RANGE_BEGIN_OP, RANGE_END_OP):
            continue
        name = op.args.get("name", "")
        if fsdp_range_kind(name) is None:
            continue
        if op.op == RANGE_BEGIN_OP:
            open_at.setdefault(name, []).append(i)
        elif open_at.get(name):
            kind, unit = fsdp_range_kind(name)
            out.append(FsdpRange(kind, unit, open_at[name].pop(), i))
    return tuple(sorted(out, key=lambda r: r.begin))


def unit_params(ops: Sequence[OpRecord], ranges: Sequence[FsdpRange]) -> dict[str, int]:
    """Parameters per unit: the all-gather inputs of the copy-in inside the unit's all_gather range (one per
    parameter; FSDP2 gathers every parameter of a unit in one buffer)."""
    out: dict[str, int] = {}
    for r in ranges:
        if r.kind != ALL_GATHER_KIND or r.unit in out:
            continue
        for op in ops[r.begin + 1:r.end]:
            if op.op == COPY_IN_OP:
                inputs = op.args.get("all_gather_inputs")
                out[r.unit] = len(inputs) if isinstance(inputs, tuple) else 1
                break
    return out


def inside(ranges: Sequence[FsdpRange]) -> frozenset[int]:
    """Op indices whose captured Python ran inside a hook range: from after a begin marker to its end marker
    (the begin marker's own Python ran before the hook)."""
    return frozenset(i for r in ranges for i in range(r.begin + 1, r.end + 1))


@dataclass(frozen=True)
class HookCost:
    base_us: float
    per_param_us: float = 0.0

    def __call__(self, params: int) -> float:
        return self.base_us + self.per_param_us * params


@dataclass(frozen=True)
class ParallelHostCosts:
    """Fitted host costs of FSDP2's hooks (per range kind) and DDP's reducer (per parameter), µs."""

    fsdp: dict[str, HookCost] = field(default_factory=dict)
    fsdp_ops: dict[str, HookCost] = field(default_factory=dict)  # FSDP2's copy ops: per call, per tensor copied
    ddp_reducer_copy_us: float = 0.0  # the reducer's C++ around each gradient's copy into its bucket
    ddp_grad_copy_us: float = 0.0  # ... and around each copy back to .grad
    source: str = "none: FSDP2's and DDP's hooks cost nothing beyond their ops"

    @staticmethod
    def from_json(data: dict) -> "ParallelHostCosts":
        fsdp = {kind: HookCost(float(v["base_us"]), float(v.get("per_param_us", 0.0)))
                for kind, v in data.get("fsdp", {}).items()}
        ops = {op: HookCost(float(v["base_us"]), float(v.get("per_tensor_us", 0.0)))
               for op, v in data.get("fsdp_ops", {}).items()}
        ddp = data.get("ddp", {})
        return ParallelHostCosts(fsdp, ops, float(ddp.get("reducer_copy_us", 0.0)), float(ddp.get("grad_copy_us", 0.0)),
                                 source=data.get("label", "fitted"))


@lru_cache(maxsize=None)
def load_parallel_costs(gpu_id: str) -> ParallelHostCosts | None:
    """The fitted file for this GPU's host, if one ships (profiles/<gpu>_parallel.json)."""
    path = resources.files("kernelcast.profiles").joinpath(PARALLEL_PROFILE.format(gpu=gpu_id))
    if not path.is_file():
        return None
    return ParallelHostCosts.from_json(json.loads(path.read_text()))


@dataclass(frozen=True)
class ParallelHost:
    """What FSDP2's and DDP's machinery adds to a step's host time."""

    extra_us: dict[int, float]  # op index -> µs of hook work charged before it
    op_us: dict[int, float]  # op index -> µs of CPU for the op itself, where fitted (FSDP2's copy ops)
    replaced_python: frozenset[int]  # ops whose captured Python is the hooks' (priced in extra_us instead)
    unmodelled: tuple[str, ...]  # hook kinds the step runs that the costs do not hold
    units: dict[str, int]  # FSDP2 unit -> parameters

    @property
    def total_us(self) -> float:
        """The hooks' own CPU time and that of FSDP2's copy ops, per step."""
        return sum(self.extra_us.values()) + sum(self.op_us.values())


def fsdp_hook_us(ops: Sequence[OpRecord], costs: ParallelHostCosts) -> tuple[dict[int, float], frozenset[int],
                                                                               tuple[str, ...], dict[str, int]]:
    ranges = fsdp_ranges(ops)
    units = unit_params(ops, ranges)
    total = sum(units.values())
    extra: dict[int, float] = {}
    unmodelled: set[str] = set()
    for r in ranges:
        cost = costs.fsdp.get(r.kind)
        if cost is None:
            unmodelled.add(r.kind)
            continue
        params = total if r.kind in PER_STEP_KINDS else units.get(r.unit, 0)
        extra[r.begin] = extra.get(r.begin, 0.0) + cost(params)
    return extra, inside(ranges), tuple(sorted(unmodelled)), units


def bucket_storages(ops: Sequence[OpRecord], is_all_reduce) -> set[int]:
    """Storages DDP's buckets live in: those its all-reduces read."""
    return {t.storage for op in ops if is_all_reduce(op) for t in op.tensors_in() if t.storage}


def ddp_reducer_us(ops: Sequence[OpRecord], costs: ParallelHostCosts, is_all_reduce) -> dict[int, float]:
    """Per backward op that copies a gradient into a bucket (it writes bucket memory) or a bucket back into a
    gradient (it reads bucket memory and writes elsewhere): the reducer's C++ around it."""
    buckets = bucket_storages(ops, is_all_reduce)
    if not buckets:
        return {}
    extra: dict[int, float] = {}
    for i, op in enumerate(ops):
        if op.phase != "backward" or is_all_reduce(op) or op.is_view:
            continue
        writes = {t.storage for t in op.tensors_out()} | {t.storage for t in _out_args(op)}
        reads = {t.storage for t in op.tensors_in()} - writes
        if writes & buckets:
            extra[i] = costs.ddp_reducer_copy_us
        elif reads & buckets:
            extra[i] = costs.ddp_grad_copy_us
    return extra


def _out_args(op: OpRecord) -> list:
    value = op.args.get("out")
    items = value if isinstance(value, tuple) else (value,)
    first = next(iter(op.args.values()), None) if "inplace" in op.tags else None
    return [t for t in (*items, first) if hasattr(t, "storage")]


COPY_OP_TENSORS = {"fsdp.all_gather_copy_in": "all_gather_inputs", "fsdp.split_with_sizes_copy": "out",
                   "fsdp.chunk_cat": "tensors",
                   "fsdp.chunk_cat_mixed_dtype": "tensors"}  # the argument listing the tensors each copies
# torch 2.15's ops priced by the fitted cost of the op they replace (the same Python wrapper around _chunk_cat;
# the profile was fitted on torch 2.11)
FITTED_AS = {"fsdp.chunk_cat_mixed_dtype": "fsdp.chunk_cat"}


def fsdp_op_us(ops: Sequence[OpRecord], costs: ParallelHostCosts) -> dict[int, float]:
    """FSDP2's copy ops (torch.library ops with Python CUDA kernels): their fitted CPU time per call."""
    out = {}
    for i, op in enumerate(ops):
        cost = costs.fsdp_ops.get(op.packet) or costs.fsdp_ops.get(FITTED_AS.get(op.packet, ""))
        if cost is not None:
            tensors = op.args.get(COPY_OP_TENSORS.get(op.packet, ""))
            out[i] = cost(len(tensors) if isinstance(tensors, tuple) else 1)
    return out


def parallel_host(ops: Sequence[OpRecord], costs: ParallelHostCosts, is_all_reduce) -> ParallelHost:
    extra, replaced, unmodelled, units = fsdp_hook_us(ops, costs)
    for i, us in ddp_reducer_us(ops, costs, is_all_reduce).items():
        extra[i] = extra.get(i, 0.0) + us
    return ParallelHost(extra, fsdp_op_us(ops, costs), replaced, unmodelled, units)
