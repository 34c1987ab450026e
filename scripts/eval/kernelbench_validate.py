"""KernelBench levels 1-2 predicted on every GPU with published timings, against those timings (issue 30).

    python3 scripts/eval/kernelbench_validate.py capture   # each program captured once (fp32, no_grad, for the H200)
    python3 scripts/eval/kernelbench_validate.py predict --out validation/kernelbench/predicted.json
    python3 scripts/eval/kernelbench_validate.py report validation/kernelbench/predicted.json
    python3 scripts/eval/kernelbench_validate.py tables validation/kernelbench/predicted.json   # README / accuracy.md tables

The programs and timings are `../shared/kernelbench` (its README says how they were timed: torch 2.5 on the
published GPUs, torch 2.11 on our H200; one call from an idle GPU between CUDA events, the mean of 100 trials).
Each program is captured as KernelBench runs it: seed 42 before `get_inputs()` and again before
`get_init_inputs()`, the model and inputs moved to CUDA, one forward under `torch.no_grad()`. kernelcast's
`first_step_us` (one step from an idle GPU, launch gaps included) is compared with the published mean; on the
H200 also the GPU busy time and kernels per call that torch.profiler measured.

The report's headline is on the programs that keep the GPU busy (on the H200, a call of at least 0.1 ms of which at
least 85% is kernel time), where the kernel model, not the host, decides the time. Per GPU: the median error,
the share within 15%, and the error of the predicted time's ratio to the H200 against the measured ratio (what a
GPU's own parameters must get right, apart from the H200's kernel model). Captures are made for the H200 and
predicted on every GPU, as `kernelcast capture` then `kernelcast predict --gpu` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNELBENCH = Path(os.environ.get("KERNELBENCH_DIR") or ROOT.parent / "shared" / "kernelbench")  # the device has no ../shared
CAPTURES = ROOT / "build" / "kernelbench" / "captures"
LEVELS = ("level1", "level2")
SEED = 42  # KernelBench's seed before get_inputs() and before get_init_inputs()
CAPTURE_TIMEOUT_S = 120  # one program's capture; past it the program is listed as failed
# timing folder -> kernelcast GPU (None: no kernelcast entry yet). L40S has three providers: their median is taken.
PUBLISHED = {
    "H100_together": "h100-sxm", "B200_together": "b200", "A100-80GB_modal": "a100-80gb",
    "A100_modal": "a100-40gb", "L40S_babel": "l40s", "L40S_matx3": "l40s", "L40S_modal": "l40s",
    "L4_modal": "l4", "T4_modal": "t4", "A6000_babel": "rtx-a6000", "RTX_3090_Ti": "rtx3090ti",
}
OURS = "H200_ours"
# GPUs we timed ourselves with a current torch (scripts/device/kernelbench_call_times.py: KernelBench's protocol, one
# call between CUDA events, 30 trials; each run on a fresh device machine): GPU -> (the runs' files, their torch).
# Their achieved rates are fitted to these runs (scripts/fit/fit_gpu_rates.py), and the report shows them beside the
# published torch-2.5 timings.
@dataclasses.dataclass(frozen=True)
class OwnRuns:
    """Our own KernelBench runs of one GPU with a current torch: the eager call times
    (scripts/device/kernelbench_call_times.py) and the compiled ones (scripts/eval/kernelbench_compiled.py measure),
    each a glob of run files relative to the repository, and the torch they ran."""

    eager: str
    compiled: str
    torch: str


OWN_RUNS = {"h100-sxm": OwnRuns("validation/h100/kernelbench_call_times_h100_run*.json",
                                "validation/h100/kernelbench_compiled_h100_run*.json", "torch 2.11")}
BUSY_SHARE = 0.85  # kernel time over call time, on the H200, for a program to count as GPU-busy
BUSY_MIN_MS = 0.1
WITHIN = 0.15


def programs() -> list[tuple[str, Path]]:
    return [(f"{level}/{p.name}", p) for level in LEVELS for p in sorted((KERNELBENCH / "problems" / level).glob("*.py"))]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"kb_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Dynamo imports a traced function's module by name
    spec.loader.exec_module(module)
    return module


def _build_for(module):
    import torch

    def build():
        torch.manual_seed(SEED)
        inputs = module.get_inputs()
        torch.manual_seed(SEED)
        model = module.Model(*module.get_init_inputs()).cuda()
        inputs = tuple(x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs)

        def step(*xs):
            with torch.no_grad():
                return model(*xs)

        return step, inputs

    return build


def _timeout(signum, frame):
    raise TimeoutError(f"capture took over {CAPTURE_TIMEOUT_S} s")


def capture_program(name: str, path: Path, target: Path, compile_mode: str | None = None) -> str | None:
    """Capture one program for the H200 into `target`, as `kernelcast predict [--compile MODE]` would, within
    CAPTURE_TIMEOUT_S (the caller sets signal.SIGALRM's handler to _timeout); the error line if it fails (a
    program that fails is a result: listed, not fatal), else None. Prints how long it took on stderr."""
    from kernelcast.capture import capture_workload

    start = time.perf_counter()
    error = None
    signal.alarm(CAPTURE_TIMEOUT_S)
    try:
        cap = capture_workload(_build_for(_load(path)), "h200", workload=f"kernelbench:{name}",
                               compile_mode=compile_mode)
        cap.save(target)
    except Exception as exc:
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
    finally:
        signal.alarm(0)
    print(f"{name}: {time.perf_counter() - start:.1f} s {'FAILED ' + error if error else ''}", file=sys.stderr,
          flush=True)
    return error


def capture(only: list[str]) -> int:
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)

    CAPTURES.mkdir(parents=True, exist_ok=True)
    failed = {}
    signal.signal(signal.SIGALRM, _timeout)
    for name, path in programs():
        if only and not any(o in name for o in only):
            continue
        target = CAPTURES / (name.replace("/", "__") + ".json")
        if target.exists():
            continue
        error = capture_program(name, path, target)
        if error:
            failed[name] = error
    (CAPTURES / "failed.json").write_text(json.dumps(failed, indent=1, sort_keys=True))
    return 0


def _published() -> dict[str, dict[str, float]]:
    """kernelcast GPU -> program -> published mean call time in ms (the median over providers)."""
    by_gpu: dict[str, dict[str, list[float]]] = {}
    for folder, gpu in PUBLISHED.items():
        doc = json.loads((KERNELBENCH / "timing" / folder / "baseline_time_torch.json").read_text())
        key = gpu or folder
        for level in LEVELS:
            for prog, t in doc.get(level, {}).items():
                by_gpu.setdefault(key, {}).setdefault(f"{level}/{prog}", []).append(t["mean"])
    return {gpu: {p: statistics.median(v) for p, v in progs.items()} for gpu, progs in by_gpu.items()}


def _ours() -> dict[str, dict]:
    out = {}
    for level, short in (("level1", "l1"), ("level2", "l2")):
        doc = json.loads((KERNELBENCH / "timing" / OURS / f"h200_torch2.11_{short}.json").read_text())
        out.update(doc["problems"])
    return out


@functools.lru_cache(maxsize=None)  # summarize and report read them several times per run
def own_runs(gpu: str) -> tuple[dict[str, float], list[str]]:
    """({program: mean call ms over our runs}, the run files, relative to the repository) of a GPU in OWN_RUNS."""
    pattern = OWN_RUNS[gpu].eager
    paths = sorted(ROOT.glob(pattern))
    runs = [json.loads(p.read_text())["problems"] for p in paths]
    names = {n for r in runs for n, v in r.items() if "mean_ms" in v}
    return ({n: statistics.fmean(r[n]["mean_ms"] for r in runs if "mean_ms" in r.get(n, {})) for n in names},
            [str(p.relative_to(ROOT)) for p in paths])


def own_label(gpu: str) -> str:
    return f"{gpu} ({OWN_RUNS[gpu].torch})"


def predict(out: str) -> int:
    from kernelcast.devices.achieved import PUBLISHED_TORCH
    from kernelcast.predict import predict_capture
    from kernelcast.records import Capture

    published, ours = _published(), _ours()
    gpus = ["h200"] + [g for g in published if get_gpu_or_none(g)]
    failed = json.loads((CAPTURES / "failed.json").read_text()) if (CAPTURES / "failed.json").exists() else {}
    rows = {}
    start = time.perf_counter()
    for name, _ in programs():
        path = CAPTURES / (name.replace("/", "__") + ".json")
        if not path.exists():
            rows[name] = {"failed": failed.get(name, "not captured")}
            continue
        cap = Capture.load(path)
        row = {"measured_ms": {g: published[g][name] for g in published if name in published[g]}}
        h200 = ours.get(name)
        if h200:
            row["measured_ms"]["h200"] = h200["mean_ms"]
            row["h200_gpu_busy_us"], row["h200_kernels"] = h200["gpu_busy_us"], h200["kernels"]
            # what one call adds to memory_allocated() at its peak: earlier programs' leftovers (cuBLAS's
            # workspace) are in both figures, so the growth is what compares (the timings' README)
            row["h200_peak_growth_bytes"] = h200["mem_peak_bytes"] - h200["mem_before_bytes"]
        row["predicted"] = {}
        # beside the published timings, a GPU is predicted as for their torch (its achieved rates fitted to the
        # timings of the torch nearest the capture's: devices/achieved.py); beside our runs of it, as captured
        published_era = dataclasses.replace(cap, settings=dataclasses.replace(cap.settings,
                                                                              torch_version=PUBLISHED_TORCH))
        for gpu in gpus:
            pred = predict_capture(cap if gpu == "h200" else published_era, gpu)
            row["predicted"][gpu] = _predicted(pred)
            if gpu == "h200" and pred.memory is not None:
                row["predicted"][gpu]["peak_growth_bytes"] = pred.memory.peak_bytes - pred.memory.resident_bytes
        row["predicted_as_captured"] = {gpu: _predicted(predict_capture(cap, gpu)) for gpu in OWN_RUNS}
        rows[name] = row
    doc = {"command": "python3 scripts/eval/kernelbench_validate.py predict --out " + out,
           "date": time.strftime("%Y-%m-%d"), "gpus": gpus, "programs": rows,
           "predict_s": round(time.perf_counter() - start, 1)}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(doc, indent=1, sort_keys=True))
    print(f"wrote {out} ({len(rows)} programs, {len(gpus)} GPUs, {doc['predict_s']} s)")
    return 0


def _predicted(pred) -> dict:
    return {"first_step_us": pred.first_step_us, "gpu_time_us": pred.gpu_time_us, "kernels": pred.kernels,
            "uncosted": list(pred.uncosted)}


def get_gpu_or_none(name: str):
    from kernelcast.devices import get_gpu
    from kernelcast.errors import UnknownGPUError

    try:
        return get_gpu(name)
    except UnknownGPUError:
        return None


def _busy(row: dict) -> bool:
    busy, ms = row.get("h200_gpu_busy_us"), row.get("measured_ms", {}).get("h200")
    return bool(busy and ms and ms >= BUSY_MIN_MS and busy / (ms * 1e3) >= BUSY_SHARE)


def _error(pred_us: float, meas_ms: float) -> float:
    return abs(pred_us / (meas_ms * 1e3) - 1.0)


def slow_states() -> dict[str, dict]:
    """{GPU: its published machine's slow state} as the rate fit found them (devices/achieved.json "slow_state":
    factor, from_ms; calibrate/gpu_rates.py slow_state)."""
    from kernelcast.devices.achieved import _data

    return {g: f["slow_state"] for g, f in _data().get("fitted", {}).items() if f.get("slow_state")}


def summarize(doc: dict, busy_only: bool = True, normal_state: bool = False) -> dict[str, dict]:
    """Per GPU: n, median |error|, share within 15%, median |error| of the ratio to the H200, against its
    published timings; and per GPU in OWN_RUNS (own_label) the same against our runs. normal_state: only the calls
    a GPU's published machine ran outside its slow state (slow_states), for the GPUs that have one."""
    rows = {n: r for n, r in doc["programs"].items() if "predicted" in r and (_busy(r) or not busy_only)}
    states = slow_states() if normal_state else {}
    # (label, the prediction's row, measured ms of a program): each GPU against its published timings, predicted as
    # for their torch; a GPU we timed ourselves, against our runs, predicted as captured
    series = [(gpu, lambda r, g=gpu: r["predicted"].get(g), lambda name, r, g=gpu: r["measured_ms"].get(g))
              for gpu in doc["gpus"]]
    if not normal_state:
        for gpu in OWN_RUNS:
            ours = own_runs(gpu)[0]
            series.append((own_label(gpu), lambda r, g=gpu: r.get("predicted_as_captured", {}).get(g),
                           lambda name, r, o=ours: o.get(name)))
    out = {}
    for label, predicted, measured in series:
        if normal_state and label not in states:
            continue
        errors, ratio_errors = [], []
        for name, r in rows.items():
            meas, row = measured(name, r), predicted(r)
            if meas is None or row is None:
                continue
            if label in states and meas >= states[label]["from_ms"]:
                continue
            pred = row["first_step_us"]
            errors.append(_error(pred, meas))
            h200_meas, h200_pred = r["measured_ms"].get("h200"), r["predicted"]["h200"]["first_step_us"]
            if label != "h200" and h200_meas and h200_pred:
                ratio_errors.append(abs((pred / h200_pred) / (meas / h200_meas) - 1.0))
        if errors:
            out[label] = {"n": len(errors), "median_error": statistics.median(errors),
                          "within_15": sum(e <= WITHIN for e in errors) / len(errors),
                          "ratio_median_error": statistics.median(ratio_errors) if ratio_errors else None}
    return out


