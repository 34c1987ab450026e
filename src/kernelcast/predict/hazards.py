"""Stream-ordering hazards in a captured step, found without a GPU (issue 37).

Work queued on one CUDA stream runs in order; work on two streams runs in any order unless something orders it:
an event recorded on one and waited on by the other (`wait_event`, `wait_stream`, which torch implements as a
record and a wait), or the host waiting for a stream (`synchronize`, `.item()`, a blocking copy) before it queues
the later work. This is the happens-before relation PyTorch's CUDA Stream Sanitizer (torch/cuda/_sanitizer.py)
checks while a program runs on a GPU; here it is checked on the capture, which records every op's stream, every
event record and wait, the host's syncs, each tensor's storage, `record_stream`, and when each storage is freed.

Each stream keeps a vector clock (Lamport 1978; Fidge and Mattern 1988): its own count of queued ops, and the
latest count of every other stream it is ordered after. An access on stream B to data last written on stream A
at count n is ordered after that write when B's clock holds A >= n.

Three kinds, as the issue names them:
- unordered-read: an op on stream B reads a storage last written on stream A with nothing ordering the two;
- unordered-write: an op on stream B writes a storage that stream A read or wrote with nothing ordering them;
- freed-while-in-use: a storage allocated on stream A, used on stream B, is freed with no `record_stream(B)`,
  and A writes a newly allocated block before anything orders it after B's use: the caching allocator may hand
  the freed block to that allocation while B's kernel still reads or writes it (c10/cuda/CUDACachingAllocator.cpp
  frees a block to its allocation stream's pool at once; record_stream defers that until the other stream's use
  ends). FSDP2 frees its all-gather outputs early and is safe this way: its all-gather stream waits for the
  compute stream before the next all-gather allocates. The step is walked twice, as a loop runs it, so a block
  freed at the end of one step and reused by the next is seen.

A storage's history starts again when it is allocated (the capture's MemoryTrace gives where). Views record no
access: their data is read by the ops that use them. Collectives (the capture's COMM_STREAM) are not checked:
ProcessGroupNCCL orders its stream itself (the NCCL stream waits for the issuing stream before each collective, and
Work.wait() makes the issuing stream wait for it), with events the capture does not record; DDP and FSDP2 wait on
their works before using what the collectives wrote.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass

from kernelcast.records import (COMM_STREAM, HOST_OP_PREFIX, RECORD_EVENT_OP, RECORD_STREAM_OP, WAIT_EVENT_OP,
                                Capture, Hazard, OpRecord, TensorMeta, stream_name)

UNORDERED_READ = "unordered-read"
UNORDERED_WRITE = "unordered-write"
FREED_WHILE_IN_USE = "freed-while-in-use"
# Host syncs that wait for every stream (torch.cuda.synchronize); the others wait for the stream they were issued
# on (a blocking copy, .item(), Stream.synchronize), which orders that stream before all later work.
DEVICE_SYNCS = frozenset({"synchronize"})
VIEW_TAG = "view"

FIXES = {
    UNORDERED_READ: "call torch.cuda.current_stream().wait_stream({producer}) (or wait on an event recorded after "
                    "the write) before this line",
    UNORDERED_WRITE: "make this stream wait for {producer} (wait_stream / wait_event) before this line",
    FREED_WHILE_IN_USE: "call tensor.record_stream({consumer}) after its use there, or make {alloc} wait for "
                        "that stream (wait_stream) before its next allocation",
}


@dataclass(frozen=True)
class _Access:
    stream: int
    count: int  # the stream's own count at the access
    op: int  # index of the op in the capture


def _the_stream(stream: int) -> str:
    """A stream in a sentence: "the default stream", "side stream 2" (records.stream_name)."""
    return ("the " if stream == 0 else "") + stream_name(stream)


class _Clocks:
    """Vector clocks per stream, and each recorded event's snapshot."""

    def __init__(self) -> None:
        self.of: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.events: dict[int, dict[int, int]] = {}
        self.host_done: dict[int, int] = {}  # what the host has waited for so far, per stream

    def tick(self, stream: int) -> int:
        clock = self.of[stream]
        clock[stream] += 1
        return clock[stream]

    def ordered(self, stream: int, access: _Access) -> bool:
        """Whether `stream`'s next op is ordered after `access`."""
        return access.stream == stream or self.of[stream][access.stream] >= access.count

    def join(self, stream: int, other: dict[int, int]) -> None:
        clock = self.of[stream]
        for s, n in other.items():
            if n > clock[s]:
                clock[s] = n

    def host_waits_for(self, streams: list[int]) -> None:
        """The host waited for these streams: every later op on any stream is ordered after their work."""
        done: dict[int, int] = defaultdict(int)
        for s in streams:
            for t, n in self.of[s].items():
                done[t] = max(done[t], n)
        for s in list(self.of):
            self.join(s, done)
        self.host_done = dict(done)

    def for_new_stream(self, stream: int) -> None:
        """A stream first used after a host wait starts ordered after what the host waited for."""
        if stream not in self.of and self.host_done:
            self.join(stream, self.host_done)


