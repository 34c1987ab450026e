"""`kernelcast measure`, and the one timing protocol measurements on a real GPU use (calibrate's
microbenchmarks and sweep, validate, the device scripts; calibrate/triton_grid.py still profiles its Triton
kernels itself): time a step honestly (needs a GPU).

- One call: flush_l2() before it where the inputs must come from HBM, then events_ms (CUDA events around each
  call, read after one synchronize).

- Step time: after warm-up, REPEATS timings of STEPS back-to-back steps between two CUDA events (the GPU queue
  stays full, as in a training loop), each divided by STEPS; the median and the spread are reported.
- Memory: memory_allocated() before one more step, max_memory_allocated() over it after
  reset_peak_memory_stats(), memory_reserved() after it.
- GPU kernel time and per-kernel durations: one more step under torch.profiler; every GPU work item (kernel,
  memset, memcpy) is attributed to the aten op that launched it, as the capture records ops, and to the module
  whose forward was running.
"""

from __future__ import annotations

import collections
import contextlib
import statistics
from dataclasses import dataclass, field
from typing import Callable, Iterator

from kernelcast import progress
from kernelcast.errors import KernelcastError

# Between calls the L2 cache is flushed by inverting a buffer larger than any GPU's L2 (as triton.testing.do_bench
# does), so small inputs are not served from a warm cache; the flush kernel's name keeps it out of kernel counts.
FLUSH_BYTES = 256 << 20
FLUSH_KERNEL = "bitwise_not"
_flush_buffer = None


def require_gpu() -> None:
    """Raise KernelcastError (one line, exit 2 from the CLI) where no CUDA GPU is visible."""
    import torch

    if not torch.cuda.is_available():
        raise KernelcastError("no CUDA GPU is visible here: calibrate, measure and validate run on a machine with "
                              "one (predict and capture do not need it)")


