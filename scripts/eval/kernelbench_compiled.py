"""KernelBench levels 1-2 under torch.compile, predicted on every GPU with published compiled timings (issue 32).

    python3 scripts/eval/kernelbench_compiled.py capture --mode default     # each program captured compiled, once
    python3 scripts/eval/kernelbench_compiled.py predict --mode default --out validation/kernelbench/compiled_default.json.gz
    python3 scripts/eval/kernelbench_compiled.py report validation/kernelbench/compiled_default.json.gz

KernelBench's authors timed each program compiled (`torch.compile(model, mode=...)`, inductor, torch 2.5) the
same way as eager: 3 warm-up calls, then one call from an idle GPU between CUDA events, the mean of 100 trials
(`../shared/kernelbench/README.md`). Inductor default is published for H100, B200, A100 (40 and 80 GB), L40S, L4,
T4, A6000 and RTX 3090 Ti; reduce-overhead and max-autotune for H100, B200, L40S, A6000 and RTX 3090 Ti. Our H200
has eager timings only, so the H200's compiled predictions are listed, not scored. GPUs we timed ourselves with a
current torch (`measure` on the device machine; kernelbench_validate.py OWN_RUNS) are scored beside the published rows, predicted
as captured ("h100-sxm (torch 2.11)").

Each program is captured as `kernelcast predict --compile MODE` captures it (kernelbench_validate.py's build, the
step compiled) for the H200 and predicted on every GPU, as `--gpu` does. The report scores:
- the compiled call: kernelcast's `first_step_us` against the published compiled mean, per GPU;
- the compile speed-up: predicted eager / compiled (eager from kernelbench_validate.py's predict run) against
  the published eager / compiled of the same provider, and whether its sign is right for every program where the
  published change is over 20% (issue 32's target).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(SCRIPTS / d) for d in ("device", "fit", "eval")]  # sibling scripts
import kernelbench_validate as kv  # noqa: E402  (the programs, their build and the eager published timings)

MODES = ("default", "reduce-overhead", "max-autotune")
EAGER_PREDICTED = kv.ROOT / "validation" / "kernelbench" / "predicted.json"
SPEEDUP_CHANGE = 0.20  # a published compile speed-up (or slow-down) past this is scored on its sign
# GPUs we timed ourselves, eager and compiled, with a current torch (`measure` on the device machine, each run a
# fresh process) are kernelbench_validate.py OWN_RUNS; scored beside the published rows, predicted as captured.


def read_json(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def write_json(path: str, doc: dict) -> None:
    """Indented JSON, gzipped where the name ends in .gz (the predictions of 200 programs on 10 GPUs)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt") as f:
        json.dump(doc, f, indent=1, sort_keys=True)


def captures_dir(mode: str) -> Path:
    return kv.CAPTURES.parent / f"captures_compile_{mode}"


def capture(mode: str, only: list[str]) -> int:
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)

    folder = captures_dir(mode)
    folder.mkdir(parents=True, exist_ok=True)
    failed_path = folder / "failed.json"
    failed = json.loads(failed_path.read_text()) if failed_path.exists() else {}
    signal.signal(signal.SIGALRM, kv._timeout)
    for name, path in kv.programs():
        if only and not any(o in name for o in only):
            continue
        target = folder / (name.replace("/", "__") + ".json")
        if target.exists() or name in failed:
            continue
        error = kv.capture_program(name, path, target, compile_mode=mode)
        if error:
            failed[name] = error
        failed_path.write_text(json.dumps(failed, indent=1, sort_keys=True))
    return 0


# KernelBench's timing (its README): 3 warm-up calls, then TRIALS calls, each between two CUDA events and followed
# by a synchronize, so each starts from an idle GPU; the mean in ms.
WARMUP_CALLS = 3
TRIALS = 100


def measure(modes: list[str], only: list[str], out: str) -> int:
    """On a GPU: each chosen program eager and compiled in each mode, timed as KernelBench times it (torch's own
    version here: what the published torch 2.5 timings cannot separate from the host is then visible)."""
    import torch

    from kernelcast.measure import back_to_back_ms

    rows = {}
    for name, path in kv.programs():
        if only and not any(o in name for o in only):
            continue
        rows[name] = {}
        for mode in ("eager", *modes):
            torch._dynamo.reset()
            step, inputs = kv._build_for(kv._load(path))()
            if mode != "eager":
                step = torch.compile(step, mode=mode)
            start = time.perf_counter()
            try:
                for _ in range(WARMUP_CALLS):
                    step(*inputs)
                torch.cuda.synchronize()
                times = back_to_back_ms(lambda: step(*inputs), 1, TRIALS)  # a call between events, synchronized
                rows[name][mode] = {"mean_ms": statistics.mean(times), "median_ms": statistics.median(times),
                                    "seconds": round(time.perf_counter() - start, 1)}
            except Exception as exc:  # a program that fails to compile is data too
                rows[name][mode] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            print(name, mode, rows[name][mode], flush=True)
        # after every program: a run stopped at its time limit keeps what it measured
        doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
               "trials": TRIALS, "warmup": WARMUP_CALLS,
               "command": "PYTHONPATH=src python3 scripts/eval/kernelbench_compiled.py measure --out OUT --modes "
                          + " ".join(modes) + " --only " + " ".join(only), "programs": rows}
        Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


