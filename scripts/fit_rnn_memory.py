"""Fit cuDNN's RNN workspace size, and check the reserve-space rule, on the H200 probe's allocator events.

    python3 scripts/fit_rnn_memory.py validation/probes/probe_rnn_memory.json [--out validation/probes/rnn_memory_fit.json]

Per configuration of scripts/probe_rnn_memory.py: the workspace is the largest allocation `_cudnn_rnn` freed before
returning; the reserve, in training, the largest it kept besides its outputs. The workspace is fitted as a sum of
the buffers cuDNN's kernels plausibly need, each term a size in bytes with a non-negative coefficient (least squares
on relative error): a constant, the input projections of one layer for every step (directions x rows x gates x
hidden), every layer's outputs (layers x directions x rows x hidden), per-layer states (layers x directions x batch
x hidden), the recurrent weights (layers x directions x gates x hidden^2) and the input (directions x rows x input
size). Its 10-fold held-out error is reported beside it. predict/memory.py carries the coefficients
(CUDNN_RNN_WORKSPACE_TERMS); capture/rnn.py the reserve rule, checked here.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from kernelcast.capture.rnn import CUDNN_RNN_MODES, cudnn_rnn_reserve_bytes  # noqa: E402
from kernelcast.predict.memory import cudnn_rnn_workspace_terms  # noqa: E402
from kernelcast.records import DTYPE_BYTES  # noqa: E402

FOLDS = 10


def parse(events: list) -> tuple[list[int], list[int]]:
    """(sizes allocated and freed inside the call, sizes allocated and still held after it), largest first."""
    alive: collections.Counter = collections.Counter()
    freed = []
    for action, size in events:
        if action == "alloc":
            alive[size] += 1
        elif action == "free_completed" and alive[size] > 0:
            alive[size] -= 1
            freed.append(size)
    return sorted(freed, reverse=True), sorted(alive.elements(), reverse=True)


def rows_of(probe: dict) -> list[dict]:
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
        # a packed input holds each sequence's own length (probe_rnn_memory.py draws them with linspace)
        rows = int(torch.linspace(steps, max(steps // 4, 1), batch).long().sum()) if c["packed"] else steps * batch
        out.append({"config": c, "rows": rows, "workspace": freed[0] if freed else 0,
                    "reserve": kept[0] if (kept and c["train"]) else 0})
    return out


def terms(r: dict) -> list[float]:
    c = r["config"]
    return cudnn_rnn_workspace_terms(CUDNN_RNN_MODES[c["mode"]], c["hidden"], c["layers"], c["bidirectional"],
                                     r["rows"], c["batch"], c["input"], DTYPE_BYTES[c["dtype"]])


def fit(rows: list[dict]) -> list[float]:
    import numpy as np
    from scipy.optimize import nnls

    x = np.array([terms(r) for r in rows])
    y = np.array([float(r["workspace"]) for r in rows])
    coef, _ = nnls(x / y[:, None], np.ones(len(y)))  # relative error: each row divided by its measurement
    return [float(c) for c in coef]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe")
    parser.add_argument("--out", default="validation/probes/rnn_memory_fit.json")
    args = parser.parse_args()
    import numpy as np
    from sklearn.model_selection import KFold

    rows = rows_of(json.loads(Path(args.probe).read_text()))
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
    exact = sum(p == r["reserve"] for r, p in reserve)
    result = {"command": f"python3 scripts/fit_rnn_memory.py {args.probe}", "workspace_coefficients": coef,
              "workspace_points": len(measured),
              "workspace_held_out": {"folds": FOLDS, "median_error": round(statistics.median(held), 4),
                                     "p90_error": round(sorted(held)[int(0.9 * len(held))], 4)},
              "reserve_points": len(reserve), "reserve_exact": exact,
              "reserve_errors_not_exact": sorted(round(p / r["reserve"] - 1, 3) for r, p in reserve
                                                 if p != r["reserve"])}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
