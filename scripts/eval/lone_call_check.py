"""A lone call's time by kind of op: kernelcast against scripts/device/probe_lone_call_host.py's device runs (issue 33).

    python3 scripts/eval/lone_call_check.py validation/host_spread/lone_call_host_run*.json

Each probe case (the same call, at the same shape) is captured here under torch.no_grad() and predicted on the
H200: `first_step_us` (one call from an idle GPU, what KernelBench's CUDA events read) against the probe's
`lone_call_us`, the median over the runs given; and the host's part of it, the predicted CPU time per call against
the probe's `host_per_call_us` (back-to-back calls on a host timer). Per case and at the median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts


def predicted(case: str, dims: list[int]) -> tuple[float, float, int]:
    """(first_step_us, host µs per call, kernels) of one probe case predicted on the H200."""
    import torch
    from kernelcast.capture import capture_workload
    from kernelcast.predict import predict_capture
    from probe_lone_call_host import cases

    def build():
        a, b = torch.randn(*dims, device="cuda"), torch.randn(*dims, device="cuda")
        fn = cases(a, b)[case]

        def step():
            with torch.no_grad():
                fn()
        return step, ()

    pred = predict_capture(capture_workload(build, "h200"), "h200")
    return pred.first_step_us, pred.host_time_us, pred.kernels


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="probe_lone_call_host.py outputs")
    args = parser.parse_args()
    runs = [json.loads(Path(p).read_text()) for p in args.runs]
    keys = [(r["case"], r["shape"]) for r in runs[0]["rows"]]
    by_run = [{(r["case"], r["shape"]): r for r in run["rows"]} for run in runs]
    lone_errors, host_errors = [], []
    print(f"{'case':16s} {'shape':5s} {'kernels':>11s} {'lone call µs: measured':>24s} {'predicted':>10s} "
          f"{'host per call µs: measured':>28s} {'predicted':>10s}")
    for key in keys:
        rows = [run[key] for run in by_run if key in run]
        lone = statistics.median(r["lone_call_us"] for r in rows)
        host = statistics.median(r["host_per_call_us"] for r in rows)
        first, host_pred, kernels = predicted(key[0], rows[0]["dims"])
        lone_errors.append(first / lone - 1.0)
        host_errors.append(host_pred / host - 1.0)
        print(f"{key[0]:16s} {key[1]:5s} {rows[0]['kernels']:>4d} vs {kernels:<4d} {lone:>24.1f} {first:>10.1f} "
              f"{host:>28.1f} {host_pred:>10.1f}")
    print(f"\n{len(keys)} cases over {len(runs)} runs: lone call median error "
          f"{statistics.median(abs(e) for e in lone_errors):.1%} (signed {statistics.median(lone_errors):+.1%}), "
          f"within 20% {sum(abs(e) <= 0.2 for e in lone_errors)}; host per call median error "
          f"{statistics.median(abs(e) for e in host_errors):.1%} (signed {statistics.median(host_errors):+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
