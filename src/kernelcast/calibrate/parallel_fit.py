"""Fit the model of collectives and of FSDP2's / DDP's host work to one device run of
scripts/device/validate_distributed.py (--measure-only): its collective sweep and its rank-0 profiles. Pure
functions of the measured record and the compact profiles (no torch, no GPU); scripts/fit/fit_parallel.py writes
what they return.

Collectives. The sweep times each call with a CUDA-event pair from an idle GPU: the CPU issuing the
collective (the Python call, ProcessGroupNCCL's stream waits and event records, up to the kernel's launch) is
inside that time, then the kernel. Per collective, t(S) = intercept + bus bytes(S) / busbw is fitted by least
squares on the relative error over every swept size. The intercept is split into the host's issue time and
the kernel's latency at the smallest sizes (<= TINY_MESSAGE_BYTES), where the kernel is NCCL's latency alone:
host issue = the sweep's median there minus NCCL's own ring/LL latency for it (predict/comm.py, tuning.cc),
the median over the collectives; latency = intercept - host issue. The CPU keeps working on the call after the
launch (the work object, event records, the return): the profiles' c10d ops spend POST_LAUNCH_SHARE of their
pre-launch time after it, so one call costs the CPU host issue * (1 + that share). Checked against the step
profiles' NCCL kernels that did not wait for their peer (unwaited_groups): groups of one collective and size
whose shortest duration repeats (MIN_REPEATS within NEAR_MIN_FRACTION) and is below the sweep's time.

FSDP2's hooks. For every FSDP2 range of a profile (FSDP::<kind> (<unit>)), its self time: its duration minus
the aten ops, CUDA runtime calls and inner ranges directly inside it (those are priced elsewhere: ops by the
per-op host model, inner ranges by their own kind). Per kind, self time = base + per_param * P, P the unit's
parameters (the length of its copy-in's input list), fitted over the units of every FSDP2 profile given (two
models, with and without communication: the hooks' Python is the same). The self times are under the
profiler, which adds its bookkeeping around every event: an over-estimate of a few µs per event inside.

Host speed. The same op took up to twice as long on a thread in one profile as in another of the same run
(aten::view on the autograd thread: 0.9 µs in the single-GPU GPT step, 1.8 µs in its FSDP2 step), with no
change to the op: the device host ran some configurations slower. Each thread's speed index is the geometric
mean, over SPEED_REFERENCE_OPS with at least SPEED_MIN_CALLS calls, of the op's median duration on that thread
over its median in a reference profile (the same model on one GPU, whose steps the per-op host model predicts);
hook self times are divided by their thread's index, so the fit describes the host at the reference's speed.

Profiler bookkeeping. The profiler adds CPU time per event it records (PROFILER_US_PER_EVENT: the single-GPU
steps' profiled time to their last launch minus the same steps unprofiled, over the events of a step; most
of it outside the events' own spans, as a view's profiled duration is its unprofiled one). A hook's self time
loses that much per event directly inside it, an FSDP2 copy op's duration that much per event nested in it.

FSDP2's copy ops. fsdp::all_gather_copy_in, split_with_sizes_copy and chunk_cat are torch.library ops whose
CUDA kernels are Python (_fsdp_collectives.py): a trampoline into Python, then the aten ops of the copy
(narrow, split, _foreach_copy_; split_with_sizes_copy.out; _chunk_cat.out). The capture records each as one op;
its CPU time, base + per_tensor * tensors per kind, is fitted to their profiled durations (less the profiler's
bookkeeping of what is nested in them, at the reference host speed).

DDP's reducer. Its C++ ranges around each gradient's copy into its bucket (reducer::mul_out, or reducer::copy_
under a comm hook) and back (copy_bucket_to_grad): the median self time of each.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from kernelcast.predict.comm import BUS_FACTOR
from kernelcast.predict.parallel_host import PER_STEP_KINDS, ROOT_UNIT, fsdp_range_kind

TINY_MESSAGE_BYTES = 16384  # up to here a collective's kernel is its latency (the sweep's 1-16 KiB points)
NEAR_MIN_FRACTION = 1.02  # kernels within 2% of a group's shortest ran the same, undisturbed
MIN_REPEATS = 3
NCCL_KERNEL_COLLECTIVE = {"AllGather": "all_gather", "ReduceScatter": "reduce_scatter", "AllReduce": "all_reduce",
                          "Broadcast": "broadcast"}  # ncclDevKernel_<name>_...
PROFILER_DTYPE_BYTES = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8, "long int": 8, "int": 4,
                        "unsigned char": 1}
SPEED_REFERENCE_OPS = ("aten::view", "aten::empty_strided", "aten::t", "aten::mm", "aten::mul", "aten::add",
                       "aten::copy_", "aten::sum")  # cheap, frequent ops every step runs on both threads
SPEED_MIN_CALLS = 20
REDUCER_COPY_RANGES = ("torch::distributed::reducer::mul_out", "torch::distributed::reducer::copy_")
REDUCER_GRAD_RANGE = "torch.distributed.ddp.reducer::copy_bucket_to_grad"
COPY_IN = "fsdp::all_gather_copy_in"


# -- least squares -------------------------------------------------------------------------------------------
def fit_line(points: list[tuple[float, float]], relative: bool = False) -> tuple[float, float]:
    """(a, b) minimising sum((a + b x - y)^2), or sum(((a + b x - y) / y)^2) with relative=True."""
    w = [1.0 / y ** 2 if relative else 1.0 for _, y in points]
    sw = sum(w)
    sx = sum(wi * x for wi, (x, _) in zip(w, points))
    sy = sum(wi * y for wi, (_, y) in zip(w, points))
    sxx = sum(wi * x * x for wi, (x, _) in zip(w, points))
    sxy = sum(wi * x * y for wi, (x, y) in zip(w, points))
    det = sw * sxx - sx * sx
    if len(points) < 2 or det == 0:
        return (sy / sw if sw else 0.0), 0.0
    b = (sw * sxy - sx * sy) / det
    return (sy - b * sx) / sw, b


# -- collectives ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CollectiveFit:
    collective: str
    ranks: int
    intercept_us: float  # host issue + kernel latency, as the sweep times it
    busbw_bytes_per_s: float
    residuals: dict[int, float]  # message bytes -> (fit - measured) / measured

    def sweep_us(self, message_bytes: float) -> float:
        bus = message_bytes * BUS_FACTOR[self.collective](self.ranks)
        return self.intercept_us + bus / self.busbw_bytes_per_s * 1e6


def fit_collective(rows: list[dict], collective: str, ranks: int, dtype: str = "float32") -> CollectiveFit:
    """t = intercept + bus bytes / busbw over the sweep's sizes of one collective (medians of its reps)."""
    mine = sorted((r["bytes"], r["measured_us"]) for r in rows if r["collective"] == collective and r["dtype"] == dtype)
    factor = BUS_FACTOR[collective](ranks)
    a, b = fit_line([(s * factor, t) for s, t in mine], relative=True)
    fit = CollectiveFit(collective, ranks, a, 1e6 / b if b > 0 else math.inf, {})
    return CollectiveFit(collective, ranks, a, fit.busbw_bytes_per_s,
                         {s: (fit.sweep_us(s) - t) / t for s, t in mine})


