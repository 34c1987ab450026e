"""Capture one rank of an N-rank distributed step on one CPU: torch's fake process group, scoped to the capture.

torch ships a "fake" c10d backend for tests: every collective returns at once and moves no data, but the
process group has N ranks, so DDP, FSDP2 (fully_shard) and DTensor tensor parallelism size their buckets,
shards and collectives as rank 0 of N would. The Recorder sees the collectives as aten-level ops in the
c10d namespace (c10d.allreduce_, DDP / FSDP2 / plain torch.distributed calls) or the _c10d_functional one
(_c10d_functional.all_reduce + wait_tensor, DTensor); this module adds what the record cannot say by itself:
the size of each collective's process group, and the NCCL stream it runs on (COMM_STREAM).

What had to be bent to run these on fake CUDA tensors, each only for the length of the capture:
- The fake group's Work objects complete with no result. DDP's reducer reads the all-reduced bucket from the
  Work's future, so collectives get a Work whose future holds their own output tensors, as NCCL's do.
- DDP checks parameter shapes across ranks by reading tensor data; fake tensors have none, and the fake
  group's ranks are one process, so the check is skipped. DDP's logger times the first ten iterations with a
  CUDA timer that a CPU-only torch does not have; that logging (not part of the step's GPU work) is skipped.
- DDP puts every parameter in one bucket for its first step and rebuilds its buckets at the start of the
  second, in the order gradients became ready (first bucket capped at 1 MiB, the others at bucket_cap_mb,
  25 MiB by default), broadcasting the new bucket indices, whose values fake tensors do not have. Instead
  DDP builds those caps' buckets at construction, over its parameters in reverse registration order (what it
  does itself with find_unused_parameters=True), and the rebuild is skipped. For a model whose layers run in
  registration order the two orders differ only where a parameter is used out of order (tied embeddings).
- DeviceMesh looks up this rank's coordinates in a CPU tensor of ranks (nonzero on it); under fake tensors
  that tensor has no values, so the mesh is built from the identity rank map (what init_device_mesh builds)
  with fake tensors switched off.
- FSDP2 orders its copies and collectives with torch.cuda streams and events. Where the capture's torch.cuda
  has no streams (a CPU-only torch), stand-in streams and events that order nothing are used, and the ops
  FSDP2 issues inside `torch.cuda.stream(side_stream)` (its all-gather copy-in, reduce-scatter copy-in and
  post-reduce ops) are put on COMM_STREAM beside its collectives: one side stream where FSDP2 has three. The
  predict stage orders the streams by data flow (predict/overlap.py).
- A workload's own dist.init_process_group() (written for torchrun) is skipped: the fake group is in place.

FSDP2 names each of its hooks with a profiler range (torch.profiler.record_function: "FSDP::pre_forward
(layers.0)", "FSDP::all_gather (layers.0)", "FSDP::post_backward_reduce (layers.0)", ...). Where they begin and
end is recorded (RANGE_BEGIN_OP / RANGE_END_OP markers): the predict stage prices the hooks' Python from the
device (predict/parallel_host.py), not from the capture machine, which runs them on fake tensors and stand-in
streams, and does not time Python in backward at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from typing import Any, Iterator
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from kernelcast.errors import CaptureError
from kernelcast.records import COMM_STREAM, RANGE_BEGIN_OP, RANGE_END_OP, Capture, OpRecord

from .recorder import runs_as_local_ops

FAKE_BACKEND = "fake"  # torch.testing._internal.distributed.fake_pg registers it
# Namespaces of torch's collective ops: c10d (ProcessGroup calls: torch.distributed.*, DDP, FSDP2) and
# _c10d_functional (functional collectives: DTensor, torch.compile).
COLLECTIVE_NAMESPACES = ("c10d", "_c10d_functional")
# Functional-collective ops that only wait for one issued earlier: they run on the compute stream.
WAIT_OPS = {"_c10d_functional.wait_tensor.default"}
# Profiler ranges whose begin and end are recorded: FSDP2's hooks (torch/distributed/fsdp/_fully_shard).
RECORDED_RANGE_PREFIXES = ("FSDP::",)
RANGE_ENTER = "profiler._record_function_enter_new.default"
RANGE_EXIT = "profiler._record_function_exit._RecordFunction"

RANK0_NOTE = ("captured as rank 0 of {n} on torch's fake process group: collectives are recorded with their "
              "sizes and process-group sizes; no data is exchanged")
WORK_NOTE = ("the fake process group's Work objects carry no result; kernelcast completed them with each "
             "collective's own output, as NCCL's are, so DDP's default all-reduce hook runs as on GPUs")
MESH_NOTE = "DeviceMesh was built from the identity rank map (rank i at position i), as init_device_mesh builds it"
STREAM_NOTE = ("this torch has no CUDA streams: FSDP2's side streams were stood in for by one, the NCCL stream, "
               "which its copy-in, collective and post-reduce ops were put on")
DDP_BUCKETS_NOTE = ("DDP's gradient buckets were built at construction with the caps its second-step rebuild uses "
                    "(first 1 MiB, then bucket_cap_mb), over parameters in reverse registration order; the rebuild "
                    "itself (gradient-ready order) needs bucket indices fake tensors do not hold")
INIT_NOTE = "the workload's dist.init_process_group() was skipped: the capture runs in a fake process group"


def check_world_size(world_size: Any) -> int:
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise CaptureError(f"world size must be a whole number of ranks, 1 or more (got {world_size!r})")
    return world_size


@contextlib.contextmanager
def fake_process_group(world_size: int) -> Iterator[None]:
    """torch.distributed initialised with the fake backend as rank 0 of `world_size`, torn down afterwards.
    World size 1 changes nothing: the step is captured as a single-GPU step, as before."""
    check_world_size(world_size)
    if world_size == 1:
        yield
        return
    import torch.distributed as dist

    if not dist.is_available():
        raise CaptureError("this torch was built without torch.distributed; a world size above 1 needs it")
    if dist.is_initialized():
        raise CaptureError("a torch.distributed process group is already initialised in this process; "
                           "kernelcast captures a distributed step in a fake process group of its own")
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    dist.init_process_group(FAKE_BACKEND, store=FakeStore(), rank=0, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


# -- what a collective's record cannot say by itself ----------------------------------------------------
def _bound_args(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> dict[str, Any]:
    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


def group_size_of(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> int:
    """Ranks in the process group a collective runs in; 0 for an op with no group (wait_tensor)."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    bound = _bound_args(func, args, kwargs)
    if isinstance(bound.get("group_size"), int):
        return bound["group_size"]
    group = bound.get("process_group")
    if group is not None:
        return torch.distributed.ProcessGroup.unbox(group).size()
    name = bound.get("group_name")
    if isinstance(name, str):
        return _resolve_process_group(name).size()
    return 0


