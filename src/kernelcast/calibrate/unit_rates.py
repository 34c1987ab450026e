"""Ops whose time follows a count of units, not their bytes (the profile's `timings.unit_rates`, read by
predict/calibrated.py, which takes the longer of the units' time and the bytes at the streaming copy's rate).

- Row gathers (index_select, and index / embedding with one index tensor: vectorized_gather_kernel): a fixed
  time per index. On the H200 500k indices took 302 µs whether the rows were 128 fp32, 128 bf16 or 256 fp32
  values (validation/h200_sweep_raw.json.gz, zoo gcn_train): about 0.6 ns a row, where the bytes at the gather
  curve's rate gave 200-600 µs.
- Gathers of rows that are not a whole number of 16-byte vectors (a 1-D source, 3 to 33 floats a row): the
  elementwise gather kernel, a floor plus a time per index and per element gathered (calibrate section
  gather_grid: 5.4 µs + 0.6 ps an index + 3.1 ps an element on the H200, 18% median over 240 cases; tables
  larger than the L2 run slower than that, 29% median).
- index_select of at most 16 indices, and embedding (indexSelectSmallIndex): a floor and a time per index and
  slice element each thread walks, by kernel path (specialised / generic), fitted on calibrate section
  small_index_grid (costs/gather.py says why neither rows nor bytes price it).
- index_add_ (indexFuncLargeIndex, an atomicAdd per element): a fixed time per element added, by item size
  (7.2 ps fp32, 8.4 ps bf16 on the H200 across 0.26M to 128M elements; the bytes gave -35% on gcn_train).
- index_add_ of at most 16 indices (indexFuncSmallIndex): as the small index_select, a floor and a time per index
  and slice element a thread walks, by kernel path, fitted on calibrate section small_index_add_grid.
- nll_loss with a reduction, forward and backward (one thread block walking the frames, costs/losses.py
  nll_walk): a floor and a time per frame each thread walks, after the L2 flush and from L2, fitted on calibrate
  section nll_loss_grid (the backward's zero fill of the gradient, a kernel of its own, left out of its time).

Each is a line, time = floor_us + us_per_unit x units, least squares on relative error over the calibration's
cases of that op (sweep cases index_select and index_add_).
"""

from __future__ import annotations

import math
import statistics

from kernelcast.costs.gather import small_index_units, vectorized_rows
from kernelcast.costs.losses import nll_loss_threads
from kernelcast.records import OpRecord, TensorMeta

from .time_model import relative_least_squares

GATHER_OPS = ("aten.index_select.", "aten.index.Tensor", "aten.embedding.")
SMALL_INDEX_CASES = "small_index_"  # calibrate/grids.py small_index_grid's and small_index_add_grid's case kinds
WARM_SUFFIX = "_warm"  # its cases timed without the L2 flush
SMALL_INDEX_CASE_KINDS = ("small_index_select", "small_index_embedding", "small_index_select_warm")
SMALL_INDEX_ADD_CASE_KINDS = ("small_index_add",)  # calibrate/grids.py small_index_add_grid
SMALL_INDEX_ADD_CHECK_KINDS = ("small_index_add_check",)  # the same grid's cases held out of the fit
DEFAULT_SM_COUNT = 132  # the H200's and the H100 SXM's
NLL_CASE_KINDS = ("nll_loss_forward", "nll_loss_backward", "nll_loss_forward_warm", "nll_loss_backward_warm")
NLL_KERNEL = "nll_loss_"  # in the walk kernel's name (nll_loss_forward_reduce_cuda_kernel_2d, ..._backward_...)
INDEX_ADD_OPS = ("aten.index_add_.", "aten.index_add.")
MIN_POINTS = 3


def _line(points: list[tuple[float, float]]) -> dict | None:
    """time = floor_us + us_per_unit x units, weighted by 1/time (relative error)."""
    if len(points) < MIN_POINTS:
        return None
    floor_us, per_unit = relative_least_squares([[1.0, u] for u, _ in points], [t for _, t in points])
    errors = [abs((floor_us + per_unit * u) / t - 1) for u, t in points]
    return {"floor_us": round(float(floor_us), 4), "us_per_unit": float(per_unit), "points": len(points),
            "median_error": round(statistics.median(errors), 4), "worst_error": round(max(errors), 4)}


def _op_points(cases: list[dict], prefixes: tuple[str, ...], units) -> list[tuple]:
    points = []
    for case in cases:
        if "error" in case or not case.get("ops"):
            continue
        ops = [o for o in case["ops"] if o["op"].startswith(prefixes)]
        if len(ops) == 1 and case.get("n_items", 1) == 1:
            found = units(ops[0])
            if found is not None:
                points.append((*found, case["device_us"]))
    return points


def _index_count(op: dict) -> int | None:
    index = op["args"].get("index") or op["args"].get("indices")
    index = index[0] if isinstance(index, list) else index
    return math.prod(index["T"]) if isinstance(index, dict) and "T" in index else None


def _vectorized(op: dict) -> bool:
    """Whether the gather's source rows take the vectorized kernel (costs/gather.py vectorized_rows)."""
    source = op["args"].get("weight") if op["op"].startswith("aten.embedding") else op["args"].get("self")
    return isinstance(source, dict) and vectorized_rows(TensorMeta.from_json(source))


def _gathered_rows(op: dict) -> tuple[int] | None:
    count = _index_count(op)
    return (count,) if count is not None and _vectorized(op) else None


def _gathered_elements(op: dict) -> tuple[int, int] | None:
    """(indices, output elements) of a gather the elementwise kernel runs (rows too narrow to vectorize)."""
    count = _index_count(op)
    if count is None or _vectorized(op) or not op.get("outputs"):
        return None
    return count, math.prod(op["outputs"][0]["T"])