def _columns(compact: dict, table: str) -> list[dict]:
    names = compact["columns"][table]
    return [dict(zip(names, row)) for row in compact[table]]


def nccl_kernels(compact: dict, ranks: int) -> dict[tuple[str, int], list[float]]:
    """{(collective, message bytes S): kernel durations, µs} of a compact profile's NCCL kernels, S as
    nccl-tests defines it, from the record_param_comms op that launched each (its first input: the buffer for
    all_reduce / broadcast, one rank's input for all_gather, the whole input for reduce_scatter)."""
    s = compact["strings"]
    comms = {}
    for op in _columns(compact, "cpu_ops"):
        if s[op["name"]] == "record_param_comms" and op["external_id"] is not None:
            comms[op["external_id"]] = op
    launch_of = {r["correlation"]: r for r in _columns(compact, "runtime")}
    out: dict[tuple[str, int], list[float]] = defaultdict(list)
    for k in _columns(compact, "gpu"):
        name = s[k["name"]]
        if k["kind"] != "kernel" or not name.startswith("ncclDevKernel_"):
            continue
        collective = NCCL_KERNEL_COLLECTIVE.get(name.split("_")[1])
        launch = launch_of.get(k["correlation"])
        op = comms.get(launch["external_id"]) if launch else None
        if collective is None or op is None:
            continue
        dims, types = s[op["input_dims"]], s[op["input_types"]]
        first = dims[0] if dims else None
        while isinstance(first, list) and first and isinstance(first[0], list):  # a tensor list: its first
            first = first[0]
        itemsize = PROFILER_DTYPE_BYTES.get(types[0] if types else "", 4 if types and types[0] == "TensorList" else 0)
        if not first or not itemsize:
            continue
        size = math.prod(first) * itemsize * (ranks if collective == "all_gather" else 1)
        out[(collective, size)].append(k["dur_us"])
    return dict(out)


