"""Simulate the CPU launch queue feeding GPU streams.

The CPU runs ops one after another. An op's kernels are launched when its host work ends; a kernel starts
when it has been launched and the previous kernel on its stream has finished. Streams order against each other
only through events: a launch can record event k (it completes when its stream reaches that point) or make
its stream wait for event k (later work on that stream starts no earlier), as torch.cuda.Event.record /
Stream.wait_event do. A sync makes the CPU wait until every stream is idle. Everything is in microseconds
from the start of the first op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Launch:
    """One op as the simulator sees it."""

    host_us: float  # CPU time to issue it
    gpu_us: float  # device time of its kernels, back to back (0: launches nothing)
    stream: int = 0
    sync: bool = False  # the CPU waits for the GPU after issuing it
    sync_return_us: float = 0.0  # CPU time to resume after the wait
    record_event: int | None = None  # after this launch's work, event k marks its stream's position
    wait_event: int | None = None  # this launch's stream waits (on the GPU, not the CPU) for event k
    # the last part of host_us, spent while the op's first kernels already run: a library call (cuDNN) that
    # launches its later work items (layout transforms, per-step RNN kernels) one after another from inside
    overlap_us: float = 0.0


def with_host(launch: Launch, host_us: float, sync_return_us: float | None = None) -> Launch:
    """The launch with other host times (dataclasses.replace, without its per-call introspection: the host
    ranges re-simulate every launch of a step several times)."""
    overlap_us = launch.overlap_us * host_us / launch.host_us if launch.host_us > 0 else 0.0
    return Launch(host_us, launch.gpu_us, launch.stream, launch.sync,
                  launch.sync_return_us if sync_return_us is None else sync_return_us,
                  launch.record_event, launch.wait_event, overlap_us)


@dataclass(frozen=True)
class Span:
    cpu_start_us: float
    cpu_end_us: float
    gpu_start_us: float | None
    gpu_end_us: float | None
    stream: int = 0
    sync_wait_us: float = 0.0  # how long the CPU waited here for the GPU queue to drain


@dataclass(frozen=True)
class Timeline:
    spans: tuple[Span, ...]
    cpu_end_us: float
    gpu_end_us: float
    gpu_busy_us: float

    @property
    def end_us(self) -> float:
        return max(self.cpu_end_us, self.gpu_end_us)


@dataclass
class _State:
    cpu_us: float = 0.0
    stream_free_us: dict[int, float] | None = None
    event_us: dict[int, float] | None = None  # when each recorded event completes on the GPU

    def __post_init__(self) -> None:
        if self.stream_free_us is None:
            self.stream_free_us = {}
        if self.event_us is None:
            self.event_us = {}


def _run(launches: Sequence[Launch], state: _State, spans: list[Span] | None = None,
         host_scale: float = 1.0) -> float:
    """Advance `state` over the launches; return the GPU busy time. `spans`, when given, gets one Span per
    launch (a steady-state loop only needs the ends: building ~10k spans per pass was a third of its time).
    host_scale multiplies every launch's host time and sync return (a host that much slower)."""
    busy = 0.0
    free = state.stream_free_us
    for item in launches:
        cpu_start = state.cpu_us
        state.cpu_us += item.host_us * host_scale
        gpu_start = gpu_end = None
        if item.wait_event is not None:  # an event never recorded is complete, as in CUDA
            free[item.stream] = max(free.get(item.stream, 0.0), state.event_us.get(item.wait_event, 0.0))
        if item.gpu_us > 0:
            # the op's first kernel is launched once the host has done all but its overlap; its last launch
            # comes when the host is done, and that kernel cannot end before it
            launched_us = state.cpu_us - item.overlap_us * host_scale
            gpu_start = max(launched_us, free.get(item.stream, 0.0))
            gpu_end = max(gpu_start + item.gpu_us, state.cpu_us)
            free[item.stream] = gpu_end
            busy += item.gpu_us
        if item.record_event is not None:
            state.event_us[item.record_event] = max(free.get(item.stream, 0.0), state.cpu_us)
        wait = 0.0
        if item.sync:
            drained = max(free.values(), default=0.0)
            wait = max(drained - state.cpu_us, 0.0)
            state.cpu_us = max(state.cpu_us, drained) + item.sync_return_us * host_scale
        if spans is not None:
            spans.append(Span(cpu_start, state.cpu_us, gpu_start, gpu_end, item.stream, wait))
    return busy


def simulate(launches: Sequence[Launch]) -> Timeline:
    """One pass from an idle CPU and GPU."""
    state = _State()
    spans: list[Span] = []
    busy = _run(launches, state, spans)
    return Timeline(tuple(spans), state.cpu_us, max(state.stream_free_us.values(), default=0.0), busy)


def steady_state_step_us(launches: Sequence[Launch], steps: int = 3, host_scale: float = 1.0) -> float:
    """Time per step in a loop of back-to-back steps with no sync between them; host_scale: as _run's (the
    step on a host that much slower, without building its launches again).

    The first step starts from an idle GPU; later steps can queue behind the previous one. The difference
    between the ends of the last two steps is the steady-state step time.
    """
    state = _State()
    ends = []
    for _ in range(steps):
        _run(launches, state, host_scale=host_scale)
        ends.append(max(state.cpu_us, max(state.stream_free_us.values(), default=0.0)))
    return ends[-1] - ends[-2] if steps > 1 else ends[-1]