def flush_l2() -> None:
    """Evict the GPU's L2 cache: one bitwise_not over a FLUSH_BYTES buffer (allocated on first use)."""
    import torch

    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = torch.zeros(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    _flush_buffer.bitwise_not_()


def kernel_durations(call: Callable[[], object], repeats: int, flush: bool = True) -> list[list[tuple[str, float]]]:
    """Each of `repeats` calls' GPU work items as torch.profiler times them, [(name, µs)] in launch order per call,
    with the L2 flushed before each (flush_l2; its kernel left out). Two calls run first, unprofiled (lazy set-up,
    cuBLAS's handles). The items are split into calls evenly: a call that launches a varying number of kernels
    reads as the average split."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    call()
    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            if flush:
                flush_l2()
            call()
            torch.cuda.synchronize()
    items = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA and FLUSH_KERNEL not in e.name),
                   key=lambda e: e.time_range.start)
    per_call = max(1, len(items) // repeats)
    return [[(e.name, e.time_range.end - e.time_range.start) for e in items[r * per_call:(r + 1) * per_call]]
            for r in range(repeats)]


def events_ms(call: Callable[[], object], reps: int, flush: Callable[[], None] | None = None) -> list[float]:
    """ms of each of `reps` calls, each between two CUDA events (after `flush`, outside them, where given); the
    events are read after one synchronize at the end, so the calls queue as they would in a loop."""
    import torch

    pairs = []
    for _ in range(reps):
        if flush is not None:
            flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in pairs]

WARMUP_STEPS = 5
STEPS = 10
REPEATS = 5
AUTOCAST_CAST = "_to_copy"
MODULE_PREFIX = "module::"


@dataclass(frozen=True)
class KernelTime:
    op: str  # the aten op packet that launched it, e.g. "mm"
    module: str
    name: str
    duration_us: float
    launched_us: float = 0.0  # when the launching op started on the CPU (orders kernels as the ops ran)
    chain: tuple[str, ...] = ()  # every aten op on the launch stack, outermost first (re-attribution later)


@dataclass(frozen=True)
class MeasuredMemory:
    """torch.cuda's memory counters around one steady-state step (the memory model predicts the first three)."""

    allocated_before: int  # memory_allocated() before the step (resident)
    max_allocated: int  # max_memory_allocated() over the step, after reset_peak_memory_stats()
    reserved: int  # memory_reserved() after it
    allocated_after: int

    def to_json(self) -> dict:
        return {"allocated_before": self.allocated_before, "max_allocated": self.max_allocated,
                "reserved": self.reserved, "allocated_after": self.allocated_after}


@dataclass(frozen=True)
class Measurement:
    """What a real GPU did for one step. Measured, so never mixed up with a Prediction."""

    device: str
    torch: str
    step_ms: tuple[float, ...]  # per-step time of each repeat (REPEATS x STEPS back-to-back steps)
    kernels: tuple[KernelTime, ...]
    work_items: int  # GPU work items in the profiled step (attributed or not)
    notes: tuple[str, ...] = field(default_factory=tuple)
    memory: MeasuredMemory | None = None

    @property
    def step_ms_median(self) -> float:
        return statistics.median(self.step_ms)

    @property
    def step_ms_spread(self) -> tuple[float, float]:
        return min(self.step_ms), max(self.step_ms)

    @property
    def gpu_time_us(self) -> float:
        return sum(k.duration_us for k in self.kernels)

    def by_op(self) -> dict[str, tuple[int, float]]:
        out: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
        for k in self.kernels:
            out[k.op][0] += 1
            out[k.op][1] += k.duration_us
        return {op: (n, t) for op, (n, t) in out.items()}

    def to_json(self) -> dict:
        return {"device": self.device, "torch": self.torch, "step_ms": list(self.step_ms),
                "step_ms_median": self.step_ms_median, "step_ms_spread": list(self.step_ms_spread),
                "gpu_time_us": self.gpu_time_us, "work_items": self.work_items,
                "by_op": {op: {"kernels": n, "time_us": t} for op, (n, t) in self.by_op().items()},
                # [op, module, kernel name, µs, launch chain outermost first] (the chain lets a report re-attribute
                # kernels to the ops a capture recorded: report/measured.py)
                "kernels": [[k.op, k.module, k.name[:120], round(k.duration_us, 3), list(k.chain)]
                            for k in self.kernels],
                "memory": None if self.memory is None else self.memory.to_json()}


def packet(name: str) -> str:
    """"aten::mm" / "aten.mm.default" -> "mm"."""
    name = name.replace("aten::", "aten.")
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "aten" else name


@contextlib.contextmanager
def _module_ranges() -> Iterator[None]:
    """A profiler range per module forward, so kernels can name their module (global hooks, removed after)."""
    import torch
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    names: dict[int, str] = {}
    stack: list = []

    # Kept out of torch.compile: a compiled step whose graph breaks run modules eagerly would otherwise have
    # Dynamo trace these hooks as frames of their own, recompiling per module type until its recompile limit
    # (H200, torch 2.11: the zoo's BERT forward profiled 4737 kernels where the timed step ran 132).
    def pre(module, args):
        name = names.setdefault(id(module), type(module).__name__)
        for child_name, child in module.named_children():
            names.setdefault(id(child), f"{name}.{child_name}")
        scope = torch.autograd.profiler.record_function(MODULE_PREFIX + name)
        scope.__enter__()
        stack.append(scope)

    def post(module, args, output):
        if stack:
            stack.pop().__exit__(None, None, None)

    handles = [register_module_forward_pre_hook(torch.compiler.disable(pre)),
               register_module_forward_hook(torch.compiler.disable(post))]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _depth(event) -> int:
    depth = 0
    while event.cpu_parent is not None:
        event, depth = event.cpu_parent, depth + 1
    return depth


def _own_kernels(events) -> list:
    """(event, kernels it launched itself). The profiler sometimes lists the same kernels on an op and on its
    parent (seen for cuDNN convolutions); a parent keeps only kernels its sub-ops did not already claim."""
    from torch.autograd import DeviceType

    with_kernels = [e for e in events if e.device_type == DeviceType.CPU and e.kernels]
    claimed: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    own = []
    for event in sorted(with_kernels, key=_depth, reverse=True):
        keys = collections.Counter((k.name, round(k.duration, 3)) for k in event.kernels)
        budget = keys - claimed[id(event)]
        kernels = []
        for k in event.kernels:
            key = (k.name, round(k.duration, 3))
            if budget[key] > 0:
                budget[key] -= 1
                kernels.append(k)
        if kernels:
            own.append((event, kernels))
        parent = event.cpu_parent
        while parent is not None:
            claimed[id(parent)] += keys
            parent = parent.cpu_parent
    return own


def is_work_item(event) -> bool:
    """Whether a profiler event is GPU work (a kernel, memset or memcpy). The profiler also draws a device-side
    span for every record_function range that launched work (gpu_user_annotation): our module ranges, and
    torch.optim's "Optimizer.step#SGD.step", which every training step with an optimizer has. Those are not
    work; counting them had put one work item too many in each such step (all 33 of the zoo's, 2026-11-30)."""
    from torch.autograd import DeviceType

    return (event.device_type == DeviceType.CUDA and not getattr(event, "is_user_annotation", False)
            and not event.name.startswith(MODULE_PREFIX))


def work_item_us(events) -> float:
    """The summed durations (µs) of the GPU work items among profiler events (is_work_item), read off the
    device-side events themselves. The kernels `attribute` hands out can sum to more: a 6-layer bidirectional
    GRU's (cuDNN, 13 streams; H100, torch 2.11) summed 114.7 ms attributed against 38.2 ms of device events,
    the same 12310 work items (validation/probes/rnn_programs_two_profilers_h100.json)."""
    return sum(e.time_range.end - e.time_range.start for e in events if is_work_item(e))


def attribute(events, recorded_ops: set[str] | None = None) -> tuple[list[KernelTime], int]:
    """Each GPU work item -> (aten op, module). The op is the outermost aten op on the launch stack that a
    capture records (recorded_ops), or the innermost aten op when none is known. No kernel name is handed out
    more often than the device-side events hold it, to ops in the order they ran (by name alone: a CPU op's
    kernel list and the device events need not round a duration alike): the
    profiler listed a Llama-7B AdamW step's multi_tensor_apply kernels on its foreach ops 140 times over (379638
    attributed for 2576 work items; H100, torch 2.11, validation/h100/zoo_issue31_measured_h100.json.gz)."""
    items = [e for e in events if is_work_item(e)]
    total = len(items)
    budget = collections.Counter(e.name for e in items)
    out: list[KernelTime] = []
    for event, kernels in sorted(_own_kernels(events), key=lambda pair: pair[0].time_range.start):
        kept = []
        for k in kernels:
            if budget[k.name] > 0:
                budget[k.name] -= 1
                kept.append(k)
        kernels = kept
        if not kernels:
            continue
        chain, module = [], ""
        node = event
        while node is not None:
            if node.name.startswith("aten::"):
                chain.append(packet(node.name))
            elif node.name.startswith(MODULE_PREFIX) and not module:
                module = node.name[len(MODULE_PREFIX):]
            node = node.cpu_parent
        chain.reverse()  # outermost first
        known = [i for i, name in enumerate(chain) if recorded_ops is None or name in recorded_ops]
        if not chain:
            op = "(no aten op)"
        elif not known:
            op = chain[-1]
        elif AUTOCAST_CAST in chain[known[0] + 1:]:
            op = AUTOCAST_CAST  # autocast casts run inside the scope of the op they feed, as separate dispatches
        else:
            op = chain[known[0]] if recorded_ops is not None else chain[-1]
        out.extend(KernelTime(op, module, k.name, k.duration, event.time_range.start, tuple(chain))
                   for k in kernels)
    return sorted(out, key=lambda k: k.launched_us), total


def back_to_back_ms(call: Callable[[], object], steps: int, repeats: int,
                    after_each: Callable[[], None] | None = None) -> list[float]:
    """ms per step of `repeats` timings, each of `steps` back-to-back calls between two CUDA events (the GPU
    queue stays full, as in a training loop), divided by `steps`. `after_each` runs after each timing."""
    import torch

    step_ms = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            call()
        end.record()
        torch.cuda.synchronize()
        step_ms.append(start.elapsed_time(end) / steps)
        if after_each is not None:
            after_each()
    return step_ms


def synced_ms(call: Callable[[], object], n: int) -> list[float]:
    """ms of `n` single calls, each between torch.cuda.synchronize() calls on a host timer (what a user's timer
    around a synchronized step reads)."""
    import time

    import torch

    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def measure_memory(step: Callable, args: tuple) -> MeasuredMemory:
    """One more step between reset_peak_memory_stats() and max_memory_allocated() (as scripts/device/zoo_measure.py)."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step(*args)
    torch.cuda.synchronize()
    return MeasuredMemory(before, torch.cuda.max_memory_allocated(), torch.cuda.memory_reserved(),
                          torch.cuda.memory_allocated())


def measure_step(step: Callable, args: tuple, recorded_ops: set[str] | None = None,
                 warmup: int = WARMUP_STEPS, steps: int = STEPS, repeats: int = REPEATS,
                 trace_path: str | None = None) -> Measurement:
    """Time `step(*args)` on the GPU; `trace_path` also saves the profiled step as a Chrome/Perfetto trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    require_gpu()
    progress.stage("warm-up steps", total=warmup)
    for _ in range(warmup):
        step(*args)
        progress.advance()
    torch.cuda.synchronize()
    progress.stage(f"timing {repeats} x {steps} back-to-back steps", total=repeats)
    step_ms = back_to_back_ms(lambda: step(*args), steps, repeats, progress.advance)
    progress.stage("peak memory of one step")
    memory = measure_memory(step, args)
    progress.stage("profiling one step (per-kernel times)")
    with _module_ranges(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(*args)
        torch.cuda.synchronize()
    if trace_path:
        from kernelcast.outputs import replaced_atomically

        with replaced_atomically(trace_path) as tmp:
            prof.export_chrome_trace(str(tmp))
    kernels, total = attribute(prof.events(), recorded_ops)
    return Measurement(device=torch.cuda.get_device_name(), torch=torch.__version__, step_ms=tuple(step_ms),
                       kernels=tuple(kernels), work_items=total, memory=memory)