def tiny_message_kernel_us(collective: str, ranks: int) -> float:
    """NCCL's own latency for a tiny message on NVLink: ring/LL (tuning.cc baseLat + hops * hwLat)."""
    from kernelcast.predict.comm import NCCL_BASE_LATENCY_US, NCCL_HOP_LATENCY_US, ring_steps

    return NCCL_BASE_LATENCY_US[("ring", "ll")] + ring_steps(collective, ranks) * NCCL_HOP_LATENCY_US["nvlink"][("ring", "ll")]


def host_issue_from_tiny_messages(rows: list[dict], collectives, ranks: int, dtype: str = "float32") -> dict[str, float]:
    """Per collective: the sweep's median time over its tiny messages minus NCCL's latency for them, µs."""
    out = {}
    for c in collectives:
        tiny = [r["measured_us"] for r in rows if r["collective"] == c and r["dtype"] == dtype
                and r["bytes"] <= TINY_MESSAGE_BYTES]
        if tiny:
            out[c] = statistics.median(tiny) - tiny_message_kernel_us(c, ranks)
    return out


def post_launch_share(compact: dict) -> list[float]:
    """Per c10d collective op of a profile: its CPU time after the NCCL kernel's launch over its time before."""
    s = compact["strings"]
    launches = [r for r in _columns(compact, "runtime") if "LaunchKernel" in s[r["name"]]]
    out = []
    for op in _columns(compact, "cpu_ops"):
        if not s[op["name"]].startswith("c10d::"):
            continue
        start, end = op["ts_us"], op["ts_us"] + op["dur_us"]
        inside = [r for r in launches if r["thread"] == op["thread"] and start <= r["ts_us"] <= end]
        if inside and inside[-1]["ts_us"] > start:
            last = inside[-1]
            out.append((end - last["ts_us"] - last["dur_us"]) / (last["ts_us"] - start))
    return out


@dataclass(frozen=True)
class UnwaitedGroup:
    collective: str
    message_bytes: int
    kernel_us: float  # the repeated shortest duration: the device time
    samples: int
    host_issue_us: float  # sweep fit at this size minus the kernel's time


