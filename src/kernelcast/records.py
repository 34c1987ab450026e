"""Frozen records handed from one stage to the next: capture -> costs -> predict -> report.

Nothing here imports torch, so a saved capture can be costed, predicted and reported on any machine.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelcast.memory_trace import MemoryTrace

CAPTURE_FORMAT_VERSION = 1

# Bytes per element of each dtype torch can put on a GPU (torch's names, without the "torch." prefix).
DTYPE_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "bool": 1, "complex64": 8, "complex128": 16, "complex32": 4,
}

# Ops after a backward pass that are neither autograd's nor the optimizer's nor a new forward's (gradient
# clipping, the loss's .item(), an lr scheduler's step): "post-backward", as FSDP names its hooks there.
POST_BACKWARD = "post-backward"
PHASES = ("forward", "backward", POST_BACKWARD, "optimizer")


def host_phase(phase: str) -> str:
    """The phase whose host costs an op's take: a post-backward op runs eager Python as a forward one does."""
    return "forward" if phase == POST_BACKWARD else phase

# Host-side markers the capture records beside aten ops ("host." + what): syncs outside aten (host.synchronize,
# host.tolist), event records and waits that order streams, and the autograd nodes a backward ran without an op.
HOST_OP_PREFIX = "host."
RECORD_EVENT_OP = HOST_OP_PREFIX + "record_event"
WAIT_EVENT_OP = HOST_OP_PREFIX + "wait_event"
ENGINE_NODES_OP = HOST_OP_PREFIX + "autograd_nodes"
# Where a profiler range (torch.profiler.record_function) that the predict stage models begins and ends, e.g.
# FSDP2's "FSDP::pre_forward (layers.0)" (args: {"name": ...}). Markers only: no CPU or GPU work of their own.
RANGE_BEGIN_OP = HOST_OP_PREFIX + "range_begin"
RANGE_END_OP = HOST_OP_PREFIX + "range_end"
# The step's Python after its last op (an optimizer's zero_grad, a compiled frame's exit and its resume functions,
# logging): a marker at the step's return carries it, as every op carries the Python before it.
STEP_END_OP = HOST_OP_PREFIX + "step_end"
# tensor.record_stream(stream): the storage's block is not reused until that stream's work queued so far is done
# (args: storage, stream); predict/hazards.py reads it.
RECORD_STREAM_OP = HOST_OP_PREFIX + "record_stream"

# The tag of an op that CUDA runs by calling other ops (recorded after it, their `parent` its index).
DECOMPOSED_TAG = "decomposed"


def stream_name(stream: int) -> str:
    """A CUDA stream as the report names it: the default stream (0) or a side stream by its capture id."""
    return "default stream" if stream == 0 else f"side stream {stream}"


def root_indices(ops) -> list[int]:
    """For each op, the index of the op the step itself called that launched it (its own for most ops)."""
    roots: list[int] = []
    for i, op in enumerate(ops):
        roots.append(roots[op.parent] if 0 <= op.parent < i else i)
    return roots


# The stream id collectives are recorded on. NCCL runs them on a stream of its own (ProcessGroupNCCL keeps one
# per device and process group), so they can overlap compute on stream 0; a number well above the ids a capture
# gives user-created streams keeps the two apart.
COMM_STREAM = 1000


@dataclass(frozen=True)
class TensorMeta:
    """Shape, dtype, strides and device of one tensor an op read or wrote."""

    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...]
    device: str = "cuda"
    storage: int = 0  # identity of the memory it lives in (views share it); 0 when unknown
    offset: int = 0  # storage offset in elements: where a view starts in its storage (pointer alignment)
    conj: bool = False  # a complex tensor with its conjugate bit set (a lazy .conj() view, Tensor.is_conj)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 4)

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    @property
    def touched_bytes(self) -> int:
        """Bytes of distinct elements: a broadcast (stride 0) dimension is read once, not once per use."""
        distinct = math.prod(n for n, s in zip(self.shape, self.stride) if s != 0)
        return distinct * self.itemsize if self.numel else 0

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    def to_json(self) -> dict:
        d = {"T": list(self.shape), "dtype": self.dtype, "stride": list(self.stride), "device": self.device}
        if self.storage:
            d["storage"] = self.storage
        if self.offset:
            d["offset"] = self.offset
        if self.conj:
            d["conj"] = True
        return d

    @staticmethod
    def from_json(d: dict) -> "TensorMeta":
        return TensorMeta(tuple(d["T"]), d["dtype"], tuple(d["stride"]), d.get("device", "cuda"), d.get("storage", 0),
                          d.get("offset", 0), bool(d.get("conj", False)))


