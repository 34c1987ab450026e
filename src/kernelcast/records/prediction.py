"""The predict stage's record, as the report stage reads it and `--json` writes it: the prediction's summary,
its ops, sync points, hazards, collectives, the simulated timeline and the GPU's roofs."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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