def unwaited_groups(kernels: dict[tuple[str, int], list[float]], fits: dict[str, CollectiveFit]) -> list[UnwaitedGroup]:
    out = []
    for (collective, size), durations in sorted(kernels.items()):
        fit = fits.get(collective)
        shortest = min(durations)
        repeats = sum(1 for d in durations if d <= shortest * NEAR_MIN_FRACTION)
        if fit is None or repeats < MIN_REPEATS or shortest >= fit.sweep_us(size):
            continue
        out.append(UnwaitedGroup(collective, size, shortest, len(durations), fit.sweep_us(size) - shortest))
    return out


# -- host speed ----------------------------------------------------------------------------------------------
def thread_role(name: str) -> str:
    """"autograd" for torch's autograd engine thread (backward), "main" for the Python thread, else "other"
    (the profiler's own threads)."""
    if "autograd" in name:
        return "autograd"
    return "main" if "python" in name else "other"


def reference_op_medians(compact: dict) -> dict[str, dict[str, float]]:
    """{thread role: {op: median duration, µs}} of the SPEED_REFERENCE_OPS called at least SPEED_MIN_CALLS times."""
    s = compact["strings"]
    durations: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for o in _columns(compact, "cpu_ops"):
        if s[o["name"]] in SPEED_REFERENCE_OPS:
            durations[thread_role(compact["threads"][o["thread"]])][s[o["name"]]].append(o["dur_us"])
    return {role: {op: statistics.median(v) for op, v in ops.items() if len(v) >= SPEED_MIN_CALLS}
            for role, ops in durations.items()}


def thread_speed_index(compact: dict, reference: dict) -> dict[int, float]:
    """{thread index: how much longer the reference ops took on it than in the reference profile} (1: same)."""
    mine, ref = reference_op_medians(compact), reference_op_medians(reference)
    out = {}
    for i, name in enumerate(compact["threads"]):
        role = thread_role(name)
        common = [op for op in mine.get(role, {}) if op in ref.get(role, {})]
        out[i] = math.exp(statistics.fmean(math.log(mine[role][op] / ref[role][op]) for op in common)) if common else 1.0
    return out


# -- FSDP2 hooks ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RangeSelf:
    name: str
    thread: int
    duration_us: float
    self_us: float
    copy_in_inputs: int  # inputs of an fsdp::all_gather_copy_in directly inside it (0: none)
    direct_children: int = 0  # events directly inside it
    nested_events: int = 0  # events inside it at any depth
    input_dims: object = None  # an op's input dims


def range_self_times(compact: dict, keep=lambda name: True) -> list[RangeSelf]:
    """Every kept range's (or CPU op's: C++ RECORD_FUNCTION ranges such as the reducer's are recorded as ops)
    duration and self time: minus the ops, runtime calls and ranges directly inside it, on its thread."""
    s = compact["strings"]
    by_thread: dict[int, list[tuple]] = defaultdict(list)
    for r in _columns(compact, "ranges"):
        by_thread[r["thread"]].append((r["ts_us"], r["dur_us"], "range", s[r["name"]], None))
    for o in _columns(compact, "cpu_ops"):
        by_thread[o["thread"]].append((o["ts_us"], o["dur_us"], "op", s[o["name"]], s[o["input_dims"]]))
    for r in _columns(compact, "runtime"):
        by_thread[r["thread"]].append((r["ts_us"], r["dur_us"], "runtime", s[r["name"]], None))
    out = []
    for thread, events in by_thread.items():
        events.sort(key=lambda e: (e[0], -e[1]))
        stack: list[list] = []  # [event, time of direct children, copy-in inputs, direct children, nested]

        def close(item):
            (ts, dur, kind, name, dims), children, inputs, direct, nested = item
            if kind in ("range", "op") and keep(name):
                out.append(RangeSelf(name, thread, dur, dur - children, inputs, direct, nested, dims))

        for event in events:
            while stack and event[0] >= stack[-1][0][0] + stack[-1][0][1]:
                close(stack.pop())
            if stack:
                stack[-1][1] += event[1]
                stack[-1][3] += 1
                for item in stack:
                    item[4] += 1
                if event[3] == COPY_IN and event[4]:
                    stack[-1][2] = len(event[4][0]) if isinstance(event[4][0], list) else 1
            stack.append([event, 0.0, 0, 0, 0])
        while stack:
            close(stack.pop())
    return out