# A program's family by its name, first match: the kinds of kernel that dominate it (KernelBench names each
# program after its ops).
FAMILIES = (("conv_transposed_3d", ("conv_transposed_3d", "convtranspose3d")),
            ("conv_3d", ("conv3d", "conv_standard_3d")),
            ("conv_transposed_1d_2d", ("conv_transposed", "convtranspose")), ("conv_depthwise", ("depthwise",)),
            ("conv_1d_2d", ("conv",)), ("matmul", ("matmul", "gemm", "bmm", "linear", "matrix")),
            ("norm", ("norm",)), ("pool", ("pool",)), ("softmax", ("softmax",)), ("scan", ("cum",)),
            ("loss", ("loss", "entropy", "divergence", "triplet", "hinge")))


def family(name: str) -> str:
    s = name.lower().split("/")[-1]
    squeezed = s.replace("_", "")
    for label, marks in FAMILIES:
        if any(m in s or m.replace("_", "") in squeezed for m in marks):
            return label
    return "elementwise / reduction"


def family_table(doc: dict) -> list[tuple[str, str, int, float]]:
    """(family, GPU, n, median |error|) of the GPU-busy programs."""
    out = []
    rows = {n: r for n, r in doc["programs"].items() if "predicted" in r and _busy(r)}
    for label in sorted({family(n) for n in rows}):
        for gpu in doc["gpus"]:
            errors = [_error(r["predicted"][gpu]["first_step_us"], r["measured_ms"][gpu]) for n, r in rows.items()
                      if family(n) == label and r["measured_ms"].get(gpu) and gpu in r["predicted"]]
            if errors:
                out.append((label, gpu, len(errors), statistics.median(errors)))
    return out