def _plane(points: list[tuple[float, float, float]]) -> dict | None:
    """time = floor_us + us_per_index x indices + us_per_element x elements (relative least squares)."""
    if len(points) < MIN_POINTS:
        return None
    coef = relative_least_squares([[1.0, i, e] for i, e, _ in points], [t for *_, t in points])
    floor_us, per_index, per_element = (max(c, 0.0) for c in coef)
    errors = [abs((floor_us + per_index * i + per_element * e) / t - 1) for i, e, t in points]
    return {"floor_us": round(float(floor_us), 4), "us_per_index": float(per_index),
            "us_per_element": float(per_element), "points": len(points),
            "median_error": round(statistics.median(errors), 4), "worst_error": round(max(errors), 4)}


def _added_elements(op: dict) -> tuple[int, int] | None:
    source = op["args"].get("source")
    if not isinstance(source, dict):
        return None
    return math.prod(source["T"]), 4 if source["dtype"] == "float32" else 2


def _small_index_units(sm_count: int):
    """units(op) of an index_select / embedding / index_add that runs a small-index kernel: (path, indices x slice
    elements a thread walks, item size), None for any other (costs/gather.py small_index_units)."""
    def units(op: dict) -> tuple[str, int, int] | None:
        record = OpRecord.from_json(op)
        found = small_index_units(record, sm_count)
        return None if found is None else (found[0], found[1] * found[2], record.tensors_out()[0].itemsize)
    return units


def _small_index_lines(cases: list[dict], sm_count: int, kinds: tuple[str, ...] = SMALL_INDEX_CASE_KINDS,
                       ops: tuple[str, ...] = GATHER_OPS, by_itemsize: bool = False) -> dict:
    """{path: line, with the L2-resident cases' line as its "l2_resident" where there are such, and with
    by_itemsize a line per item size too} of the small-index kernels of these case kinds (calibrate/grids.py
    small_index_grid: indexSelectSmallIndex, cases timed after the L2 flush, and the "_warm" ones again without
    it; small_index_add_grid: indexFuncSmallIndex, whose bf16 atomics, two lanes at a time, run slower than
    fp32's: on an H100 2.04 + 0.76 µs per unit against 1.68 + 0.70 on the specialised kernel)."""
    out = {}
    for warm in (False, True):
        picked = [c for c in cases if c.get("kind") in kinds and c["kind"].endswith(WARM_SUFFIX) == warm]
        points = _op_points(picked, ops, _small_index_units(sm_count))
        for path in sorted({p[0] for p in points}):
            line = _line([(u, t) for p, u, _, t in points if p == path])
            if line and not warm:
                out[path] = line
                if by_itemsize:
                    lines = {str(size): _line([(u, t) for p, u, s, t in points if p == path and s == size])
                             for size in sorted({s for p, _, s, _ in points if p == path})}
                    out[path]["by_itemsize"] = {size: line for size, line in lines.items() if line}
            elif line and path in out:
                out[path]["l2_resident"] = line
    return out


def _nll_lines(cases: list[dict]) -> dict:
    """{"forward": line, "backward": line}, each with its L2-resident line ("l2_resident") where measured: the
    walk kernel's own time (the case's work item named for it: the backward's zero fill is another) against the
    frames each thread walks (calibrate/grids.py nll_loss_grid)."""
    out = {}
    for warm in (False, True):
        for direction in ("forward", "backward"):
            kind = f"nll_loss_{direction}" + (WARM_SUFFIX if warm else "")
            points = []
            for case in cases:
                if case.get("kind") != kind or "error" in case or not case.get("items_us"):
                    continue
                walk = [us for name, us in zip(case["items"], case["items_us"]) if NLL_KERNEL in name]
                if len(walk) == 1:
                    frames = case["frames"]
                    points.append((-(-frames // nll_loss_threads(frames)), walk[0]))
            line = _line(points)
            if line and not warm:
                out[direction] = line
            elif line and direction in out:
                out[direction]["l2_resident"] = line
    return out


def fit(cases: list[dict], sm_count: int = DEFAULT_SM_COUNT) -> dict:
    """The profile's `timings.unit_rates`: {"gather_rows": line, "gather_elements": plane, "small_index": {path:
    line}, "small_index_add": {path: line}, "nll_walk": {direction: line}, "index_add_elements": {item size:
    line}}, each present where the run
    measured enough cases; sm_count: the measured GPU's SMs (how much of a slice each thread of
    indexSelectSmallIndex walks)."""
    out: dict = {}
    try:
        import numpy  # noqa: F401
    except ImportError:
        return out
    small = _small_index_lines(cases, sm_count)
    if small:
        out["small_index"] = small
    small_add = _small_index_lines(cases, sm_count, SMALL_INDEX_ADD_CASE_KINDS, INDEX_ADD_OPS, by_itemsize=True)
    if small_add:
        out["small_index_add"] = small_add
    nll = _nll_lines(cases)
    if nll:
        out["nll_walk"] = nll
    cases = [c for c in cases if not c.get("kind", "").startswith(SMALL_INDEX_CASES)]
    rows = _line(_op_points(cases, GATHER_OPS, _gathered_rows))
    if rows:
        out["gather_rows"] = rows
    elements = _plane(_op_points(cases, GATHER_OPS, _gathered_elements))
    if elements:
        out["gather_elements"] = elements
    added = _op_points(cases, INDEX_ADD_OPS, _added_elements)
    by_size = {str(s): _line([(u, t) for u, size, t in added if size == s]) for s in sorted({p[1] for p in added})}
    by_size = {s: line for s, line in by_size.items() if line}
    if by_size:
        out["index_add_elements"] = by_size
    return out
