"""Fit each GPU's achieved-rate factors (devices/achieved.py) to KernelBench's published timings, and say how
well they hold out.

    python3 scripts/eval/kernelbench_validate.py capture          # once: build/kernelbench/captures
    python3 scripts/fit/fit_gpu_rates.py predict                 # per program and GPU, predicted time by class
    python3 scripts/fit/fit_gpu_rates.py fit                     # -> src/kernelcast/devices/achieved.json

predict: every captured program predicted on the H200 and on every GPU with published timings, with the
achieved factors off (the datasheet ratios alone), its GPU time split by rate class (devices/achieved.py
RATE_CLASSES): the part of each op's time that its class's factor scales, read as the difference between the
op predicted with every factor 2 and with every factor 1 (the kernel model is linear in it), written to
build/kernelbench/rates_predicted.json (about 7 minutes on two cores).

fit: each GPU's factors and their held-out errors, by kernelcast.calibrate.gpu_rates (its docstring says how
the factors are fitted and held out), over the programs that keep the H200 busy (scripts/eval/kernelbench_validate.py's
rule), written to src/kernelcast/devices/achieved.json. (Fitting each class to the programs it dominates alone had
lost forward convolutions' factor when a chain's other kernels got nearer their measured time and fell under the
dominance share.)
The H200 reference is measured with torch 2.11 and the published GPUs with torch 2.5: a change in what torch or
its libraries run between the two is inside every factor alike (the H100, torch 2.5, against the H200, torch 2.11,
of the same architecture, shows its size).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts

from kernelbench_validate import CAPTURES, OWN_RUNS, PUBLISHED, _busy, _ours, _published, own_runs  # noqa: E402

from kernelcast.calibrate.gpu_rates import MIN_PROGRAMS, MIN_SHARE, REFERENCE, fit_all, fit_one_set  # noqa: E402
from kernelcast.devices.achieved import AchievedRates, capability_prior  # noqa: E402

PREDICTED = ROOT / "build" / "kernelbench" / "rates_predicted.json"
OUT = ROOT / "src" / "kernelcast" / "devices" / "achieved.json"


def current_torch_sets(predicted: dict, reference: dict) -> dict[str, dict]:
    """{GPU: {torch "major.minor": set}} for the GPUs we timed ourselves (kernelbench_validate.py OWN_RUNS): the
    factors fitted to our runs, their classes' programs and held-out error, as achieved.json's "by_torch" holds
    them (a prediction takes the set of the torch nearest its capture's, devices/achieved.py). A user runs a
    current torch, and the published torch 2.5 ran other cuDNN engines: on the H100 the published timings'
    factors (convolutions 1.30x) held out at 11.7% on our torch-2.11 runs against 7.2% for factors fitted to
    them (scripts/eval/torch_era_check.py)."""
    out = {}
    for gpu, torch_version in ((g, runs.torch) for g, runs in OWN_RUNS.items()):
        ours, files = own_runs(gpu)
        out[gpu] = {torch_version.split()[-1]: {**fit_one_set(predicted, ours, reference, gpu, _busy_row),
                                                "timings": f"our runs ({torch_version}): {', '.join(files)}"}}
    return out


class _Doubled(AchievedRates):
    """Achieved rates with every class's factor 2.0: beside the datasheet's 1.0, the part of each op's time that
    its factor scales."""

    def factor(self, rate: str) -> float:
        return 2.0


DOUBLED = _Doubled("", {}, "fitted", "every factor 2, for the fit's bookkeeping")


def _class_shares(models: tuple, cost, rate_class_of_op: str) -> dict[str, float]:
    """How an op's factor-scaled time divides among the rate classes of its kernels: an op whose cost has parts
    (a convolution's bias add, a GEMM's operand copy) runs kernels of other classes beside its main one, each
    scaled by its own factor in the prediction. {class: share of the scaled time}, from each part estimated with
    every factor 1 and 2 (no L2 warmth; only the split is taken from it)."""
    from kernelcast.costs.matmul import kernel_family
    from kernelcast.devices.achieved import rate_class

    if cost is None or not cost.parts:
        return {rate_class_of_op: 1.0}
    shares: dict[str, float] = {}
    for part in (cost.remainder(), *cost.parts):
        at_1, at_2 = (model.estimate(part) for model in models)
        c = rate_class(kernel_family(part), at_1.roof)
        shares[c] = shares.get(c, 0.0) + max(at_2.time_us - at_1.time_us, 0.0)
    total = sum(shares.values())
    return {c: v / total for c, v in shares.items()} if total > 0 else {rate_class_of_op: 1.0}


def predict(out: Path) -> int:
    from kernelcast.costs import cost_of
    from kernelcast.devices import get_gpu
    from kernelcast.devices.achieved import DATASHEET
    from kernelcast.predict import cost_context, predict_capture
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import profile_with
    from kernelcast.records import Capture

    gpus = [REFERENCE, *sorted({g for g in PUBLISHED.values() if g})]
    profile = profile_with(REFERENCE, "timings")
    rows, start = {}, time.perf_counter()
    for path in sorted(CAPTURES.glob("*.json")):
        if path.name == "failed.json":
            continue
        cap = Capture.load(path)
        row = {}
        for gpu in gpus:
            spec = get_gpu(gpu)
            models = tuple(CalibratedModel(spec, cap.settings, profile.data, get_gpu(profile.gpu), achieved=rates)
                           for rates in (DATASHEET, DOUBLED))
            preds = [predict_capture(cap, spec, kernel_model=model) for model in models]
            ctx = cost_context(spec, cap)
            costs = {record.index: cost_of(record, ctx) for record in cap.ops}
            pred = preds[0]
            by_class: dict[str, float] = {}
            for op, doubled in zip(pred.ops, preds[1].ops):
                # the part of the op's time its factors scale (the kernel model is linear in them: a launch floor
                # stays as it is), divided among its kernels' classes (devices.achieved.rate_class)
                scaled = max(doubled.time_us - op.time_us, 0.0)
                if op.time_us > 0 and scaled > 0:
                    for c, share in _class_shares(models, costs.get(op.index), op.rate_class).items():
                        by_class[c] = by_class.get(c, 0.0) + scaled * share
            row[gpu] = {"first_step_us": pred.first_step_us, "gpu_time_us": pred.gpu_time_us, "by_class": by_class}
        rows[path.stem.replace("__", "/", 1)] = row
    doc = {"command": "python3 scripts/fit/fit_gpu_rates.py predict", "gpus": gpus,
           "seconds": round(time.perf_counter() - start, 1), "programs": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, separators=(",", ":")))
    print(f"wrote {out} ({len(rows)} programs, {len(gpus)} GPUs, {doc['seconds']} s)")
    return 0


def _busy_row(ref: dict) -> bool:
    """Whether a program keeps the H200 busy, from its measured H200 entry (kernelbench_validate.py's rule)."""
    return _busy({"measured_ms": {"h200": ref["mean_ms"]}, "h200_gpu_busy_us": ref["gpu_busy_us"]})


def fit(predicted_path: Path, out: Path) -> int:
    from kernelcast.devices import get_gpu

    predicted = json.loads(predicted_path.read_text())
    fitted, priors = fit_all(predicted, _published(), _ours(), _busy_row,
                             lambda gpu: get_gpu(gpu).compute_capability)
    for gpu, sets in current_torch_sets(predicted, _ours()).items():
        fitted[gpu]["by_torch"] = sets
    for prior in priors.values():  # a prior whose members all have a set for a torch: that torch's prior too
        versions = set.intersection(*(set(fitted[g].get("by_torch", {})) for g in prior["from"]))
        for version in sorted(versions):
            prior.setdefault("by_torch", {})[version] = {"factors": {c: round(v, 4) for c, v in capability_prior(
                {g: fitted[g]["by_torch"][version]["factors"] for g in prior["from"]}).items()}}
    doc = {"command": "python3 scripts/fit/fit_gpu_rates.py fit", "date": time.strftime("%Y-%m-%d"),
           "fitted_on": ("KernelBench levels 1-2, published timings (torch 2.5, fp32) against the H200's (torch "
                         "2.11), every GPU-busy program, the classes' factors jointly (by_torch: the same fitted to "
                         "our own runs with another torch)"),
           "reference": REFERENCE, "min_share": MIN_SHARE, "min_programs": MIN_PROGRAMS,
           "fitted": fitted, "priors": priors}
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{'GPU':12s} {'factors':58s} {'datasheet':>9s} {'fitted, LOO':>11s} {'as unseen':>9s}")
    for gpu, r in fitted.items():
        f = " ".join(f"{c}={v:.2f}" for c, v in sorted(r["factors"].items()))
        print(f"{gpu:12s} {f:58s} {r['held_out']['datasheet_median_error']:9.0%} "
              f"{r['held_out']['median_error']:11.0%} {r['held_out_gpu']['median_error']:9.0%}")
        for version, current in r.get("by_torch", {}).items():
            f = " ".join(f"{c}={v:.2f}" for c, v in sorted(current["factors"].items()))
            print(f"{'  torch ' + version:12s} {f:58s} {'':9s} {current['held_out']['median_error']:11.0%}")
    print(f"wrote {out}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--out", default=str(PREDICTED))
    f = sub.add_parser("fit")
    f.add_argument("predicted", nargs="?", default=str(PREDICTED))
    f.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    if args.cmd == "predict":
        return predict(Path(args.out))
    return fit(Path(args.predicted), Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
