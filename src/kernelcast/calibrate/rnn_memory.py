"""Fit cuDNN's RNN workspace size, and check the reserve-space rule, on a GPU probe's allocator events (issue 35:
the fit's maths in the library; scripts/fit/fit_rnn_memory.py runs it on validation/probes/probe_rnn_memory.json).

Per configuration of scripts/device/probe_rnn_memory.py: the workspace is the largest allocation `_cudnn_rnn` freed before
returning; the reserve, in training, the largest it kept besides its outputs. The workspace is fitted as a sum of
the buffers cuDNN's kernels plausibly need (predict/memory.py cudnn_rnn_workspace_terms), each term a size in
bytes with a non-negative coefficient, by least squares on relative error (scipy's NNLS); its held-out error over
FOLDS folds is reported beside it. predict/memory.py carries the coefficients (CUDNN_RNN_WORKSPACE_TERMS);
capture/rnn.py the reserve rule, checked here.
"""

from __future__ import annotations

import collections
import statistics

FOLDS = 10


def parse(events: list) -> tuple[list[int], list[int]]:
    """(sizes allocated and freed inside the call, sizes allocated and still held after it), largest first, from
    the allocator's ("alloc" | "free_completed", bytes) events of one call."""
    alive: collections.Counter = collections.Counter()
    freed = []
    for action, size in events:
        if action == "alloc":
            alive[size] += 1
        elif action == "free_completed" and alive[size] > 0:
            alive[size] -= 1
            freed.append(size)
    return sorted(freed, reverse=True), sorted(alive.elements(), reverse=True)


def packed_rows(steps: int, batch: int) -> int:
    """Rows of a packed batch as the probe draws it (rnn_times.packed_lengths)."""
    from .rnn_times import packed_lengths

    return sum(packed_lengths(steps, batch))


def rows_of(probe: dict) -> list[dict]:
    """{config, rows, workspace, reserve} of each probed configuration without dropout (bytes)."""
    out = []
    for row in probe["rows"]:
        c = row.get("config", {})
        if "error" in row or c.get("dropout"):
            continue
        freed, kept = parse(row["forward_events"])
        for size in row["outputs"]:
            if size in kept:
                kept.remove(size)
        steps, batch = c["steps"], c["batch"]
        rows = packed_rows(steps, batch) if c["packed"] else steps * batch
        out.append({"config": c, "rows": rows, "workspace": freed[0] if freed else 0,
                    "reserve": kept[0] if (kept and c["train"]) else 0})
    return out


def terms(r: dict) -> list[float]:
    """The workspace model's terms (bytes) of one row."""
    from kernelcast.capture.rnn import CUDNN_RNN_MODES
    from kernelcast.predict.memory import cudnn_rnn_workspace_terms
    from kernelcast.records import DTYPE_BYTES

    c = r["config"]
    return cudnn_rnn_workspace_terms(CUDNN_RNN_MODES[c["mode"]], c["hidden"], c["layers"], c["bidirectional"],
                                     r["rows"], c["batch"], c["input"], DTYPE_BYTES[c["dtype"]])


def fit(rows: list[dict]) -> list[float]:
    """Non-negative coefficients of terms() minimizing the workspaces' relative error."""
    import numpy as np
    from scipy.optimize import nnls

    x = np.array([terms(r) for r in rows])
    y = np.array([float(r["workspace"]) for r in rows])
    coef, _ = nnls(x / y[:, None], np.ones(len(y)))  # relative error: each row divided by its measurement
    return [float(c) for c in coef]


def fit_and_check(probe: dict) -> dict:
    """The workspace coefficients with their held-out error (FOLDS folds), and how many measured reserves the
    capture's rule (capture/rnn.py cudnn_rnn_reserve_bytes) gives exactly."""
    import numpy as np
    from sklearn.model_selection import KFold

    from kernelcast.capture.rnn import CUDNN_RNN_MODES, cudnn_rnn_reserve_bytes
    from kernelcast.records import DTYPE_BYTES

    rows = rows_of(probe)
    measured = [r for r in rows if r["workspace"]]
    held = [0.0] * len(measured)
    for train, test in KFold(FOLDS, shuffle=True, random_state=0).split(measured):
        coef = fit([measured[i] for i in train])
        for i in test:
            held[i] = abs(float(np.dot(terms(measured[i]), coef)) / measured[i]["workspace"] - 1)
    coef = fit(measured)
    reserve = [(r, cudnn_rnn_reserve_bytes(CUDNN_RNN_MODES[r["config"]["mode"]], r["config"]["hidden"],
                                           r["config"]["layers"], r["config"]["bidirectional"], r["rows"],
                                           DTYPE_BYTES[r["config"]["dtype"]])) for r in rows if r["reserve"]]
    return {"workspace_coefficients": coef, "workspace_points": len(measured),
            "workspace_held_out": {"folds": FOLDS, "median_error": round(statistics.median(held), 4),
                                   "p90_error": round(sorted(held)[int(0.9 * len(held))], 4)},
            "reserve_points": len(reserve), "reserve_exact": sum(p == r["reserve"] for r, p in reserve),
            "reserve_errors_not_exact": sorted(round(p / r["reserve"] - 1, 3) for r, p in reserve
                                               if p != r["reserve"])}