def published(mode: str) -> dict[str, dict[str, dict[str, float]]]:
    """kernelcast GPU -> program -> {"eager": ms, "compiled": ms}, each the median over the providers that
    published both (a speed-up is taken within one provider's runs)."""
    pairs: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for folder, gpu in kv.PUBLISHED.items():
        compiled_path = kv.KERNELBENCH / "timing" / folder / f"baseline_time_torch_compile_inductor_{mode}.json"
        if not compiled_path.exists():
            continue
        eager = json.loads((kv.KERNELBENCH / "timing" / folder / "baseline_time_torch.json").read_text())
        compiled = json.loads(compiled_path.read_text())
        for level in kv.LEVELS:
            for prog, t in compiled.get(level, {}).items():
                e = eager.get(level, {}).get(prog)
                if e and t:  # a program that failed to compile there is published as null
                    pairs.setdefault(gpu, {}).setdefault(f"{level}/{prog}", []).append((e["mean"], t["mean"]))
    return {gpu: {p: {"eager": statistics.median(e for e, _ in v), "compiled": statistics.median(c for _, c in v)}
                  for p, v in progs.items()} for gpu, progs in pairs.items()}


def own_runs(gpu: str, mode: str) -> dict[str, dict[str, float]]:
    """program -> {"eager": ms, "compiled": ms}, each the mean over our compiled runs of a GPU in
    kernelbench_validate.py OWN_RUNS."""
    runs = [json.loads(p.read_text())["programs"] for p in sorted(kv.ROOT.glob(kv.OWN_RUNS[gpu].compiled))]
    out = {}
    for name in {n for r in runs for n in r}:
        pairs = [(r[name]["eager"]["mean_ms"], r[name][mode]["mean_ms"]) for r in runs
                 if "mean_ms" in r.get(name, {}).get("eager", {}) and "mean_ms" in r.get(name, {}).get(mode, {})]
        if pairs:
            out[name] = {"eager": statistics.fmean(e for e, _ in pairs),
                         "compiled": statistics.fmean(c for _, c in pairs)}
    return out


def predict(mode: str, out: str) -> int:
    from kernelcast.devices.achieved import PUBLISHED_TORCH
    from kernelcast.predict import predict_capture
    from kernelcast.records import Capture

    pub = published(mode)
    own = {gpu: own_runs(gpu, mode) for gpu in kv.OWN_RUNS}
    eager = json.loads(EAGER_PREDICTED.read_text())["programs"] if EAGER_PREDICTED.exists() else {}
    gpus = ["h200"] + [g for g in pub if kv.get_gpu_or_none(g)]
    folder = captures_dir(mode)
    failed = json.loads((folder / "failed.json").read_text()) if (folder / "failed.json").exists() else {}
    rows = {}
    start = time.perf_counter()
    for name, _ in kv.programs():
        path = folder / (name.replace("/", "__") + ".json")
        if not path.exists():
            rows[name] = {"failed": failed.get(name, "not captured")}
            continue
        cap = Capture.load(path)
        row = {"measured_ms": {g: pub[g][name] for g in pub if name in pub[g]}, "predicted": {},
               "eager_predicted_us": {g: p["first_step_us"] for g, p in eager.get(name, {}).get("predicted", {}).items()},
               "h200_busy": kv._busy(eager.get(name, {}))}
        # as kernelbench_validate.py predicts eager: a GPU with published timings as for their torch (the achieved
        # rates fitted to the timings of the torch nearest the capture's, devices/achieved.py), the H200 as captured
        published_era = dataclasses.replace(cap, settings=dataclasses.replace(cap.settings,
                                                                              torch_version=PUBLISHED_TORCH))
        for gpu in gpus:
            pred = predict_capture(cap if gpu == "h200" else published_era, gpu)
            row["predicted"][gpu] = _predicted(pred)
        # beside our own runs of a GPU, as captured (the capture's torch picks the rates), with eager likewise
        for gpu in kv.OWN_RUNS:
            row.setdefault("predicted_as_captured", {})[gpu] = _predicted(predict_capture(cap, gpu))
            row.setdefault("own_measured_ms", {})[kv.own_label(gpu)] = own.get(gpu, {}).get(name)
            eager_as_captured = eager.get(name, {}).get("predicted_as_captured", {}).get(gpu, {})
            row.setdefault("eager_predicted_as_captured_us", {})[gpu] = eager_as_captured.get("first_step_us")
        rows[name] = row
    doc = {"command": f"python3 scripts/eval/kernelbench_compiled.py predict --mode {mode} --out {out}", "mode": mode,
           "date": time.strftime("%Y-%m-%d"), "gpus": gpus, "programs": rows,
           "predict_s": round(time.perf_counter() - start, 1)}
    write_json(out, doc)
    print(f"wrote {out} ({len(rows)} programs, {len(gpus)} GPUs, {doc['predict_s']} s)")
    return 0