def _arg_to_json(value: Any) -> Any:
    if isinstance(value, TensorMeta):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [_arg_to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    return value


def _arg_from_json(value: Any) -> Any:
    if isinstance(value, dict) and "T" in value:
        return TensorMeta.from_json(value)
    if isinstance(value, dict) and "float" in value:
        return float(value["float"])
    if isinstance(value, list):
        return tuple(_arg_from_json(v) for v in value)
    return value


@dataclass(frozen=True)
class OpRecord:
    """One aten op as CUDA would dispatch it, with what the cost model and the report need to know."""

    index: int
    op: str  # overload, e.g. "aten.mm.default"
    args: dict[str, Any]  # schema argument name -> TensorMeta, tuple of them, or a plain value
    outputs: tuple[TensorMeta | None, ...]
    tags: tuple[str, ...] = ()  # torch op tags that matter to costing: pointwise, reduction, inplace, view
    phase: str = "forward"  # forward / backward / optimizer
    module: str = ""  # innermost nn.Module path running it (its backward, in the backward phase)
    source: str = ""  # "file.py:123 in func", the innermost frame outside torch and kernelcast
    sync: str | None = None  # why the host waits for the GPU here: item, nonzero, cpu, synchronize, ...
    stream: int = 0
    # Host side, on the capture machine: µs of the model's own Python run since the previous op (sampled, see
    # capture/python_sampler.py), and the module calls entered in that time.
    python_us: float = 0.0
    modules: int = 0
    # The Python lines the model ran in that time (capture/host_clock.py LineCounter: counted over the first
    # recorded step, outside torch calls, kernelcast and nn.Module's call machinery); the host model prices them
    # where the capture counted them (CaptureSettings.python_lines_counted).
    python_lines: int = 0
    group_size: int = 0  # ranks in the process group of a collective (all_reduce, ...); 0 for any other op
    # The op whose CUDA implementation called this one (the index of an op tagged "decomposed", see
    # capture/decompose.py); -1 for an op the step itself called.
    parent: int = -1
    # An op a user's CUDA graph replays (tagged "graphed"): the stream the graph was captured on, where its
    # library workspaces were taken (predict/memory.py); -1 for any other op.
    captured_stream: int = -1

    @property
    def packet(self) -> str:
        """The op without its overload: "aten.mm"."""
        return self.op.rsplit(".", 1)[0] if self.op.count(".") >= 2 else self.op

    @property
    def name(self) -> str:
        return self.packet.split(".", 1)[-1]

    @property
    def is_view(self) -> bool:
        return "view" in self.tags

    @property
    def decomposed(self) -> bool:
        """CUDA runs this op as the ops recorded after it with it as their parent; they launch its kernels."""
        return DECOMPOSED_TAG in self.tags

    def tensors_in(self) -> list[TensorMeta]:
        out: list[TensorMeta] = []
        for value in self.args.values():
            if isinstance(value, TensorMeta):
                out.append(value)
            elif isinstance(value, tuple):
                out.extend(v for v in value if isinstance(v, TensorMeta))
        return out

    def tensors_out(self) -> list[TensorMeta]:
        return [t for t in self.outputs if t is not None]

    def to_json(self) -> dict:
        d = {
            "index": self.index, "op": self.op,
            "args": {k: _arg_to_json(v) for k, v in self.args.items()},
            "outputs": [None if t is None else t.to_json() for t in self.outputs],
            "tags": list(self.tags), "phase": self.phase, "module": self.module, "source": self.source,
            "sync": self.sync, "stream": self.stream,
        }
        if self.python_us:
            d["python_us"] = round(self.python_us, 3)
        if self.modules:
            d["modules"] = self.modules
        if self.python_lines:
            d["python_lines"] = self.python_lines
        if self.group_size:
            d["group_size"] = self.group_size
        if self.parent >= 0:
            d["parent"] = self.parent
        if self.captured_stream >= 0:
            d["captured_stream"] = self.captured_stream
        return d

    @staticmethod
    def from_json(d: dict) -> "OpRecord":
        return OpRecord(
            index=d["index"], op=d["op"],
            args={k: _arg_from_json(v) for k, v in d["args"].items()},
            outputs=tuple(None if t is None else TensorMeta.from_json(t) for t in d["outputs"]),
            tags=tuple(d.get("tags", ())), phase=d.get("phase", "forward"), module=d.get("module", ""),
            source=d.get("source", ""), sync=d.get("sync"), stream=d.get("stream", 0),
            python_us=d.get("python_us", 0.0), modules=d.get("modules", 0), python_lines=d.get("python_lines", 0),
            group_size=d.get("group_size", 0), parent=d.get("parent", -1),
            captured_stream=d.get("captured_stream", -1),
        )


@dataclass(frozen=True)
class CaptureSettings:
    """Backend flags in force during the step: they change which roof a matmul or conv runs under."""

    matmul_allow_tf32: bool = False
    cudnn_allow_tf32: bool = True
    matmul_allow_bf16_reduced: bool = True
    arch: str = "sm_90"  # the CUDA arch the capture routed for (attention backends differ by arch)
    torch_version: str = ""
    # The capture machine: its CPU and its three microbenchmarks (capture/cpu_speed.py, µs of CPU time; 0: not
    # measured), the speed OpRecord.python_us was measured at.
    python_bench_us: float = 0.0
    dispatch_bench_us: float = 0.0
    module_bench_us: float = 0.0
    cpu: str = ""
    # How the model's Python was timed: over how many recorded steps (OpRecord.python_us is each op's fastest
    # reading), and the step's model Python summed over each op's median reading instead (0: not recorded).
    python_timing_steps: int = 1
    python_median_us: float = 0.0
    # Whether OpRecord.python_lines were counted (captures before 2026-12-05 did not: their model Python is
    # priced from python_us)
    python_lines_counted: bool = False
    # How long the capturing thread waited for a core per unit of CPU time over the timed steps (other
    # processes' load; Linux schedstat, 0 where unknown).
    capture_wait_share: float = 0.0


@dataclass(frozen=True)
class Capture:
    """Every op of one recorded step, in launch order."""

    ops: tuple[OpRecord, ...]
    settings: CaptureSettings = field(default_factory=CaptureSettings)
    workload: str = ""
    notes: tuple[str, ...] = ()  # what the capture had to assume (placeholder values for syncs, ...)
    world_size: int = 1  # ranks of the (fake) process group the step ran in; 1: a single-GPU step
    compiled: bool = False  # the step runs torch.compile'd code
    # How its compiled code was recorded: "inductor" (Inductor's kernels, capture/inductor.py), "eager" (op by op,
    # where Inductor could not run), "" for a step without compiled code.
    compiled_as: str = ""
    memory: MemoryTrace | None = None  # the CUDA storages made and freed, from build() on (memory_trace.py)
    # Ops build() issued on a side stream (a warm-up before a CUDA graph capture), one per kind, stream and
    # phase: not part of the step, but the library workspaces they took stay allocated (predict/memory.py).
    build_ops: tuple[OpRecord, ...] = ()

    def to_json(self) -> dict:
        d = {
            "format": CAPTURE_FORMAT_VERSION, "workload": self.workload,
            "settings": asdict(self.settings), "notes": list(self.notes), "world_size": self.world_size,
            "compiled": self.compiled, "compiled_as": self.compiled_as, "ops": [op.to_json() for op in self.ops],
            "memory": None if self.memory is None else self.memory.to_json(),
        }
        if self.build_ops:
            d["build_ops"] = [op.to_json() for op in self.build_ops]
        return d

    @staticmethod
    def from_json(d: dict) -> "Capture":
        if not isinstance(d, dict):
            raise ValueError(f"a capture is a JSON object, not a {type(d).__name__}")
        if d.get("format") != CAPTURE_FORMAT_VERSION:
            raise ValueError(f"capture format {d.get('format')!r} is not {CAPTURE_FORMAT_VERSION}")
        return Capture(
            ops=tuple(OpRecord.from_json(o) for o in d["ops"]),
            settings=CaptureSettings(**d.get("settings", {})),
            workload=d.get("workload", ""), notes=tuple(d.get("notes", ())), world_size=d.get("world_size", 1),
            compiled=d.get("compiled", False),
            memory=MemoryTrace.from_json(d["memory"]) if d.get("memory") else None,
            compiled_as=d.get("compiled_as", "eager" if d.get("compiled") else ""),
            build_ops=tuple(OpRecord.from_json(o) for o in d.get("build_ops", ())),
        )

    def save(self, path: str | Path) -> None:
        from kernelcast.outputs import write_text_atomic

        write_text_atomic(path, json.dumps(self.to_json()))

    @staticmethod
    def load(path: str | Path) -> "Capture":
        return Capture.from_json(json.loads(Path(path).read_text()))


# ---------------------------------------------------------------------------------------------------------------
# The prediction, as the predict stage hands it to the report stage (and as `--json` writes it). The report reads
# only this record, so a saved prediction renders on a machine without torch. Keys of `to_json` are a contract.
# ---------------------------------------------------------------------------------------------------------------

PREDICTION_RECORD = "kernelcast.prediction"
PREDICTION_FORMAT_VERSION = 1
# One op's place in the simulated step, as rows of these fields (compact: a step has thousands of ops).
SPAN_FIELDS = ("cpu_start_us", "cpu_end_us", "gpu_start_us", "gpu_end_us", "stream", "sync_wait_us")
SPAN_DECIMALS = 3  # ns resolution is far below any predicted time's uncertainty


@dataclass(frozen=True)
class PredictedOp:
    """One op's predicted cost and time (FLOPs, bytes, kernels; device and host µs)."""

    index: int
    op: str
    phase: str
    module: str
    source: str
    flops: float
    bytes: float
    intensity: float  # FLOP per byte
    kernels: int
    time_us: float  # device time of the op's kernels (0 for a view or an uncosted op)
    bound: str  # compute / memory / latency / host link / none / uncosted
    roof: str  # the peak it ran under, e.g. "bf16_tensor"
    host_us: float
    python_us: float = 0.0
    launch_bound: bool = False
    sync: str | None = None
    time_source: str = ""
    time_uncertainty: float = 0.0
    parent: int = -1  # the decomposed op whose CUDA code called this one (OpRecord.parent)
    # devices.achieved.rate_class of its kernels on the GPU ("" when uncosted): the fits' bookkeeping, not in JSON
    # and not part of the record's value
    rate_class: str = field(default="", compare=False)

    @property
    def costed(self) -> bool:
        return self.bound != "uncosted"

    JSON_KEYS = ("op", "phase", "module", "source", "flops", "bytes", "intensity", "kernels", "time_us", "bound",
                 "roof", "host_us", "python_us", "launch_bound", "sync", "time_source", "time_uncertainty")

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in self.JSON_KEYS}
        d["index"] = self.index
        if self.parent >= 0:
            d["parent"] = self.parent
        return d

    @staticmethod
    def from_json(d: dict, position: int = 0) -> "PredictedOp":
        return PredictedOp(
            index=d.get("index", position), op=d["op"], phase=d.get("phase", "forward"), module=d.get("module", ""),
            source=d.get("source", ""), flops=float(d.get("flops", 0.0)), bytes=float(d.get("bytes", 0.0)),
            intensity=float(d.get("intensity", 0.0)), kernels=int(d.get("kernels", 0)),
            time_us=float(d.get("time_us", 0.0)), bound=d.get("bound", "none"), roof=d.get("roof", ""),
            host_us=float(d.get("host_us", 0.0)), python_us=float(d.get("python_us", 0.0)),
            launch_bound=bool(d.get("launch_bound", False)), sync=d.get("sync"),
            time_source=d.get("time_source", ""), time_uncertainty=float(d.get("time_uncertainty", 0.0)),
            parent=int(d.get("parent", -1)),
        )


