"""The device memory a captured step allocates and frees: a frozen record handed from capture to predict.

Every CUDA storage the workload's tensors lived in, from build() on, is one Allocation; events list, in the
order they happened, when each was allocated and freed. The capture sees fake tensors, which hold no memory:
what is recorded is what PyTorch's CUDA caching allocator would be asked for (a storage's bytes when it is
made, its release when the last tensor on it dies). predict/memory.py replays them through a model of that
allocator. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

# Stages of the capture, in order: the workload's build(), the unrecorded warm-up step, the recorded step,
# and what follows it (nothing is recorded there).
BUILD, WARMUP, STEP = "build", "warmup", "step"

# What a storage alive when the recorded step starts holds, as the capture could tell from its owner.
PARAMETER = "parameters"
GRADIENT = "gradients"
OPTIMIZER_STATE = "optimizer state"
BUFFER = "buffers and inputs"  # module buffers, the step's inputs, and anything else kept between steps
# ... and what the step allocates, told from when it lives (predict/memory.py assigns these two).
ACTIVATION = "activations saved for backward"
TEMPORARY = "temporaries"
WORKSPACE = "library workspaces"  # cuBLAS / cuBLASLt workspaces (predict/memory.py adds them)
CATEGORIES = (PARAMETER, GRADIENT, OPTIMIZER_STATE, BUFFER, ACTIVATION, TEMPORARY, WORKSPACE)

GIB, MIB, KIB = 2**30, 2**20, 2**10


def human_bytes(n: float) -> str:
    """Bytes as the memory lines and notes give them: GiB to two places, MiB and KiB to one (binary units); under
    a KiB in bytes ("0 B", "512 B")."""
    if abs(n) >= GIB:
        return f"{n / GIB:.2f} GiB"
    if abs(n) >= MIB:
        return f"{n / MIB:.1f} MiB"
    if abs(n) >= KIB:
        return f"{n / KIB:.1f} KiB"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class Allocation:
    """One storage: its bytes, the stream it was made on, and where in the capture it was made."""

    id: int  # 1, 2, ... in the order allocated
    nbytes: int
    stage: str  # BUILD, WARMUP or STEP
    op: int = -1  # STEP: index of the recorded op that made it (or the next recorded op); else -1
    stream: int = 0
    label: str = ""  # PARAMETER / GRADIENT / OPTIMIZER_STATE / BUFFER where the capture could tell; else ""
    name: str = ""  # the parameter's or module's name, where known
    storage: int = 0  # the storage's id as TensorMeta.storage gives it (0: not recorded)

    def to_json(self) -> list:
        return [self.id, self.nbytes, self.stage, self.op, self.stream, self.label, self.name, self.storage]

    @staticmethod
    def from_json(d: list) -> "Allocation":
        return Allocation(int(d[0]), int(d[1]), str(d[2]), int(d[3]), int(d[4]), str(d[5]), str(d[6]),
                          int(d[7]) if len(d) > 7 else 0)


@dataclass(frozen=True)
class MemoryTrace:
    """Allocations and frees in the order they happened. events[i] = (allocation id, position): a positive
    id is its allocation, a negative one its free. Position, in the recorded step: the index of the recorded
    op it happened before (the op that made an allocation has that index); in the warm-up step: how many ops
    had been dispatched in it (op_ordinals gives the same count for the recorded step's ops, so the two steps
    line up); in the build: -1.
    step_start / step_end: indexes into events where the recorded step begins and ends (the step's return
    value already dropped at step_end, as a training loop drops it)."""

    allocations: tuple[Allocation, ...]
    events: tuple[tuple[int, int], ...]
    step_start: int
    step_end: int
    notes: tuple[str, ...] = ()
    op_ordinals: tuple[tuple[int, int], ...] = ()  # (recorded op index, ops dispatched in the step up to it)

    def by_id(self) -> dict[int, Allocation]:
        return {a.id: a for a in self.allocations}

    def to_json(self) -> dict:
        return {"allocations": [a.to_json() for a in self.allocations],
                "events": [list(e) for e in self.events], "step_start": self.step_start,
                "step_end": self.step_end, "notes": list(self.notes),
                "op_ordinals": [list(p) for p in self.op_ordinals]}

    @staticmethod
    def from_json(d: dict) -> "MemoryTrace":
        return MemoryTrace(
            allocations=tuple(Allocation.from_json(a) for a in d["allocations"]),
            events=tuple((int(i), int(p)) for i, p in d["events"]),
            step_start=int(d["step_start"]), step_end=int(d["step_end"]), notes=tuple(d.get("notes", ())),
            op_ordinals=tuple((int(i), int(n)) for i, n in d.get("op_ordinals", ())),
        )