H200_MIN_BUSY_US = 100.0  # GPU time is scored on programs of at least this much kernel time (issue 31's rule)
WORST_SHOWN = 5


def h200_per_call(doc: dict) -> dict[str, list[tuple[float, str]]]:
    """On the H200, per program, the signed relative error of kernels per call, GPU busy time (programs of at
    least H200_MIN_BUSY_US) and peak memory growth, each against what torch.profiler and the allocator measured
    (../shared/kernelbench/timing/H200_ours)."""
    out: dict[str, list[tuple[float, str]]] = {"kernels per call": [], "GPU busy time": [], "peak memory growth": []}
    for name, r in doc["programs"].items():
        pred = r.get("predicted", {}).get("h200")
        if not pred or not r.get("h200_kernels"):
            continue
        out["kernels per call"].append((pred["kernels"] / r["h200_kernels"] - 1.0, name))
        if r["h200_gpu_busy_us"] >= H200_MIN_BUSY_US:
            out["GPU busy time"].append((pred["gpu_time_us"] / r["h200_gpu_busy_us"] - 1.0, name))
        growth = r.get("h200_peak_growth_bytes")
        if growth and "peak_growth_bytes" in pred:
            out["peak memory growth"].append((pred["peak_growth_bytes"] / growth - 1.0, name))
    return out


