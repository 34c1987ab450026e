"""`torch.cuda` as the user's step sees it during a capture: one device of the target GPU, and no real calls.

User and library code asks torch.cuda questions (is_available, capability, bf16 support) and calls it
(synchronize, manual_seed). On a machine without a GPU those raise or answer "no", which would change the
path the code takes. During a capture they answer for the target GPU instead, and a synchronize is recorded
as a sync point. Streams and events are ids: ops record the stream they were issued on, and event records,
event waits and wait_stream become markers the timeline orders the streams by. The patches are scoped to the
capture and undone on exit.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol
from unittest import mock

import torch


@dataclass(frozen=True)
class FakeDeviceProperties:
    """The fields of torch.cuda.get_device_properties() that model code reads."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    L2_cache_size: int
    is_integrated: bool = False
    is_multi_gpu_board: bool = False
    warp_size: int = 32
    max_threads_per_multi_processor: int = 2048
    regs_per_multiprocessor: int = 65536
    gcnArchName: str = ""
    uuid: str = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class TargetDevice:
    name: str
    capability: tuple[int, int]
    memory_bytes: int
    sm_count: int
    l2_bytes: int
    supports_bf16: bool

    def properties(self) -> FakeDeviceProperties:
        return FakeDeviceProperties(
            name=self.name, major=self.capability[0], minor=self.capability[1],
            total_memory=self.memory_bytes, multi_processor_count=self.sm_count, L2_cache_size=self.l2_bytes,
        )


class StreamLog(Protocol):
    """What the facade tells the recorder about streams and events."""

    current_stream: int

    def record_event(self, event: int, stream: int) -> None: ...

    def wait_event(self, stream: int, event: int) -> None: ...

    def synchronize(self, kind: str) -> None: ...

    def begin_graph(self) -> object: ...

    def end_graph(self, begun: object) -> tuple: ...

    def replay_graph(self, body: tuple) -> None: ...


DEFAULT_STREAM = 0


class _Ids:
    def __init__(self) -> None:
        self.streams = itertools.count(1)
        self.events = itertools.count(1)


class FakeStream:
    """torch.cuda.Stream during a capture: an id; waits and event records go to the recorder."""

    def __init__(self, log: StreamLog, ids: _Ids, stream_id: int | None = None, priority: int = 0) -> None:
        self._log, self._ids = log, ids
        self.stream_id = next(ids.streams) if stream_id is None else stream_id
        self.priority = priority
        self.device = torch.device("cuda", 0)
        # torch.Stream's own fields, read by FSDP2 from torch 2.15 on (its stream bookkeeping)
        self.device_index = 0
        self.device_type = 1  # c10::DeviceType::CUDA, as torch.Stream.device_type reports it
        self.cuda_stream = self.stream_id

    def wait_event(self, event: "FakeEvent") -> None:
        self._log.wait_event(self.stream_id, event.event_id)

    def wait_stream(self, stream: "FakeStream") -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: "FakeEvent | None" = None) -> "FakeEvent":
        event = event or FakeEvent(self._log, self._ids)  # not the user's Event class: same behaviour
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        self._log.synchronize("stream synchronize")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeStream) and other.stream_id == self.stream_id

    def __hash__(self) -> int:
        return hash(self.stream_id)

    def __enter__(self) -> "FakeStream":
        self._previous = self._log.current_stream
        self._log.current_stream = self.stream_id
        return self

    def __exit__(self, *exc) -> None:
        self._log.current_stream = self._previous


class FakeEvent:
    """torch.cuda.Event during a capture."""

    def __init__(self, log: StreamLog, ids: _Ids) -> None:
        self._log = log
        self.event_id = next(ids.events)

    def record(self, stream: FakeStream | None = None) -> None:
        self._log.record_event(self.event_id, stream.stream_id if stream is not None else self._log.current_stream)

    def wait(self, stream: FakeStream | None = None) -> None:
        self._log.wait_event(stream.stream_id if stream is not None else self._log.current_stream, self.event_id)

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        self._log.synchronize("event synchronize")

    def elapsed_time(self, end: "FakeEvent") -> float:
        return 0.0  # nothing ran: a capture has no times (predict gives them)