@dataclass(frozen=True)
class OpSpan:
    """Where one op ran in the simulated step from an idle CPU and GPU (µs from the step's start)."""

    cpu_start_us: float
    cpu_end_us: float  # includes any wait for the GPU at a sync point
    gpu_start_us: float | None  # None: the op launches nothing
    gpu_end_us: float | None
    stream: int = 0
    sync_wait_us: float = 0.0  # of the CPU span: waiting for the GPU queue to drain

    def to_row(self) -> list:
        return [None if v is None else (round(v, SPAN_DECIMALS) if isinstance(v, float) else v)
                for v in (getattr(self, f) for f in SPAN_FIELDS)]

    @staticmethod
    def from_row(row: list) -> "OpSpan":
        return OpSpan(**dict(zip(SPAN_FIELDS, row)))


@dataclass(frozen=True)
class SyncPointGroup:
    """The sync points of one kind issued from one source line, with what fixing them would save."""

    source: str
    kind: str
    count: int  # per step
    stall_us: float
    saving_us: float
    advice: str


@dataclass(frozen=True)
class Hazard:
    """A stream-ordering hazard in the step (predict/hazards.py): two accesses to one storage on two streams with
    nothing ordering them. kind: "unordered-read", "unordered-write" or "freed-while-in-use"; first: the earlier
    access (a write; for freed-while-in-use the use on the other stream), second: the later one (for
    freed-while-in-use, the op on the storage's allocation stream that next takes a block from that stream's
    pool, which may be the freed one)."""

    kind: str
    shape: tuple[int, ...]
    dtype: str
    first_op: str
    first_source: str
    first_stream: int
    second_op: str
    second_source: str
    second_stream: int
    fix: str
    first_index: int = -1  # the ops' indexes in the capture
    second_index: int = -1
    # What the step takes with the fix applied, re-predicted (µs per step; None: not re-predicted, as for
    # record_stream, which moves no kernel): a wait can serialize the overlap the streams were for.
    step_with_fix_us: float | None = None

    def to_json(self) -> dict:
        return {"kind": self.kind, "shape": list(self.shape), "dtype": self.dtype,
                "producer": {"op": self.first_op, "source": self.first_source, "stream": self.first_stream,
                             "index": self.first_index},
                "consumer": {"op": self.second_op, "source": self.second_source, "stream": self.second_stream,
                             "index": self.second_index},
                "fix": self.fix, "step_with_fix_us": self.step_with_fix_us}

    @staticmethod
    def from_json(d: dict) -> "Hazard":
        return Hazard(d["kind"], tuple(d.get("shape", ())), d.get("dtype", ""), d["producer"]["op"],
                      d["producer"]["source"], int(d["producer"]["stream"]), d["consumer"]["op"],
                      d["consumer"]["source"], int(d["consumer"]["stream"]), d.get("fix", ""),
                      int(d["producer"].get("index", -1)), int(d["consumer"].get("index", -1)),
                      d.get("step_with_fix_us"))


