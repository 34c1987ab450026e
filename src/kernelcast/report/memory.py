"""Device memory over the step, read from a prediction's optional `memory_timeline` for the timeline's panel.

The memory model writes the series; this reader accepts the layouts such a series is likely to take, so the two
need no agreement beyond the key:
- a list of [time_us, bytes] pairs;
- a list of objects, each with a time (`time_us`, `t_us`, `ts_us`) or an op index (`op_index`, `index`, `op`,
  placed at that op's end in the simulated step) and one or more `*bytes` values (one series per key);
- an object of parallel lists (`time_us` or `op_index` with `*bytes` lists), or one that wraps either of the
  above under `points`, `samples` or `series`.
Anything else is not drawn, and the figure says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from kernelcast.records import OpSpan

TIME_KEYS = ("time_us", "t_us", "ts_us")
INDEX_KEYS = ("op_index", "index", "op")
WRAPPER_KEYS = ("points", "samples", "series")
BYTES_SUFFIX = "bytes"


@dataclass(frozen=True)
class MemorySeries:
    times_us: tuple[float, ...]
    bytes_by_name: dict[str, tuple[float, ...]]  # "allocated_bytes" -> one value per time


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _span_end(span: OpSpan) -> float:
    return span.gpu_end_us if span.gpu_end_us is not None else span.cpu_end_us


def _op_time(index: Any, spans: Sequence[OpSpan]) -> float | None:
    """The end of op `index` in the simulated step; index len(spans) is after the last op (what the step frees
    as it returns: predict/memory.py writes that row)."""
    if isinstance(index, int) and index == len(spans) and spans:
        return max(_span_end(s) for s in spans)
    if not (isinstance(index, int) and 0 <= index < len(spans)):
        return None
    return _span_end(spans[index])


def _time_of(row: dict, spans: Sequence[OpSpan]) -> float | None:
    for key in TIME_KEYS:
        if _number(row.get(key)):
            return float(row[key])
    for key in INDEX_KEYS:
        if key in row:
            return _op_time(row[key], spans)
    return None


def _from_rows(rows: list, spans: Sequence[OpSpan]) -> MemorySeries | None:
    if all(isinstance(r, (list, tuple)) and len(r) == 2 and all(map(_number, r)) for r in rows):
        return MemorySeries(tuple(float(t) for t, _ in rows), {"bytes": tuple(float(b) for _, b in rows)})
    if not all(isinstance(r, dict) for r in rows):
        return None
    names = [k for k in rows[0] if k.endswith(BYTES_SUFFIX) and _number(rows[0][k])]
    times = [_time_of(r, spans) for r in rows]
    if not names or any(t is None for t in times):
        return None
    if any(not _number(r.get(n)) for r in rows for n in names):
        return None
    return MemorySeries(tuple(times), {n: tuple(float(r[n]) for r in rows) for n in names})


def _from_columns(d: dict, spans: Sequence[OpSpan]) -> MemorySeries | None:
    times = next((d[k] for k in TIME_KEYS if isinstance(d.get(k), list)), None)
    if times is None:
        index = next((d[k] for k in INDEX_KEYS if isinstance(d.get(k), list)), None)
        times = None if index is None else [_op_time(i, spans) for i in index]
    if times is None or any(not _number(t) for t in times):
        return None
    series = {k: v for k, v in d.items() if k.endswith(BYTES_SUFFIX) and isinstance(v, list) and len(v) == len(times)
              and all(map(_number, v))}
    if not series:
        return None
    return MemorySeries(tuple(float(t) for t in times), {k: tuple(float(x) for x in v) for k, v in series.items()})


def memory_series(raw: Any, spans: Sequence[OpSpan] = ()) -> MemorySeries | None:
    """The series in `raw` (a prediction's memory_timeline), sorted by time; None when there is none to draw."""
    if isinstance(raw, dict):
        for key in WRAPPER_KEYS:
            if isinstance(raw.get(key), (list, dict)):
                return memory_series(raw[key], spans)
        found = _from_columns(raw, spans)
    elif isinstance(raw, list) and raw:
        found = _from_rows(raw, spans)
    else:
        found = None
    if found is None or not found.times_us:
        return None
    order = sorted(range(len(found.times_us)), key=found.times_us.__getitem__)
    return MemorySeries(tuple(found.times_us[i] for i in order),
                        {k: tuple(v[i] for i in order) for k, v in found.bytes_by_name.items()})