def _completed_work(result: Any) -> Any:
    """A Work whose future holds the result tensors, as ProcessGroupNCCL's does once the collective is done."""
    fut: torch.futures.Future = torch.futures.Future()
    fut.set_result(result)
    return torch._C._distributed_c10d._create_work_from_future(fut).boxed()


def _with_result_in_work(out: Any) -> Any:
    """c10d ops return (tensors, Work); the fake group's Work holds None, which DDP's reducer rejects."""
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], torch.ScriptObject):
        tensors = out[0]
        if isinstance(tensors, torch.Tensor) or (isinstance(tensors, list) and tensors
                                                  and all(isinstance(t, torch.Tensor) for t in tensors)):
            return tensors, _completed_work(tensors)
    return out


class CollectiveMode(TorchDispatchMode):
    """Pushed above the Recorder: sees each collective before it is recorded, and notes its group size by
    the index of the record the Recorder made of it."""

    def __init__(self, recorder: Any) -> None:
        super().__init__()
        self._recorder = recorder  # appends an OpRecord to recorder.ops for each op it records
        self.group_sizes: dict[int, int] = {}
        self.side_stream_ops: set[int] = set()  # issued inside a stand-in side stream (FSDP2's)
        self.side_stream_depth = 0
        self.completed_work = False
        # per thread, the names of the profiler ranges open now, innermost last (record_function blocks nest; a
        # range's exit gets a new Python wrapper of its handle, so exits are matched by nesting, not identity)
        self._open_ranges: dict[int, list[str]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if runs_as_local_ops(types):  # as the Recorder does: DTensor's local ops come back through here
            return NotImplemented
        kwargs = kwargs or {}
        if func.namespace == "profiler":
            return self._range(func, args, kwargs)
        recorded = self._recorder.ops
        before = len(recorded)
        if func.namespace not in COLLECTIVE_NAMESPACES:
            out = func(*args, **kwargs)
            if self.side_stream_depth and len(recorded) > before:
                self.side_stream_ops.update(range(before, len(recorded)))
            return out
        out = func(*args, **kwargs)
        recorded_it = len(recorded) == before + 1 and recorded[-1].op == str(func)
        if recorded_it and str(func) not in WAIT_OPS:
            self.group_sizes[before] = group_size_of(func, args, kwargs)
        if func.namespace == "c10d":
            new = _with_result_in_work(out)
            self.completed_work |= new is not out
            out = new
        return out


    def _range(self, func, args, kwargs):
        """record_function's enter and exit: markers where a recorded range begins and ends."""
        out = func(*args, **kwargs)
        stack = self._open_ranges.setdefault(threading.get_ident(), [])
        if str(func) == RANGE_ENTER:
            name = args[0] if args and isinstance(args[0], str) else ""
            stack.append(name)
            if name.startswith(RECORDED_RANGE_PREFIXES):
                self._recorder.record_range(RANGE_BEGIN_OP, name)
        elif str(func) == RANGE_EXIT and stack:
            name = stack.pop()
            if name.startswith(RECORDED_RANGE_PREFIXES):
                self._recorder.record_range(RANGE_END_OP, name)
        return out


def mark_collectives(ops: tuple[OpRecord, ...], group_sizes: dict[int, int],
                     side_stream_ops: set[int] = frozenset()) -> tuple[OpRecord, ...]:
    """Collectives with their group size, on the NCCL stream, and the ops issued on stand-in side streams
    there too; every other op unchanged."""
    out = []
    for op in ops:
        if op.index in group_sizes:
            op = dataclasses.replace(op, stream=COMM_STREAM, group_size=group_sizes[op.index])
        elif op.index in side_stream_ops:
            op = dataclasses.replace(op, stream=COMM_STREAM)
        out.append(op)
    return tuple(out)


# -- making torch.distributed code run on fake tensors ----------------------------------------------------
def _ddp_buckets_as_rebuilt(original_init_helper):
    """DDP._ddp_init_helper, bucketing with the caps DDP's rebuild uses where it would make one bucket."""
    import torch.distributed as dist

    def init_helper(self, *args, **kwargs):
        cap = self.bucket_bytes_cap
        config = getattr(self, "_bucket_config", None)  # torch >= 2.13; before it, the first bucket is 1 MiB
        first = getattr(config, "first_bucket_bytes_cap", min(dist._DEFAULT_FIRST_BUCKET_BYTES, cap))
        assign = dist._compute_bucket_assignment_by_size

        def sized(parameters, limits, *rest, **kw):
            if list(limits) == [sys.maxsize]:  # DDP's "one bucket until the rebuild"
                limits = [first, cap] if first < cap else [cap]
            return assign(parameters, limits, *rest, **kw)

        with mock.patch.object(dist, "_compute_bucket_assignment_by_size", sized):
            return original_init_helper(self, *args, **kwargs)

    return init_helper


def _identity_rank_map(value: Any) -> Any:
    """A fake tensor of ranks has no values; init_device_mesh's is arange(n) in the mesh's shape."""
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(value, FakeTensor):
        return torch.arange(value.numel(), dtype=torch.int).view(tuple(value.shape))
    return value


def _mesh_init_without_fakes(original, notes: set[str]):
    def init(self, *args, **kwargs):
        with _disable_current_modes():
            new_args = tuple(_identity_rank_map(a) for a in args)
            new_kwargs = {k: _identity_rank_map(v) if k in ("mesh", "_rank_map") else v for k, v in kwargs.items()}
            changed = any(a is not b for a, b in zip(new_args, args)) or any(
                new_kwargs[k] is not kwargs[k] for k in kwargs)
            if changed:
                notes.add(MESH_NOTE)
            original(self, *new_args, **new_kwargs)

    return init


class _StandInEvent:
    """torch.cuda.Event where this torch has none: ordering is left to the predict stage."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def record(self, stream=None) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass


class _StandInStream:
    """torch.cuda.Stream where this torch has none (a CPU-only build)."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def wait_stream(self, stream) -> None:
        pass

    def wait_event(self, event) -> None:
        pass

    def record_event(self, event=None):
        return event if event is not None else _StandInEvent()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def is_capturing(self) -> bool:  # optimizers ask before a step whether a CUDA graph is being captured
        return False


_DEFAULT_STREAM = _StandInStream()


def _cuda_has_streams() -> bool:
    try:
        torch.cuda.current_stream()
        torch.cuda.Stream()
    except (RuntimeError, AttributeError, AssertionError):
        return False
    return True


@contextlib.contextmanager
def _stand_in_streams(notes: set[str], mode: CollectiveMode) -> Iterator[None]:
    if _cuda_has_streams():
        yield
        return

    class Stream(_StandInStream):
        def __init__(self, *args, **kwargs) -> None:
            notes.add(STREAM_NOTE)  # only a step that makes side streams (FSDP2) needs saying so

    @contextlib.contextmanager
    def on_stream(stream=None) -> Iterator[None]:
        side = isinstance(stream, Stream)
        mode.side_stream_depth += side
        try:
            yield
        finally:
            mode.side_stream_depth -= side

    patches = {"Stream": Stream, "Event": _StandInEvent, "current_stream": lambda device=None: _DEFAULT_STREAM,
               "default_stream": lambda device=None: _DEFAULT_STREAM, "stream": on_stream}
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.multiple(torch.cuda, **patches))
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None and hasattr(accelerator, "current_stream"):
            stack.enter_context(mock.patch.object(accelerator, "current_stream", lambda device=None: _DEFAULT_STREAM))
        yield


