"""Streams that overlap: the events that order them, and how much communication the step hides.

Collectives run on the NCCL stream (COMM_STREAM), compute on stream 0. What orders the two is data: NCCL's
stream waits for the compute stream before a collective reads a buffer (ProcessGroupNCCL records an event
on the current stream and makes its own stream wait for it), and the compute stream waits for the collective
before it reads the result (work.wait(), wait_tensor, DDP's end-of-backward wait, FSDP2's copy-out). So
every launch that reads memory last written on another stream waits for that write:

- DDP: a bucket's all-reduce reads the bucket the gradient copies (mul.out into the bucket view) wrote, so it
  starts once its bucket's gradients are produced, and overlaps the rest of backward; the copies back into
  .grad (or the optimizer, with gradient_as_bucket_view) read the bucket and wait for the all-reduce.
- FSDP2: the all-gather of a layer's parameters reads only the sharded parameters, last written by the
  previous step's optimizer, so it runs ahead of compute (prefetch); the copy-out waits for it. The
  reduce-scatter of gradients reads them once their backward has written them.
- Tensor parallelism: each functional collective reads activations just computed, and wait_tensor reads its
  result at once: exposed, as on GPUs.

A read with no writer earlier in the step depends on the last writer in the step before (the op list is
one step of a loop); in the simulation of back-to-back steps that is the previous step's event. Side-stream
work whose reads no op of the step writes at all waits for the compute stream's last op of the step before:
FSDP2's all-gather copy-in reads its padded shard buffers, which the optimizer updates through other views
the capture does not tie to them, so the first all-gather of a step waits for the previous optimizer step.

Storage ids identify memory (TensorMeta.storage, shared by views). Write-after-read hazards (a compute op
reusing memory a collective still reads) are left out: the caching allocator's record_stream keeps them apart.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from kernelcast.records import COMM_STREAM, OpRecord

from .timeline import Launch, steady_state_step_us


def _storages(tensors) -> set[int]:
    return {t.storage for t in tensors if t.storage and t.on_gpu}


def _flat(value) -> list:
    if isinstance(value, tuple):
        return [t for v in value for t in _flat(v)]
    return [value] if hasattr(value, "storage") else []


def written(op: OpRecord) -> set[int]:
    """Storages an op writes: its outputs, its `out=` arguments (out variants and custom ops such as FSDP2's
    chunk_cat return nothing), and its first argument if it works in place."""
    tensors = op.tensors_out() + _flat(op.args.get("out"))
    if "inplace" in op.tags and op.args:
        tensors += _flat(next(iter(op.args.values())))
    return _storages(tensors)


def cross_stream_waits(ops: Sequence[OpRecord], streams: Sequence[int]) -> dict[int, int]:
    """{reader index: writer index} for every op that reads memory last written on another stream.

    A launch can wait for one event; where reads were last written on several other streams the latest
    write is kept (with two streams, compute and NCCL, each stream runs in order, so that covers the rest)."""
    last_writer: dict[int, int] = {}
    for i, op in enumerate(ops):  # the step before: its last writer of each storage
        for storage in written(op):
            last_writer[storage] = i
    last_compute = max((i for i, s in enumerate(streams) if s == 0), default=None)
    waits: dict[int, int] = {}
    for i, op in enumerate(ops):
        reads = _storages(op.tensors_in())
        writers = [last_writer[s] for s in reads if s in last_writer]
        foreign = [w for w in writers if streams[w] != streams[i]]
        if streams[i] != 0 and reads and not writers and last_compute is not None:
            foreign = [last_compute]
        if foreign:
            waits[i] = max(foreign, key=lambda w: (w < i, w))  # this step's writes before the step before's
        for storage in written(op):
            last_writer[storage] = i
    return waits


def with_stream_events(ops: Sequence[OpRecord], launches: Sequence[Launch]) -> list[Launch]:
    """The launches with record_event / wait_event set for every cross-stream read; event k is recorded by
    launch k. A launch that already records or waits for an event (set by the capture) keeps it."""
    waits = cross_stream_waits(ops, [lc.stream for lc in launches])
    writers = set(waits.values())
    out = []
    for i, lc in enumerate(launches):
        changes = {}
        if i in writers and lc.record_event is None:
            changes["record_event"] = i
        if i in waits and lc.wait_event is None:
            changes["wait_event"] = waits[i]
        out.append(dataclasses.replace(lc, **changes) if changes else lc)
    return out


@dataclass(frozen=True)
class CommSummary:
    """Per step: the compute and communication on the GPU, and how much of the communication lengthens it."""

    world_size: int
    interconnect: str  # the interconnect's id
    interconnect_name: str
    collectives: int  # per step
    compute_us: float  # GPU time of everything but the collectives
    comm_us: float  # GPU time of the collectives, one after another on the NCCL stream
    exposed_comm_us: float  # how much longer the step is than it would be with free communication
    step_without_comm_us: float
    # The same with the CPU's work to issue each collective free too: what a no-op collective (a no-op comm hook,
    # FSDP2's set_custom_all_gather) would save, as the validation measures it.
    step_without_comm_or_issue_us: float = 0.0
    issue_host_us: float = 0.0  # CPU time issuing the collectives, per step

    @property
    def noop_saving_us(self) -> float:
        """The step minus the step with free collectives, on the GPU and the CPU."""
        return max(self.step_without_comm_us + self.exposed_comm_us - self.step_without_comm_or_issue_us, 0.0)

    @property
    def hidden_comm_us(self) -> float:
        return max(self.comm_us - self.exposed_comm_us, 0.0)

    @property
    def exposed_fraction(self) -> float:
        return self.exposed_comm_us / self.comm_us if self.comm_us else 0.0


def exposed_comm_us(launches: Sequence[Launch], is_comm: Sequence[bool], step_us: float,
                    free_issue: bool = False) -> tuple[float, float]:
    """(exposed communication, step time without it): the step as simulated, minus the same step with every
    collective taking no time on the GPU (its events and dependencies kept), and with free_issue none on the
    CPU either."""
    free = [dataclasses.replace(lc, gpu_us=0.0, host_us=0.0 if free_issue else lc.host_us) if comm else lc
            for lc, comm in zip(launches, is_comm)]
    without = steady_state_step_us(free)
    return max(step_us - without, 0.0), without


def is_collective(op: OpRecord) -> bool:
    return op.stream == COMM_STREAM and op.group_size > 0


def comm_summary(ops: Sequence[OpRecord], times_us: Sequence[float], launches: Sequence[Launch], step_us: float,
                 interconnect, world_size: int) -> CommSummary:
    """Compute, communication and exposed communication of one predicted step."""
    flags = [is_collective(op) for op in ops]
    exposed, without = exposed_comm_us(launches, flags, step_us)
    return CommSummary(
        world_size=world_size, interconnect=interconnect.id, interconnect_name=interconnect.name,
        collectives=sum(flags), compute_us=sum(t for t, comm in zip(times_us, flags) if not comm),
        comm_us=sum(t for t, comm in zip(times_us, flags) if comm), exposed_comm_us=exposed,
        step_without_comm_us=without,
        step_without_comm_or_issue_us=exposed_comm_us(launches, flags, step_us, free_issue=True)[1],
        issue_host_us=sum(lc.host_us for lc, comm in zip(launches, flags) if comm),
    )