class FakeCUDAGraph:
    """torch.cuda.CUDAGraph during a capture. The work issued between capture_begin and capture_end is the graph's
    (recorded apart from the step: capturing runs nothing on a GPU); each replay() issues it again as the GPU
    replays a graph, one launch for all of its kernels (the recorder's replay_graph)."""

    def __init__(self, log: StreamLog, keep_graph: bool = False) -> None:
        self._log = log
        self._begun: object | None = None
        self._body: tuple | None = None

    def capture_begin(self, pool=None, capture_error_mode: str = "global", **options) -> None:
        if self._begun is not None:
            raise RuntimeError("CUDAGraph.capture_begin() while this graph is already capturing")
        self._begun = self._log.begin_graph()

    def capture_end(self) -> None:
        if self._begun is None:
            raise RuntimeError("CUDAGraph.capture_end() without capture_begin()")
        self._body, self._begun = self._log.end_graph(self._begun), None

    def replay(self) -> None:
        if self._body is None:
            raise RuntimeError("CUDAGraph.replay() before the graph was captured")
        self._log.replay_graph(self._body)

    def reset(self) -> None:
        self._body = None

    def instantiate(self) -> None:  # keep_graph=True's explicit instantiation: nothing to do here
        pass

    def pool(self) -> tuple[int, int]:
        return (0, id(self))

    def enable_debug_mode(self) -> None:
        pass

    def debug_dump(self, path: str) -> None:
        pass

    @property
    def capturing(self) -> bool:
        return self._begun is not None


def _graph_fakes(log: StreamLog) -> dict[str, object]:
    """torch.cuda's CUDA graph API (torch/cuda/graphs.py): the graph class, pool handles, and whether a capture is
    under way (libraries ask before they do something a capture forbids)."""
    graphs: list[FakeCUDAGraph] = []
    handles = itertools.count(1)

    class CUDAGraph(FakeCUDAGraph):  # a class: code subclasses it and writes it in annotations
        def __init__(self, keep_graph: bool = False) -> None:
            super().__init__(log, keep_graph)
            graphs.append(self)

    return {"CUDAGraph": CUDAGraph, "graph_pool_handle": lambda: (0, next(handles)),
            "is_current_stream_capturing": lambda: any(g.capturing for g in graphs)}


def _stream_fakes(log: StreamLog) -> dict[str, object]:
    ids = _Ids()
    streams = {DEFAULT_STREAM: FakeStream(log, ids, DEFAULT_STREAM)}

    def current_stream(device=None) -> FakeStream:
        return streams.setdefault(log.current_stream, FakeStream(log, ids, log.current_stream))

    def set_stream(stream: FakeStream) -> None:
        log.current_stream = stream.stream_id

    class Stream(FakeStream):  # classes, not factories: code writes `torch.cuda.Stream | None` in annotations
        def __init__(self, device=None, priority: int = 0, **kwargs) -> None:
            super().__init__(log, ids, priority=priority)
            streams[self.stream_id] = self

    class Event(FakeEvent):
        def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                     **kwargs) -> None:
            super().__init__(log, ids)

    @contextlib.contextmanager
    def stream(s: FakeStream | None) -> Iterator[None]:
        if s is None:
            yield
            return
        with s:
            yield

    return {
        "Stream": Stream, "Event": Event, "stream": stream,
        "current_stream": current_stream, "default_stream": lambda device=None: streams[DEFAULT_STREAM],
        "set_stream": set_stream,
    }


# torch.cuda's generator state on a CUDA build: a uint8 tensor of 16 bytes (Philox seed and offset). Code that
# saves and restores it around a region (torch.random.fork_rng, activation checkpointing, torch's test helpers)
# gets one made before the capture's fake mode starts, so reading it records no op.
RNG_STATE_BYTES = 16