class DistributedCapture:
    """What a capture of world size N adds: the collective mode, the scoped adaptations, and the notes."""

    def __init__(self, world_size: int, recorder: Any) -> None:
        self.world_size = world_size
        self.mode = CollectiveMode(recorder) if recorder is not None else None
        self.notes: set[str] = set()

    def finish(self, capture: Capture) -> Capture:
        if self.mode is None:
            return capture
        if self.mode.completed_work:
            self.notes.add(WORK_NOTE)
        notes = tuple(sorted({*capture.notes, *self.notes, RANK0_NOTE.format(n=self.world_size)}))
        ops = mark_collectives(capture.ops, self.mode.group_sizes, self.mode.side_stream_ops)
        return dataclasses.replace(capture, ops=ops, notes=notes, world_size=self.world_size)


@contextlib.contextmanager
def distributed_capture(world_size: int, recorder: Any) -> Iterator[DistributedCapture]:
    """Entered inside the capture session (so its mode sits above the Recorder); a no-op for world size 1."""
    if world_size == 1:
        yield DistributedCapture(1, None)
        return
    import torch.distributed as dist
    import torch.nn.parallel.distributed as ddp_module
    from torch.distributed.device_mesh import DeviceMesh

    state = DistributedCapture(world_size, recorder)

    def skip_init(*args, **kwargs) -> None:
        state.notes.add(INIT_NOTE)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(ddp_module, "_verify_param_shape_across_processes",
                                              lambda *args, **kwargs: None))
        stack.enter_context(mock.patch.object(dist.Logger, "set_runtime_stats_and_log", lambda self: None))

        def keep_buckets(reducer) -> bool:
            state.notes.add(DDP_BUCKETS_NOTE)
            return False  # "not rebuilt"

        stack.enter_context(mock.patch.object(dist.Reducer, "_rebuild_buckets", keep_buckets))
        DDP = ddp_module.DistributedDataParallel
        stack.enter_context(mock.patch.object(DDP, "_ddp_init_helper", _ddp_buckets_as_rebuilt(DDP._ddp_init_helper)))
        stack.enter_context(mock.patch.object(DeviceMesh, "__init__",
                                              _mesh_init_without_fakes(DeviceMesh.__init__, state.notes)))
        stack.enter_context(mock.patch.object(dist, "init_process_group", skip_init))
        stack.enter_context(_stand_in_streams(state.notes, state.mode))
        if torch._C._get_accelerator().type != "cuda":
            # FSDP2 builds its default mesh on torch._C._get_accelerator(), "cpu" in a CPU-only torch; the
            # captured step runs on CUDA.
            cuda = torch.device("cuda")
            stack.enter_context(mock.patch.object(torch._C, "_get_accelerator", lambda: cuda))
        stack.enter_context(state.mode)
        yield state
