"""The capture stage's records: each op of a recorded step (OpRecord, its tensors as TensorMeta), the settings
the step ran under, and the Capture that holds them, its memory trace (records/memory.py) and their JSON."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .common import DECOMPOSED_TAG, DTYPE_BYTES, FUSION_WRITES, HOST_OP_PREFIX, PHASES, POST_BACKWARD  # noqa: F401
from .memory import MemoryTrace

CAPTURE_FORMAT_VERSION = 1


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
        for name, value in self.args.items():
            if name == FUSION_WRITES:  # what a TorchScript fusion group writes (capture/torchscript_fusion.py)
                continue
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
    memory: MemoryTrace | None = None  # the CUDA storages made and freed, from build() on (records/memory.py)
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