def report(path: str) -> int:
    doc = json.loads(Path(path).read_text())
    busy = sum(_busy(r) for r in doc["programs"].values())
    failed = [n for n, r in doc["programs"].items() if "failed" in r]
    print(f"{len(doc['programs'])} programs, {busy} GPU-busy on the H200, {len(failed)} not captured")
    for title, busy_only in (("GPU-busy programs", True), ("all programs", False)):
        print(f"\n{title}: first_step_us against the published mean call time (torch 2.5; the H200's ours, torch "
              "2.11; a GPU with its torch named: our runs, "
              f"{', '.join(f'{g}: ' + ' '.join(own_runs(g)[1]) for g in OWN_RUNS)})")
        print(f"{'GPU':<22} {'n':>4} {'median error':>13} {'within 15%':>11} {'ratio to H200, median error':>28}")
        for gpu, s in summarize(doc, busy_only).items():
            ratio = f"{s['ratio_median_error']:.0%}" if s["ratio_median_error"] is not None else "-"
            print(f"{gpu:<22} {s['n']:>4} {s['median_error']:>13.0%} {s['within_15']:>11.0%} {ratio:>28}")
    states = slow_states()
    for gpu, s in summarize(doc, True, normal_state=True).items():
        print(f"\n{gpu}: its published machine ran calls of {states[gpu]['from_ms']:g} ms or more about "
              f"{states[gpu]['factor']:g}x slower (calibrate/gpu_rates.py slow_state; not predicted: a state of that "
              f"machine); GPU-busy programs it ran outside that state: {s['n']}, median error "
              f"{s['median_error']:.0%}, within 15% {s['within_15']:.0%}")
    table = family_table(doc)
    gpus = [g for g in doc["gpus"] if any(t[1] == g for t in table)]
    print("\nGPU-busy programs by family: median error (n)")
    print(f"{'family':<24}" + "".join(f"{g[:10]:>11}" for g in gpus))
    for label in sorted({t[0] for t in table}):
        cells = {t[1]: t for t in table if t[0] == label}
        print(f"{label:<24}" + "".join(f"{cells[g][3]:>6.0%} ({cells[g][2]:>2})" if g in cells else f"{'-':>11}"
                                       for g in gpus))
    per_call = h200_per_call(doc)
    if any(per_call.values()):
        print(f"\nH200, one call against torch.profiler and the allocator (GPU time: calls of >= {H200_MIN_BUSY_US:.0f} µs "
              "of kernels; memory: peak minus before)")
        print(f"{'':<20} {'n':>4} {'median error':>13} {'within 5%':>10} {'worst':>8}  worst programs")
        for label, errors in per_call.items():
            if not errors:
                continue
            mags = [abs(e) for e, _ in errors]
            worst = sorted(errors, key=lambda t: -abs(t[0]))[:WORST_SHOWN]
            names = ", ".join(f"L{n[5]}#{n.split('/')[-1].split('_')[0]} {e:+.0%}" for e, n in worst)
            print(f"{label:<20} {len(errors):>4} {statistics.median(mags):>13.1%} "
                  f"{sum(m <= 0.05 for m in mags) / len(mags):>10.0%} {max(mags):>8.0%}  {names}")
    return 0