def _fakes(target: TargetDevice, on_sync: Callable[[str], None]) -> dict[str, object]:
    props = target.properties()
    rng_state = torch.zeros(RNG_STATE_BYTES, dtype=torch.uint8)

    def synchronize(device=None) -> None:
        on_sync("synchronize")

    return {
        "is_available": lambda: True,
        "_lazy_init": lambda: None,
        "init": lambda: None,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        # torch.cuda.device(...) / device_of(...) swap the current device through these (one device here)
        "_exchange_device": lambda device: 0,
        "_maybe_exchange_device": lambda device: 0,
        "get_device_capability": lambda device=None: target.capability,
        "get_device_name": lambda device=None: target.name,
        "get_device_properties": lambda device=None: props,
        # as torch.cuda.is_bf16_supported answers on the target: compute capability 8+ natively; below that only
        # with including_emulation (its default), where a bfloat16 tensor can be made on any CUDA GPU (a T4 says
        # True, and runs bf16 GEMMs without tensor cores: devices.GPU.matmul_peak)
        "is_bf16_supported": lambda including_emulation=True: target.supports_bf16 or (
            bool(including_emulation) and target.capability[0] > 0),
        "synchronize": synchronize,
        # Dynamo asks this before it compiles a frame (convert_frame.trace_frame); a CUDA build without a GPU
        # would ask the driver and fail. With a stream log, a user's CUDA graph capture answers (_graph_fakes).
        "is_current_stream_capturing": lambda: False,
        "manual_seed": lambda seed: None,
        "manual_seed_all": lambda seed: None,
        "seed": lambda: None,
        "seed_all": lambda: None,
        "initial_seed": lambda: 0,
        "get_rng_state": lambda device="cuda": rng_state,
        "get_rng_state_all": lambda: [rng_state],
        "set_rng_state": lambda new_state, device="cuda": None,
        "set_rng_state_all": lambda new_states: None,
        "empty_cache": lambda: None,
        "memory_allocated": lambda device=None: 0,
        "max_memory_allocated": lambda device=None: 0,
        "memory_reserved": lambda device=None: 0,
        "max_memory_reserved": lambda device=None: 0,
        "reset_peak_memory_stats": lambda device=None: None,
        "reset_max_memory_allocated": lambda device=None: None,
        "mem_get_info": lambda device=None: (target.memory_bytes, target.memory_bytes),
    }


class _AnyGenerator(type(torch._C.Generator)):
    """While the capture stands torch.Generator in, every generator is still one (torch.default_generator and
    those made before it: Inductor and symbolic shapes ask isinstance(x, torch.Generator))."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, torch._C.Generator)


class HostGeneratorForCuda(torch._C.Generator, metaclass=_AnyGenerator):
    """torch.Generator(device="cuda") under a capture: a torch without a GPU has no CUDA generator ("Cannot get
    CUDA generator without ATen_cuda library": a diffusers pipeline's seeded generator, an augmentation's, failed
    every capture). A CPU generator stands in; the recorder drops generators from the ops it records, since a
    fake tensor's random op draws nothing and a generator changes no shape or kernel."""

    def __new__(cls, device=None):
        asked = torch.device(device if device is not None else "cpu")
        if asked.type == "cuda":
            device = "cpu"
        generator = super().__new__(cls, device) if device is not None else super().__new__(cls)
        generator._asked = asked if asked.type != "cuda" or asked.index is not None else torch.device("cuda", 0)
        return generator

    def __init__(self, device=None):
        super().__init__()

    @property
    def device(self) -> torch.device:
        """The device it was made for, as code that puts its samples where its generator is reads it."""
        return self._asked


def scatter_to_devices(tensor, devices, chunk_sizes=None, dim=0, streams=None):
    """torch._C._scatter (torch/csrc/cuda/comm.cpp), which a CPU build lacks: the tensor split along `dim` (by
    `chunk_sizes`, else evenly over the devices), each chunk on its device; a chunk already there is a view, no
    copy (nn.DataParallel on one GPU: every step had failed on `torch._C._scatter`)."""
    chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes else tensor.chunk(len(devices), dim)
    return tuple(chunk.to(torch.device("cuda", index)) for chunk, index in zip(chunks, devices))


@contextlib.contextmanager
def cuda_facade(target: TargetDevice, on_sync: Callable[[str], None], streams: StreamLog | None = None) -> Iterator[None]:
    fakes = _fakes(target, on_sync)
    graph_fakes = {}
    if streams is not None:
        fakes.update(_stream_fakes(streams))
        graph_fakes = _graph_fakes(streams)
        fakes.update(graph_fakes)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.multiple(torch.cuda, **fakes))
        stack.enter_context(mock.patch.object(torch, "Generator", HostGeneratorForCuda))
        stack.enter_context(mock.patch.object(torch._C, "_scatter", scatter_to_devices, create=True))
        if graph_fakes:
            # torch.cuda.graph reads these from its own module, and keeps its side stream on the class across
            # captures (a stream of an earlier capture's facade); a CPU build has no host cache to empty
            stack.enter_context(mock.patch.multiple(torch.cuda.graphs, CUDAGraph=graph_fakes["CUDAGraph"],
                                                    graph_pool_handle=graph_fakes["graph_pool_handle"]))
            stack.enter_context(mock.patch.object(torch.cuda.graphs.graph, "default_capture_stream", None))
            stack.enter_context(mock.patch.object(torch._C, "_host_emptyCache", lambda: None, create=True))
        yield