def _predicted(pred) -> dict:
    return {"first_step_us": pred.first_step_us, "gpu_time_us": pred.gpu_time_us, "kernels": pred.kernels,
            "uncosted": list(pred.uncosted)}


def _scored(doc: dict, gpu: str, busy_only: bool):
    """(program, predicted compiled µs, measured compiled ms, predicted speed-up, measured speed-up) per program:
    against the published timings, or for a row named as own_label names one, against our own runs."""
    own = next((g for g in kv.OWN_RUNS if kv.own_label(g) == gpu), None)
    for name, r in doc["programs"].items():
        if busy_only and not r.get("h200_busy"):
            continue
        if own:
            meas = (r.get("own_measured_ms") or {}).get(gpu)
            pred_row = (r.get("predicted_as_captured") or {}).get(own)
            eager_pred = (r.get("eager_predicted_as_captured_us") or {}).get(own)
        else:
            meas = r.get("measured_ms", {}).get(gpu)
            pred_row = r.get("predicted", {}).get(gpu)
            eager_pred = r.get("eager_predicted_us", {}).get(gpu)
        if not meas or not pred_row:
            continue
        pred = pred_row["first_step_us"]
        yield (name, pred, meas["compiled"], eager_pred / pred if eager_pred else None,
               meas["eager"] / meas["compiled"])


def summarize(doc: dict, busy_only: bool) -> dict[str, dict]:
    """Per GPU: n, median |error| of the compiled call, share within 15%; the speed-up's median |error|; the
    programs whose published speed-up changes the time by over 20%, and how many of them have the sign right."""
    out = {}
    own = [kv.own_label(g) for g in kv.OWN_RUNS if any((r.get("own_measured_ms") or {}).get(kv.own_label(g))
                                                          for r in doc["programs"].values())]
    for gpu in [*doc["gpus"], *own]:
        rows = list(_scored(doc, gpu, busy_only))
        if not rows:
            continue
        errors = [kv._error(pred, meas) for _, pred, meas, _, _ in rows]
        speedups = [(p, m) for *_, p, m in rows if p]
        decided = [(p, m) for p, m in speedups if abs(m - 1.0) > SPEEDUP_CHANGE]
        out[gpu] = {"n": len(errors), "median_error": statistics.median(errors),
                    "within_15": sum(e <= kv.WITHIN for e in errors) / len(errors),
                    "speedup_median_error": statistics.median(abs(p / m - 1.0) for p, m in speedups) if speedups else None,
                    "sign_scored": len(decided), "sign_right": sum((p > 1.0) == (m > 1.0) for p, m in decided)}
    return out


def report(path: str) -> int:
    doc = read_json(path)
    failed = [n for n, r in doc["programs"].items() if "failed" in r]
    print(f"torch.compile mode={doc['mode']}: {len(doc['programs'])} programs, {len(failed)} not captured")
    for n in failed:
        print(f"  not captured: {n}: {doc['programs'][n]['failed']}")
    for title, busy_only in (("GPU-busy programs (on the H200)", True), ("all programs", False)):
        print(f"\n{title}: compiled first_step_us against the published compiled mean; speed-up = eager / compiled")
        print(f"{'GPU':<22} {'n':>4} {'median error':>13} {'within 15%':>11} {'speed-up error':>15} "
              f"{'sign right (change > 20%)':>26}")
        for gpu, s in summarize(doc, busy_only).items():
            speed = f"{s['speedup_median_error']:.0%}" if s["speedup_median_error"] is not None else "-"
            sign = f"{s['sign_right']}/{s['sign_scored']}"
            print(f"{gpu:<22} {s['n']:>4} {s['median_error']:>13.0%} {s['within_15']:>11.0%} {speed:>15} {sign:>26}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture", help="capture each program compiled (cached in build/kernelbench/)")
    c.add_argument("--mode", choices=MODES, default="default")
    c.add_argument("--only", nargs="*", default=[], help="programs whose name contains one of these")
    p = sub.add_parser("predict", help="predict every captured program on every GPU with published timings")
    p.add_argument("--mode", choices=MODES, default="default")
    p.add_argument("--out", required=True)
    r = sub.add_parser("report", help="per-GPU error tables of a predict run")
    r.add_argument("path")
    m = sub.add_parser("measure", help="on a GPU: programs eager and compiled, timed as KernelBench times them")
    m.add_argument("--modes", nargs="+", choices=MODES, default=["default"])
    m.add_argument("--only", nargs="*", default=[], help="programs whose name contains one of these")
    m.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.cmd == "measure":
        return measure(args.modes, args.only, args.out)
    if args.cmd == "capture":
        return capture(args.mode, args.only)
    if args.cmd == "predict":
        return predict(args.mode, args.out)
    return report(args.path)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