# The GPUs of the README's and docs/accuracy.md's KernelBench tables, in their order, with the names they print.
TABLE_GPUS = (("h200", "H200"), ("h100-sxm", "H100 SXM"), ("b200", "B200"), ("a100-80gb", "A100 80GB"),
              ("a100-40gb", "A100 40GB"), ("l40s", "L40S"), ("l4", "L4"), ("t4", "T4"), ("rtx-a6000", "RTX A6000"),
              ("rtx3090ti", "RTX 3090 Ti"))
TABLE_MARKERS = ("<!-- kernelbench-table -->\n", "<!-- /kernelbench-table -->")
TABLE_FILES = ("README.md", "docs/accuracy.md")


def table_lines(doc: dict) -> dict[str, list[str]]:
    """The README's table (per GPU: how its kernels are timed, GPU-busy programs, median error, within 15%) and
    accuracy.md's (GPU-busy and all programs, with the ratio to the H200's error), from a predict run."""
    busy, every, normal = summarize(doc, True), summarize(doc, False), summarize(doc, True, normal_state=True)
    n_busy, n_all = busy["h200"]["n"], every["h200"]["n"]
    readme = ["| GPU | kernel times | programs | median error | within 15% |", "|---|---|---:|---:|---:|"]
    accuracy = [f"| GPU | GPU-busy ({n_busy}): median error | within 15% | ratio to H200 | all {n_all}: median error "
                "| within 15% |", "|---|---:|---:|---:|---:|---:|"]
    for gpu, name in TABLE_GPUS:
        b, a = busy[gpu], every[gpu]
        ratio = f"{b['ratio_median_error']:.0%}" if b["ratio_median_error"] is not None else "-"
        # a GPU whose published machine had a slow state: also the calls it ran outside it (footnoted)
        n = normal.get(gpu)
        aside = f" ({n['median_error']:.0%} on the {n['n']} outside its machine's slow state\\*)" if n else ""
        readme.append(f"| {name} | {'calibrated' if gpu == 'h200' else 'fitted'} | {b['n']} | "
                      f"{b['median_error']:.0%}{aside} | {b['within_15']:.0%} |")
        accuracy.append(f"| {name} | {b['median_error']:.0%} | {b['within_15']:.0%} | {ratio} | "
                        f"{a['median_error']:.0%} | {a['within_15']:.0%} |")
        if gpu in OWN_RUNS:  # beside our own runs with a current torch, predicted as captured
            b, a, torch_version = busy[own_label(gpu)], every[own_label(gpu)], OWN_RUNS[gpu].torch
            ratio = f"{b['ratio_median_error']:.0%}" if b["ratio_median_error"] is not None else "-"
            readme.append(f"| {name}, our runs ({torch_version})\u2020 | fitted | {b['n']} | {b['median_error']:.0%} | "
                          f"{b['within_15']:.0%} |")
            accuracy.append(f"| {name}, our runs ({torch_version})\u2020 | {b['median_error']:.0%} | "
                            f"{b['within_15']:.0%} | {ratio} | {a['median_error']:.0%} | {a['within_15']:.0%} |")
    return {"README.md": readme, "docs/accuracy.md": accuracy}


