"""Fit the host cost of torch.compile'd code per unit, from the device probe of compiled calls.

    PYTHONPATH=src python3 scripts/fit/fit_compiled_host.py \
        validation/probes/h100_compiled_host/compiled_host_run*.json \
        validation/probes/h100_compiled_host_more/compiled_host_more_run*.json \
        --reference validation/probes/compiled_host.json \
        --host-runs validation/probes/h200_compiled_host_bwd/compiled_host_bwd_run*.json --wall-modes reduce-overhead \
        --cases mm_relu_chain sum_inputs many_outputs mlp_module mlp_backward graph_breaks \
        [--out validation/probes/compiled_host_fit.json]

scripts/device/probe_compiled_host.py measures, on a GPU's host, the CPU time per call of small compiled functions
and modules (eager, default, reduce-overhead) whose kernels never fill the GPU queue. The committed fit is from
six runs on an H100 machine (2026-12-06, when no H200 came; the module and backward cases are new there), per
case their median, scaled to the H200's host by the median ratio over the cases the H200's run
(compiled_host.json, 2026-12-01) measured too; the reduce-overhead rows of mlp_backward, which failed on the
H100 (cudagraph trees refused the compiled backward's first call there), come from three runs on the H200's host
itself (--host-runs, 2026-12-06), fitted to their wall time (--wall-modes): autograd runs the backward on its
own thread while the caller waits, so the caller's CPU time (about half the wall there) leaves it out. They set
replay_backward_us, the host cost of a backward graph's replay beyond a forward one's (AOTAutograd's backward
from the autograd engine, the trees' checks). One of the probe's cases is left out (--cases), because its
capture here does not run what the device ran, and a fit that took it in missed it by far: encoder_layers (the
capture keeps nn.TransformerEncoderLayer's fused fast-path op as one extern kernel where the device ran more: -70%
and -79%). graph_breaks is in since the capture stopped counting Dynamo's own Python as the model's
(capture/host_clock.py _COMPILE_PASS, 2026-12-06: it had been +46% to +261%): Dynamo compiles no graph of it here
nor, by its times, on the device (5-6 µs a call over its eager twin at 1 and 4 breaks), and it is the case that
sets the per-call unit apart from the per-graph one. Each case is captured here as `kernelcast predict --compile
MODE` does and its compiled units counted from the capture: calls of compiled functions, graph calls, their tensor
inputs, whether they traced an nn.Module, backward graphs (host.compiled_graph), Triton launches, allocations and
reinterpretations in Inductor's wrapper, CUDA graph replays and their inputs (host.cudagraph_replay). The rest of
each call's host time (extern kernels such as cuBLAS, the static-input copies) is priced by the profile's eager host
model, corrected by that model's miss on the same case run eagerly where the extern kernels are GEMMs (the eager
model prices a 64x64 mm's launch at 13 µs, the probe's eager rows measured about 25: that miss is not the compiled
code's); what the measurement leaves is fitted as units x per-unit costs, non-negative, by least squares on relative
error (scipy's NNLS), default and reduce-overhead apart: calibrate/compiled_host.py does the fitting; this script
captures the probe's cases and writes the fit, which scripts/fit/build_h200_profile.py puts into the profile's host
section as `compiled`, read by predict/host.py's HostModel.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import kernelcast  # noqa: F401  (before torch)

from kernelcast.calibrate.compiled_host import fit, merged_runs

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts


def _capture(name: str, size: int, mode: str | None):
    """One probe case (scripts/device/probe_compiled_host.py) captured as `kernelcast predict --compile MODE` does."""
    import torch

    from kernelcast.capture import capture_workload
    from probe_compiled_host import case

    def build():
        fn, args = case(name, size)
        before = getattr(fn, "before_call", None)  # the probe calls it before each call (mlp_backward_none)

        def step(*a):
            if before is not None:
                before()
            with torch.no_grad():
                return fn(*a)

        return step, args

    return capture_workload(build, "h200", workload=f"{name} {size}", compile_mode=mode)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe", nargs="+", help="probe runs (separate processes): per case their median")
    parser.add_argument("--reference", help="a probe run on the profiled GPU's host, to scale the runs to it")
    parser.add_argument("--host-runs", nargs="*", default=[],
                        help="probe runs on the profiled GPU's host itself: unscaled, adding the rows the runs lack")
    parser.add_argument("--wall-modes", nargs="*", default=[], choices=("eager", "default", "reduce-overhead"),
                        help="modes whose calls with a backward are fitted to their wall time, not the caller's CPU")
    parser.add_argument("--cases", nargs="*", help="the probe's case names to fit on (all by default)")
    parser.add_argument("--out", default=str(ROOT / "validation/probes/compiled_host_fit.json"))
    args = parser.parse_args()
    runs = [json.loads(Path(p).read_text()) for p in args.probe]
    reference = json.loads(Path(args.reference).read_text()) if args.reference else None
    host_runs = tuple(json.loads(Path(p).read_text()) for p in args.host_runs)
    doc = runs[0] if len(runs) == 1 and reference is None and not host_runs else \
        merged_runs(runs, reference, host_runs)
    if args.cases:
        doc = {**doc, "rows": [r for r in doc["rows"] if r["case"] in args.cases]}
    units, rows = fit(doc, _capture, tuple(args.wall_modes))
    errors = {}
    for r in rows:
        e = r["fitted_us"] / r["host_us"] - 1
        errors.setdefault(r["mode"], []).append(abs(e))
        print(f"{r['case']:17s} {r['size']:4d} {r['mode']:16s} measured {r['host_us']:8.1f} "
              f"fitted {r['fitted_us']:8.1f} ({e:+.0%})")
    print("per-unit µs:", units)
    for mode, e in errors.items():
        print(f"{mode}: median |error| {statistics.median(e):.1%}, worst {max(e):.1%} over {len(e)} cases")
    Path(args.out).write_text(json.dumps({
        "command": "python3 scripts/fit/fit_compiled_host.py " + " ".join(sys.argv[1:]), "probe": doc["command"],
        "host_ratio_to_reference": doc.get("host_ratio_to_reference"),
        "units_us": units, "median_error": {m: round(statistics.median(e), 4) for m, e in errors.items()},
        "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