def _tensors(op: OpRecord) -> list[TensorMeta]:
    return op.tensors_in() + op.tensors_out()


def _gpu_storages(tensors) -> set[int]:
    return {t.storage for t in tensors if t.on_gpu and t.storage}


def accesses(op: OpRecord) -> tuple[set[int], set[int]]:
    """(storages read, storages written) by an op: it writes its outputs' storages (an in-place op's output is
    its input's storage) and reads its other tensor arguments'."""
    written = _gpu_storages(op.tensors_out())
    read = _gpu_storages(op.tensors_in()) - written
    return read, written


def find_hazards(capture: Capture) -> tuple[Hazard, ...]:
    """The step's stream-ordering hazards, in the order they happen; () for a step on one stream.

    Raises nothing: an op with no tensors or an unknown marker is passed over."""
    ops = capture.ops
    if len({op.stream for op in ops if not op.op.startswith(HOST_OP_PREFIX)} - {COMM_STREAM} | {0}) < 2:
        return ()
    allocs_before, frees_before, alloc_stream = _storage_events(capture)
    clocks = _Clocks()
    last_write: dict[int, _Access] = {}
    reads: dict[int, list[_Access]] = defaultdict(list)
    uses: dict[int, list[_Access]] = defaultdict(list)  # every access, for the free check
    protected: dict[int, set[int]] = defaultdict(set)  # record_stream's streams per storage
    out: list[Hazard] = []
    seen: set[tuple] = set()

    def report(kind: str, first: _Access, second: _Access, tensor: TensorMeta | None) -> None:
        """first: the earlier access (the write, or for freed-while-in-use the use on the other stream); second:
        the later one (the unordered access, or the op the storage was freed before, on its allocation stream)."""
        first_op, second_op = ops[first.op], ops[min(second.op, len(ops) - 1)]
        where = (kind, first_op.source, second_op.source, first.stream, second.stream)
        if where in seen:  # one report per pair of lines and streams
            return
        seen.add(where)
        fix = FIXES[kind].format(producer=_stream_expr(first.stream), consumer=_stream_expr(first.stream),
                                 alloc=_the_stream(second.stream))
        out.append(Hazard(kind=kind, shape=tuple(tensor.shape) if tensor else (), dtype=tensor.dtype if tensor else "",
                          first_op=first_op.op, first_source=first_op.source, first_stream=first.stream,
                          second_op=second_op.op, second_source=second_op.source, second_stream=second.stream,
                          fix=fix, first_index=first.op, second_index=min(second.op, len(ops) - 1)))

    fresh: set[int] = set()  # storages allocated since their last write: a block from their stream's pool
    pending: list[tuple[int, int, _Access, TensorMeta | None]] = []  # (storage, its stream, a use elsewhere, tensor)
    # Twice through the step: a training loop runs it again, and a block freed at the end of one step is handed
    # out by the next step's first allocation on its stream (the second pass's reports name the same lines).
    for _ in range(STEADY_STATE_PASSES):
        for i, op in enumerate(ops):
            for storage in allocs_before.get(i, ()):  # a new block: its history starts here
                for table in (last_write, reads, uses, protected):
                    table.pop(storage, None)
                fresh.add(storage)
            for storage in frees_before.get(i, ()):
                pending.extend(_unordered_uses(storage, alloc_stream.get(storage, 0), uses, protected, clocks, ops))
                for table in (last_write, reads, uses):
                    table.pop(storage, None)
            _step_op(op, i, clocks, protected, last_write, reads, uses, fresh, pending, alloc_stream, report)
        for storage in frees_before.get(len(ops), ()):  # freed as the step returned
            pending.extend(_unordered_uses(storage, alloc_stream.get(storage, 0), uses, protected, clocks, ops))
            for table in (last_write, reads, uses):
                table.pop(storage, None)
    return tuple(out)


# Passes over the step's ops: the second is the next step of the loop, where blocks freed in the first are reused.
STEADY_STATE_PASSES = 2