def tables(path: str) -> int:
    """Rewrite the tables between TABLE_MARKERS in TABLE_FILES from a predict run."""
    lines = table_lines(json.loads(Path(path).read_text()))
    root = Path(__file__).resolve().parents[2]
    for name in TABLE_FILES:
        text = (root / name).read_text()
        start, end = text.index(TABLE_MARKERS[0]) + len(TABLE_MARKERS[0]), text.index(TABLE_MARKERS[1])
        (root / name).write_text(text[:start] + "\n".join(lines[name]) + "\n" + text[end:])
        print(f"{name}: {len(lines[name]) - 2} rows")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture", help="capture each program once (cached in build/kernelbench/captures)")
    c.add_argument("--only", nargs="*", default=[], help="programs whose name contains one of these")
    p = sub.add_parser("predict", help="predict every captured program on every GPU with published timings")
    p.add_argument("--out", required=True)
    r = sub.add_parser("report", help="per-GPU error tables of a predict run")
    r.add_argument("path")
    t = sub.add_parser("tables", help="rewrite the KernelBench tables in the README and docs/accuracy.md")
    t.add_argument("path")
    args = parser.parse_args()
    if args.cmd == "capture":
        return capture(args.only)
    if args.cmd == "predict":
        return predict(args.out)
    if args.cmd == "tables":
        return tables(args.path)
    return report(args.path)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