@dataclass(frozen=True)
class HookPoint:
    config: str
    kind: str
    unit: str
    params: int
    self_us: float  # median over the profile's instances of this (kind, unit)
    per_step: float  # instances per step


def fsdp_hook_points(config: str, compact: dict, speed: dict[int, float] | None = None,
                     per_event_us: float = 0.0) -> list[HookPoint]:
    """Median self time per (kind, unit) of one FSDP2 profile, with the unit's parameter count; each range's
    self time less the profiler's per_event_us for each event directly inside it, divided by its thread's
    speed index (thread_speed_index) where given."""
    speed = speed or {}
    selfs = [dataclasses.replace(r, self_us=max(r.self_us - per_event_us * r.direct_children, 0.0)
                                 / speed.get(r.thread, 1.0))
             for r in range_self_times(compact, lambda n: fsdp_range_kind(n) is not None)]
    params: dict[str, int] = {}
    for r in selfs:
        kind, unit = fsdp_range_kind(r.name)
        if kind == "all_gather" and r.copy_in_inputs:
            params[unit] = r.copy_in_inputs
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in selfs:
        groups[fsdp_range_kind(r.name)].append(r.self_us)
    total = sum(params.values())
    steps = max(len(compact.get("steps", ())), 1)
    return [HookPoint(config, kind, unit, total if kind in PER_STEP_KINDS else params.get(unit, 0),
                      statistics.median(v), len(v) / steps) for (kind, unit), v in sorted(groups.items())]


@dataclass(frozen=True)
class HookFit:
    kind: str
    base_us: float
    per_param_us: float
    points: tuple[HookPoint, ...]

    def __call__(self, params: int) -> float:
        return self.base_us + self.per_param_us * params


def fit_hooks(points: list[HookPoint]) -> dict[str, HookFit]:
    """Per kind, base + per_param * P by least squares over the (config, unit) points (each a median over its
    instances); a negative slope (no parameter dependence resolved), or a root-only hook (one unit per model,
    too few to tell a slope), becomes a constant, the median, and a negative base a line through zero."""
    by_kind: dict[str, list[HookPoint]] = defaultdict(list)
    for p in points:
        by_kind[p.kind].append(p)
    out = {}
    for kind, pts in sorted(by_kind.items()):
        a, b = fit_line([(p.params, p.self_us) for p in pts])
        root_only = kind not in PER_STEP_KINDS and all(p.unit == ROOT_UNIT for p in pts)
        if b < 0 or len({p.params for p in pts}) < 2 or root_only:
            a, b = statistics.median(p.self_us for p in pts), 0.0
        elif a < 0:  # no fixed part resolved: proportional to the parameters
            a, b = 0.0, sum(p.params * p.self_us for p in pts) / sum(p.params ** 2 for p in pts)
        out[kind] = HookFit(kind, a, b, tuple(pts))
    return out


