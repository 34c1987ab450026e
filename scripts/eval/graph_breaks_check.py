"""The graph breaks a compiled capture lists against torch._dynamo.explain's, zoo workload by workload (issue 32).

    python3 scripts/eval/graph_breaks_check.py [--only NAME ...] [--out FILE]

For each zoo workload (examples/zoo/registry.py), three fresh processes: one captures the step as
`kernelcast predict --compile default` does (capture_workload(..., compile_mode="default")) and reads the graph
breaks from the capture's notes; the other two build the same workload on fake CUDA, with no capture running, run
it once eager, and then (a) call it three times under a plain torch.compile (the eager backend) and read the breaks
Dynamo recorded, (b) ask torch._dynamo.explain(step)(*args). Breaks are compared by where they are (file name and
line). explain follows one call and reports a break only where a graph was made before it: a resume function that
breaks again before any tensor work (an optimizer's step after `loss.backward()`) is missing from its list,
though Dynamo breaks there in every run. Separate processes, because Dynamo keeps compiled code and state
between calls in one. A workload a side cannot run is listed with its error, not counted as agreeing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples" / "zoo")]
WORKER_TIMEOUT_S = 600


def _where(filename: str, line: int) -> str:
    return f"{os.path.basename(filename)}:{line}"


def _build(name: str):
    from registry import ZOO

    from kernelcast.capture.workload import load_build

    spec = dict((n, s) for n, _, s in ZOO)[name]
    path, func = spec.split(":")
    return load_build(f"{ROOT / path}:{func}")


def worker_capture(name: str) -> list[str]:
    """The places of the graph breaks the compiled capture lists (its notes: 'graph break (Dynamo) at FILE:LINE in')."""
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
    from kernelcast.capture import capture_workload
    from kernelcast.capture.workload import on_sys_path

    build, folder = _build(name)
    with on_sys_path(folder):
        cap = capture_workload(build, "h200", compile_mode="default")
    out = []
    for note in cap.notes:
        if note.startswith("graph break"):
            place = note.split(" at ", 1)[1].split(" in ", 1)[0]
            filename, _, line = place.rpartition(":")
            out.append(_where(filename, int(line)))
    return sorted(out)


COMPILED_CALLS = 3  # a plain torch.compile'd step's calls after its eager first (the capture's warm-up and recorded)


def worker_compile(name: str) -> list[str]:
    """The places of the graph breaks Dynamo records (torch/_dynamo/output_graph.py graph_break_reasons) over
    COMPILED_CALLS calls of the step under a plain torch.compile (the eager backend), on fake CUDA with no
    capture running: the user's own breaks, without kernelcast's instrumentation."""
    import kernelcast  # noqa: F401
    import torch
    from torch._dynamo import output_graph

    from kernelcast.capture.api import _session
    from kernelcast.capture.workload import on_sys_path

    build, folder = _build(name)
    with on_sys_path(folder), _session("h200"):
        step, args = build()
        args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
        step(*args)
        torch._dynamo.reset()
        compiled = torch.compile(step, backend="eager")
        for _ in range(COMPILED_CALLS):
            compiled(*args)
        reasons = list(getattr(output_graph, "graph_break_reasons", ()))
    return sorted({_where(r.user_stack[-1].filename, r.user_stack[-1].lineno) for r in reasons if r.user_stack})


def worker_explain(name: str) -> list[str]:
    """The places torch._dynamo.explain gives for the step's graph breaks, on fake CUDA with no capture running, after
    one eager step (the capture's list covers its warm-up steps and the recorded one, so a step whose later calls
    take another path, an optimizer's after its state exists, is compared on that path)."""
    import kernelcast  # noqa: F401
    import torch

    from kernelcast.capture.api import _session
    from kernelcast.capture.workload import on_sys_path

    build, folder = _build(name)
    with on_sys_path(folder), _session("h200"):
        step, args = build()
        args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
        step(*args)  # once eager, as a loop's first step leaves it (an optimizer's state made)
        explained = torch._dynamo.explain(step)(*args)
    return sorted(_where(b.user_stack[-1].filename, b.user_stack[-1].lineno)
                  for b in explained.break_reasons if b.user_stack)


def _run_worker(kind: str, name: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    try:
        done = subprocess.run([sys.executable, __file__, "--worker", kind, name], capture_output=True, text=True,
                              env=env, timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"no answer in {WORKER_TIMEOUT_S} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["exit " + str(done.returncode)])[-1][:300]}
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--out")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, name = args.worker
        places = {"capture": worker_capture, "compile": worker_compile, "explain": worker_explain}[kind](name)
        print(json.dumps({"breaks": places}))
        return 0
    from registry import ZOO

    names = [n for n, _, _ in ZOO if not args.only or n in args.only]
    unknown = sorted(set(args.only or ()) - set(names))
    if unknown:
        print(f"error: not in the zoo: {', '.join(unknown)}", file=sys.stderr)
        return 2
    rows, agree, agree_explain, ran = [], 0, 0, 0
    for name in names:
        t0 = time.perf_counter()
        sides = {kind: _run_worker(kind, name) for kind in ("capture", "compile", "explain")}
        rows.append({"name": name, **sides, "seconds": round(time.perf_counter() - t0, 1)})
        if args.out:  # after every workload: a run stopped at its time limit keeps what it checked
            Path(args.out).write_text(json.dumps({"command": "python3 scripts/eval/graph_breaks_check.py "
                                                  + " ".join(sys.argv[1:]), "rows": rows}, indent=1) + "\n")
        errors = [f"{kind}: {side['error']}" for kind, side in sides.items() if "error" in side]
        if errors:
            print(f"{name:32s} error: {'; '.join(errors)}", flush=True)
            continue
        ran += 1
        captured, compiled, explained = (sorted(set(sides[k]["breaks"])) for k in ("capture", "compile", "explain"))
        agree += captured == compiled
        agree_explain += captured == explained
        print(f"{name:32s} capture {len(captured)} compile {len(compiled)} explain {len(explained)}"
              + ("" if captured == compiled == explained else f"  capture {captured} / compile {compiled} / "
                 f"explain {explained}"), flush=True)
    print(f"graph breaks at the same places as a plain torch.compile's on {agree} of {ran} workloads, as "
          f"torch._dynamo.explain's on {agree_explain} ({len(names) - ran} could not run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