def _step_op(op: OpRecord, i: int, clocks: _Clocks, protected, last_write, reads, uses, fresh: set[int],
             pending: list, alloc_stream: dict[int, int], report) -> None:
    """One op: an event record or wait, a record_stream, a host sync, or an access checked and logged."""
    stream = op.stream
    clocks.for_new_stream(stream)
    if op.op == RECORD_EVENT_OP:
        clocks.events[op.args.get("event", 0)] = dict(clocks.of[stream])
        return
    if op.op == WAIT_EVENT_OP:
        clocks.join(stream, clocks.events.get(op.args.get("event", 0), {}))
        return
    if op.op == RECORD_STREAM_OP:
        protected[op.args.get("storage", 0)].add(op.args.get("stream", 0))
        return
    if op.sync:
        clocks.host_waits_for(list(clocks.of) if op.sync in DEVICE_SYNCS else [stream])
    if op.op.startswith(HOST_OP_PREFIX) or op.parent >= 0 or VIEW_TAG in op.tags or stream == COMM_STREAM:
        return
    read, written = accesses(op)
    if not read and not written:
        return
    count = clocks.tick(stream)
    here = _Access(stream, count, i)
    metas = {t.storage: t for t in _tensors(op)}
    for storage in read:
        w = last_write.get(storage)
        if w is not None and not clocks.ordered(stream, w):
            report(UNORDERED_READ, w, here, metas.get(storage))
    for storage in written:
        for prior in ([last_write[storage]] if storage in last_write else []) + reads.get(storage, []):
            if not clocks.ordered(stream, prior):
                report(UNORDERED_WRITE, prior, here, metas.get(storage))
    if any(s in fresh and alloc_stream.get(s, stream) == stream for s in written):
        # this op writes a block just taken from its stream's pool: a block freed there while another stream's
        # use was still unordered may be this one
        left = []
        for entry in pending:
            freed, freed_stream, use, tensor = entry
            if freed_stream == stream and not clocks.ordered(stream, use):
                report(FREED_WHILE_IN_USE, use, here, tensor)  # once: this block is handed out now
            elif not clocks.ordered(freed_stream, use):
                left.append(entry)
        pending[:] = left
    fresh.difference_update(written)
    for storage in read:
        reads[storage].append(here)
        uses[storage].append(here)
    for storage in written:
        last_write[storage] = here
        reads.pop(storage, None)
        uses[storage].append(here)


def _unordered_uses(storage: int, alloc: int, uses, protected, clocks: _Clocks, ops) -> list:
    """A storage freed now: its uses on streams other than its allocation stream that record_stream does not
    cover and the allocation stream is not yet ordered after, as (storage, stream, use, tensor)."""
    out = []
    for use in uses.get(storage, ()):
        if use.stream == alloc or use.stream in protected.get(storage, ()) or clocks.ordered(alloc, use):
            continue
        tensor = next((t for t in _tensors(ops[use.op]) if t.storage == storage), None)
        out.append((storage, alloc, use, tensor))
    return out


def _stream_expr(stream: int) -> str:
    return "torch.cuda.default_stream()" if stream == 0 else f"<side stream {stream}>"


def _storage_events(capture: Capture) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, int]]:
    """({op index: storages allocated before it}, {op index: storages freed before it}, {storage: the stream it
    was allocated on}) over the recorded step, from the capture's MemoryTrace; empty without one."""
    allocs: dict[int, list[int]] = defaultdict(list)
    frees: dict[int, list[int]] = defaultdict(list)
    streams: dict[int, int] = {}
    trace = capture.memory
    if trace is None:
        return allocs, frees, streams
    by_id = {a.id: a for a in trace.allocations}
    for a in trace.allocations:
        if a.storage:
            streams.setdefault(a.storage, a.stream)
    for alloc_id, position in trace.events[trace.step_start:trace.step_end]:
        a = by_id.get(abs(alloc_id))
        if a is None or not a.storage:
            continue
        if alloc_id > 0:
            allocs[position].append(a.storage)
            streams[a.storage] = a.stream
        else:
            frees[position].append(a.storage)
    return allocs, frees, streams


def with_wait(capture: Capture, hazard: Hazard) -> Capture | None:
    """The capture with an unordered hazard's fix applied: an event recorded on the producer's stream right after
    its op and waited on by the consumer's stream right before its op (what wait_stream queues); None for a
    freed-while-in-use hazard (record_stream moves no kernel) or one without op indexes. The memory trace is left
    out: its positions are the unfixed step's."""
    if hazard.kind not in (UNORDERED_READ, UNORDERED_WRITE) or hazard.first_index < 0 or hazard.second_index < 0:
        return None
    event = max([op.args.get("event", 0) for op in capture.ops if op.op in (RECORD_EVENT_OP, WAIT_EVENT_OP)],
                default=0) + 1
    record = (hazard.first_index, RECORD_EVENT_OP, hazard.first_stream)
    wait = (hazard.second_index - 1, WAIT_EVENT_OP, hazard.second_stream)  # after the op before the consumer
    inserts: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for after, op_name, stream in (record, wait):
        inserts[after].append((op_name, stream))
    new_index: dict[int, int] = {}
    order: list = []
    for marker in inserts.get(-1, ()):
        order.append(marker)
    for op in capture.ops:
        new_index[op.index] = len(order)
        order.append(op)
        for marker in inserts.get(op.index, ()):
            order.append(marker)
    ops = []
    for i, item in enumerate(order):
        if isinstance(item, OpRecord):
            ops.append(dataclasses.replace(item, index=i, parent=new_index.get(item.parent, -1)))
        else:
            op_name, stream = item
            ops.append(OpRecord(index=i, op=op_name, args={"event": event}, outputs=(), tags=("host",),
                                stream=stream))
    return dataclasses.replace(capture, ops=tuple(ops), memory=None)
