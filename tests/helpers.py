"""Small builders of OpRecords for formula tests (no torch needed), and the environment for CLI subprocesses."""

import os
from pathlib import Path

from kernelcast.records import OpRecord, TensorMeta

SRC = Path(__file__).resolve().parents[1] / "src"


def subprocess_env() -> dict:
    """This environment with kernelcast's src importable from any working directory (PYTHONPATH may be relative)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def contiguous(shape, dtype="float32", device="cuda"):
    stride, acc = [], 1
    for n in reversed(shape):
        stride.append(acc)
        acc *= n
    return TensorMeta(tuple(shape), dtype, tuple(reversed(stride)), device)


def transposed(shape, dtype="float32"):
    """A (rows, cols) view of a (cols, rows) contiguous tensor, as w.t() gives."""
    rows, cols = shape
    return TensorMeta((rows, cols), dtype, (1, rows))


def op(name, args, outputs, tags=()):
    return OpRecord(index=0, op=name, args=args, outputs=tuple(outputs), tags=tuple(tags))