def step_hook_totals(points: list[HookPoint], fits: dict[str, HookFit]) -> dict[str, tuple[float, float]]:
    """Per config: (measured, predicted) self time of all its hooks in one step, µs (each (kind, unit) as many
    times per step as the profile ran it)."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for p in points:
        fit = fits.get(p.kind)
        out[p.config][0] += p.self_us * p.per_step
        out[p.config][1] += (fit(p.params) if fit else 0.0) * p.per_step
    return {k: (v[0], v[1]) for k, v in out.items()}


# -- the profiler's own time, FSDP2's copy ops ------------------------------------------------------------------
def profiler_us_per_event(profile_summary: dict, unprofiled_host_ms: float, compact: dict) -> float:
    """CPU µs the profiler adds per recorded event: a step's profiled time to its last launch minus its
    unprofiled one (validate_distributed.py's time_host), over the ops and runtime calls of a profiled step."""
    steps = max(len(compact.get("steps", ())), 1)
    events = (len(compact["cpu_ops"]) + len(compact["runtime"])) / steps
    profiled_ms = statistics.fmean(x for x in profile_summary["last_launch_ms"] if x is not None)
    return max(profiled_ms - unprofiled_host_ms, 0.0) * 1e3 / events


FSDP_COPY_OPS = {"fsdp::all_gather_copy_in": 0, "fsdp::split_with_sizes_copy": 3, "fsdp::chunk_cat": 0}  # -> the
# argument whose tensor list counts the tensors copied (all_gather_inputs, out, tensors)


def fsdp_copy_points(config: str, compact: dict, speed: dict[int, float] | None = None,
                     per_event_us: float = 0.0) -> list[HookPoint]:
    """Each FSDP2 copy op's CPU time (kind = the op, params = tensors it copies), less the profiler's
    per_event_us per nested event, at the reference host speed."""
    speed = speed or {}
    out = []
    for r in range_self_times(compact, lambda n: n in FSDP_COPY_OPS):
        dims = r.input_dims or []
        arg = dims[FSDP_COPY_OPS[r.name]] if len(dims) > FSDP_COPY_OPS[r.name] else []
        tensors = len(arg) if isinstance(arg, list) and arg and isinstance(arg[0], list) else 1
        cost = max(r.duration_us - per_event_us * r.nested_events, 0.0) / speed.get(r.thread, 1.0)
        out.append(HookPoint(config, r.name.replace("::", "."), "", tensors, cost, 1.0))
    return out


def median_points(points: list[HookPoint]) -> list[HookPoint]:
    """One point per (config, kind, tensors): the median, with how many it stands for."""
    groups: dict[tuple, list[HookPoint]] = defaultdict(list)
    for p in points:
        groups[(p.config, p.kind, p.params)].append(p)
    return [HookPoint(c, k, "", n, statistics.median(p.self_us for p in v), sum(p.per_step for p in v))
            for (c, k, n), v in sorted(groups.items())]


def fit_per_tensor(points: list[HookPoint]) -> dict[str, HookFit]:
    """Per op kind, base + per_tensor * tensors (HookFit's per_param) over the median points."""
    by_kind: dict[str, list[HookPoint]] = defaultdict(list)
    for p in median_points(points):
        by_kind[p.kind].append(p)
    out = {}
    for kind, pts in by_kind.items():
        a, b = fit_line([(p.params, p.self_us) for p in pts])
        if b < 0 or len({p.params for p in pts}) < 2:
            a, b = statistics.median(p.self_us for p in pts), 0.0
        elif a < 0:
            a, b = 0.0, sum(p.params * p.self_us for p in pts) / sum(p.params ** 2 for p in pts)
        out[kind] = HookFit(kind, a, b, tuple(pts))
    return out


# -- DDP reducer ---------------------------------------------------------------------------------------------
def reducer_self_times(compact: dict, speed: dict[int, float] | None = None,
                       per_event_us: float = 0.0) -> dict[str, list[float]]:
    """Self times of the reducer's ranges around each gradient copy: {"reducer_copy": [...], "grad_copy": [...]},
    less the profiler's per_event_us per event directly inside, divided by their thread's speed index."""
    wanted = (*REDUCER_COPY_RANGES, REDUCER_GRAD_RANGE)
    speed = speed or {}
    out: dict[str, list[float]] = {"reducer_copy": [], "grad_copy": []}
    for r in range_self_times(compact, lambda n: n in wanted):
        self_us = max(r.self_us - per_event_us * r.direct_children, 0.0)
        out["grad_copy" if r.name == REDUCER_GRAD_RANGE else "reducer_copy"].append(self_us / speed.get(r.thread, 1.0))
    return out
