"""Small builders of OpRecords for formula tests: no torch needed."""

from kernelcast.records import OpRecord, TensorMeta


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