@dataclass(frozen=True)
class CommRecord:
    """A step with collectives: compute, communication and how much of it lengthens the step (µs per step)."""

    world_size: int
    interconnect: str
    collectives: int
    compute_us: float
    comm_us: float
    exposed_comm_us: float
    hidden_comm_us: float
    step_without_comm_us: float
    issue_host_us: float = 0.0
    noop_saving_us: float = 0.0
    interconnect_name: str = ""


@dataclass(frozen=True)
class GPUSpec:
    """The datasheet entry a prediction was made for (devices/gpus.toml): what a roofline draws its roofs from."""

    peak_flops: dict[str, float]  # dense FLOP/s by roof name (fp32, bf16_tensor, ...)
    mem_bw_bytes_per_s: float
    memory_bytes: float = 0.0


@dataclass(frozen=True)
class PredictionRecord:
    """A prediction as data: summary, per-op rows, sync groups, the simulated timeline, the GPU's roofs."""

    gpu: str
    gpu_name: str
    kernel_model: str
    host: str
    step_time_us: float
    first_step_us: float
    naive_host_timer_us: float
    gpu_time_us: float
    host_time_us: float
    kernels: int
    bound: str  # gpu / host / mixed
    gpu_idle_fraction: float
    sync_points: int
    ops: tuple[PredictedOp, ...]
    uncosted: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    compiled: bool = False
    compiled_as: str = ""  # "inductor": Inductor's kernels; "eager": op by op (Capture.compiled_as)
    python_time_us: float = 0.0
    launch_bound_ops: int = 0
    step_time_by_host_speed: tuple[tuple[float, float], ...] = ()
    # Where the host side is uncertain (predict.Prediction): model Python and step over their ranges; (0, 0):
    # not computed. The CPUs the host times came from and are for; recorded steps the model Python was read over.
    python_time_range_us: tuple[float, float] = (0.0, 0.0)
    step_time_range_us: tuple[float, float] = (0.0, 0.0)
    # the step over this host's own calibration runs' speeds (predict/host.py run_speed_range), and those factors
    step_time_run_range_us: tuple[float, float] = (0.0, 0.0)
    host_run_speed_range: tuple[float, float] = (1.0, 1.0)
    # the step with both at once (predict.Prediction.step_range_us): the range the summary prints
    step_range_us: tuple[float, float] = (0.0, 0.0)
    capture_cpu: str = ""
    target_cpu: str = ""
    python_timing_steps: int = 1
    python_lines: int = 0  # the model's Python lines the capture counted and the host priced (0: timed instead)
    python_line_us: float = 0.0  # at this many µs each on the target host
    sync_groups: tuple[SyncPointGroup, ...] = ()
    comm: CommRecord | None = None
    parallel_host: dict | None = None  # {"hook_us", "fsdp_units", "unmodelled_hooks"}
    workload: str = ""
    gpu_spec: GPUSpec | None = None
    spans: tuple[OpSpan, ...] = ()  # aligned with ops; empty when the prediction was saved without its timeline
    # Device memory over the step, where the predict stage models it; read by report/ (figures.memory_series),
    # which accepts a few layouts, so the writer's format can grow without a change here.
    memory_timeline: Any = None
    # Device memory (predict/memory.py memory_json): written as top-level keys of the JSON (MEMORY_KEYS), the
    # --json contract of peak_memory_bytes, resident_memory_bytes, reserved_memory_bytes, memory_by_category,
    # peak_op and fits; None for a prediction made before the memory model.
    memory: dict | None = None
    hazards: tuple[Hazard, ...] = ()  # stream-ordering hazards (predict/hazards.py)
    extra: dict = field(default_factory=dict)  # keys a newer writer added: kept as they are through load/save

    def to_json(self) -> dict:
        d = {
            "record": PREDICTION_RECORD, "format": PREDICTION_FORMAT_VERSION, "workload": self.workload,
            "gpu": self.gpu, "gpu_name": self.gpu_name, "kernel_model": self.kernel_model, "host": self.host,
            "step_time_us": self.step_time_us, "first_step_us": self.first_step_us,
            "naive_host_timer_us": self.naive_host_timer_us,
            "gpu_time_us": self.gpu_time_us, "host_time_us": self.host_time_us, "kernels": self.kernels,
            "bound": self.bound, "gpu_idle_fraction": self.gpu_idle_fraction, "sync_points": self.sync_points,
            "uncosted": list(self.uncosted), "notes": list(self.notes), "compiled": self.compiled,
            "compiled_as": self.compiled_as, "python_time_us": self.python_time_us, "launch_bound_ops": self.launch_bound_ops,
            "step_time_by_host_speed": [{"cpu_work_factor": f, "step_time_us": t}
                                        for f, t in self.step_time_by_host_speed],
            "python_time_range_us": list(self.python_time_range_us),
            "step_time_range_us": list(self.step_time_range_us),
            "step_time_run_range_us": list(self.step_time_run_range_us),
            "host_run_speed_range": list(self.host_run_speed_range),
            "step_range_us": list(self.step_range_us),
            "capture_cpu": self.capture_cpu, "target_cpu": self.target_cpu,
            "python_timing_steps": self.python_timing_steps,
            "python_lines": self.python_lines, "python_line_us": self.python_line_us,
            "sync_points_by_source": [asdict(g) for g in self.sync_groups],
            "comm": None if self.comm is None else asdict(self.comm),
            "parallel_host": self.parallel_host,
            "gpu_spec": None if self.gpu_spec is None else asdict(self.gpu_spec),
            "ops": [op.to_json() for op in self.ops],
            "hazards": [h.to_json() for h in self.hazards],
        }
        if self.spans:
            d["timeline"] = {"fields": list(SPAN_FIELDS), "spans": [s.to_row() for s in self.spans]}
        if self.memory_timeline is not None:
            d["memory_timeline"] = self.memory_timeline
        if self.memory is not None:
            d.update(self.memory)
        return {**self.extra, **d}

    @staticmethod
    def from_json(d: dict) -> "PredictionRecord":
        if not is_prediction_json(d):
            raise ValueError("not a kernelcast prediction (no step_time_us and ops)")
        timeline = d.get("timeline") or {}
        fields_ = tuple(timeline.get("fields", SPAN_FIELDS))
        if fields_ != SPAN_FIELDS:
            raise ValueError(f"timeline fields {list(fields_)} are not {list(SPAN_FIELDS)}")
        spec = d.get("gpu_spec")
        known = set(PredictionRecord.__dataclass_fields__) | {
            "record", "format", "sync_points_by_source", "timeline"} | set(MEMORY_KEYS)
        return PredictionRecord(
            gpu=d["gpu"], gpu_name=d.get("gpu_name", d["gpu"]), kernel_model=d.get("kernel_model", ""),
            host=d.get("host", ""), step_time_us=float(d["step_time_us"]),
            first_step_us=float(d.get("first_step_us", d["step_time_us"])),
            naive_host_timer_us=float(d.get("naive_host_timer_us", 0.0)),
            gpu_time_us=float(d.get("gpu_time_us", 0.0)), host_time_us=float(d.get("host_time_us", 0.0)),
            kernels=int(d.get("kernels", 0)), bound=d.get("bound", ""),
            gpu_idle_fraction=float(d.get("gpu_idle_fraction", 0.0)), sync_points=int(d.get("sync_points", 0)),
            ops=tuple(PredictedOp.from_json(o, i) for i, o in enumerate(d["ops"])),
            uncosted=tuple(d.get("uncosted", ())), notes=tuple(d.get("notes", ())),
            compiled=bool(d.get("compiled", False)),
            compiled_as=d.get("compiled_as", "eager" if d.get("compiled") else ""),
            python_time_us=float(d.get("python_time_us", 0.0)),
            launch_bound_ops=int(d.get("launch_bound_ops", 0)),
            step_time_by_host_speed=tuple((float(r["cpu_work_factor"]), float(r["step_time_us"]))
                                          for r in d.get("step_time_by_host_speed", ())),
            python_time_range_us=tuple(map(float, d.get("python_time_range_us", (0.0, 0.0)))),
            step_time_range_us=tuple(map(float, d.get("step_time_range_us", (0.0, 0.0)))),
            step_time_run_range_us=tuple(map(float, d.get("step_time_run_range_us", (0.0, 0.0)))),
            host_run_speed_range=tuple(map(float, d.get("host_run_speed_range", (1.0, 1.0)))),
            step_range_us=tuple(map(float, d.get("step_range_us", (0.0, 0.0)))),
            capture_cpu=d.get("capture_cpu", ""), target_cpu=d.get("target_cpu", ""),
            python_timing_steps=int(d.get("python_timing_steps", 1)),
            python_lines=int(d.get("python_lines", 0)), python_line_us=float(d.get("python_line_us", 0.0)),
            sync_groups=tuple(SyncPointGroup(**g) for g in d.get("sync_points_by_source", ())),
            comm=None if d.get("comm") is None else CommRecord(**d["comm"]),
            parallel_host=d.get("parallel_host"), workload=d.get("workload", ""),
            gpu_spec=None if spec is None else GPUSpec(**spec),
            spans=tuple(OpSpan.from_row(r) for r in timeline.get("spans", ())),
            memory_timeline=d.get("memory_timeline"),
            memory={k: d[k] for k in MEMORY_KEYS if k in d} or None,
            hazards=tuple(Hazard.from_json(h) for h in d.get("hazards", ())),
            extra={k: v for k, v in d.items() if k not in known},
        )

    def save(self, path: str | Path) -> None:
        from kernelcast.outputs import write_text_atomic

        write_text_atomic(path, json.dumps(self.to_json(), indent=1))

    @staticmethod
    def load(path: str | Path) -> "PredictionRecord":
        return PredictionRecord.from_json(json.loads(Path(path).read_text()))


MEMORY_KEYS = ("peak_memory_bytes", "resident_memory_bytes", "reserved_memory_bytes", "peak_reserved_memory_bytes",
               "memory_by_category", "memory_by_module", "peak_op", "fits", "memory_workspaces", "memory_notes",
               "expandable_segments")


def is_prediction_json(d: Any) -> bool:
    """A prediction's JSON (`--json`), as opposed to a capture's: tagged, or (older files) its summary keys."""
    return isinstance(d, dict) and (d.get("record") == PREDICTION_RECORD or {"step_time_us", "ops", "gpu"} <= set(d))
