"""Wall time per step and the GPU-bound / host-bound verdict, predicted here, against the zoo measured on the H200.

    nice python3 scripts/eval/wall_validate.py validation/zoo_measured.json.gz --captures /tmp/zoo_caps \
        --out validation/wall_validate.json

Each zoo workload (scripts/device/zoo_measure.py) is captured here on fake CUDA (the capture is kept in --captures and
reused), told the device's torch version, and predicted for the H200 four ways:
- host: "calibrated" is the device host as it calibrated (the profile's host section, what a user gets);
  "measured speed" is the same host at the speed the zoo run measured on it (its three CPU benchmarks,
  `cpu_microbenchmarks`, against the calibration's: HostModel.cpu_scale). The device host's speed swung up to
  2x between runs (docs/validation.md), so the second is the test of the host model itself;
- GPU: "predicted" kernel times (the calibrated kernel model, whose errors are other work), or "measured": every
  kernel time scaled so the step's kernels sum to the measured GPU time, which isolates the host model.
Nothing is fitted here: the host model's per-unit costs come from microbenchmarks (calibrate/host.py, the
profile's host section) and the CPU benchmarks (capture/cpu_speed.py), never from a zoo workload.

Measured verdict, per timed window (5 windows of 5 back-to-back steps): the GPU busy share, measured kernel time
over the window's step time, >= 85% "gpu", <= 60% "host", else "mixed" (predict.step_verdict); clear when all
windows agree. Reported per family: verdicts right where the measured one is clear; GPU-bound wall-time
|error| median and worst; host-bound steps inside their measured spread (fastest to slowest window).
Issue 11's targets: every clear verdict right; GPU-bound median <= 10%, worst <= 20%; host-bound inside spread.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(SCRIPTS, d) for d in ("device", "fit", "eval")]  # sibling scripts

import kernelcast  # noqa: F401  (before torch)

from kernelcast.capture.cpu_speed import CpuBench, measure_cpu_bench
from kernelcast.predict import predict_capture, step_verdict
from kernelcast.predict.kernel_model import KernelEstimate
from kernelcast.records import Capture

from zoo_validate import ROOT, load_measured

GPU_MEDIAN_TARGET, GPU_WORST_TARGET = 0.10, 0.20
HOSTS = ("calibrated", "measured speed")
GPUS = ("predicted", "measured")


@dataclasses.dataclass
class ScaledKernels:
    """A kernel model whose every estimate is `factor` times another's (measured GPU time substituted)."""

    inner: object
    factor: float

    @property
    def source(self) -> str:
        return f"{self.inner.source}, scaled to the measured GPU time"

    def estimate(self, cost, l2_warm: float = 0.0) -> KernelEstimate:
        est = self.inner.estimate(cost, l2_warm)
        return dataclasses.replace(est, time_us=est.time_us * self.factor)


def measured_verdict(m: dict) -> tuple[str, bool]:
    """The verdict of the median window, and whether every window gives the same one."""
    verdicts = {step_verdict(m["gpu_time_us"], ms * 1e3) for ms in m["step_ms"]}
    median = step_verdict(m["gpu_time_us"], m["step_ms_median"] * 1e3)
    return median, len(verdicts) == 1


def capture_for(entry: dict, captures: Path, device_torch: str) -> Capture:
    path = captures / f"{entry['name']}.json"
    if path.exists():
        return Capture.load(path)
    from kernelcast.capture import capture_workload
    from kernelcast.capture.workload import load_build, on_sys_path

    spec, func = entry["workload"].split(":")
    build, folder = load_build(f"{ROOT / spec}:{func}")
    with on_sys_path(folder):
        cap = capture_workload(build, "h200", workload=entry["workload"])
    cap = dataclasses.replace(cap, settings=dataclasses.replace(cap.settings, torch_version=device_torch))
    cap.save(path)
    return cap


def predict_all(cap: Capture, measured_gpu_us: float, target: CpuBench) -> dict:
    from kernelcast.predict import kernel_model_for
    from kernelcast.devices import get_gpu

    gpu = get_gpu("h200")
    base = kernel_model_for(gpu, cap)
    out = {}
    for host in HOSTS:
        target_host = target if host == "measured speed" else None
        first = predict_capture(cap, gpu, kernel_model=base, target_host=target_host)
        factor = measured_gpu_us / first.gpu_time_us if first.gpu_time_us else 1.0
        for kind in GPUS:
            p = first if kind == "predicted" else predict_capture(
                cap, gpu, kernel_model=ScaledKernels(base, factor), target_host=target_host)
            out[f"{host} / {kind} GPU"] = {
                "step_time_us": round(p.step_time_us, 1), "gpu_time_us": round(p.gpu_time_us, 1),
                "host_time_us": round(p.host_time_us, 1), "python_time_us": round(p.python_time_us, 1),
                "python_time_range_us": [round(v, 1) for v in p.python_time_range_us],
                "step_time_range_us": [round(v, 1) for v in p.step_time_range_us], "bound": p.bound,
                "host": p.host, "capture_cpu": p.capture_cpu, "target_cpu": p.target_cpu}
    return out


def compare(m: dict, pred: dict) -> dict:
    step_us = m["step_ms_median"] * 1e3
    low, high = min(m["step_ms"]) * 1e3, max(m["step_ms"]) * 1e3
    verdict, clear = measured_verdict(m)
    out = {"measured_verdict": verdict, "clear": clear}
    for variant, p in pred.items():
        out[variant] = {"error": (p["step_time_us"] - step_us) / step_us, "verdict_right": p["bound"] == verdict,
                        "inside_spread": low <= p["step_time_us"] <= high,
                        "range_overlaps_spread": p["step_time_range_us"][0] <= high
                        and p["step_time_range_us"][1] >= low}
    return out


def _abs_summary(values: list[float]) -> str:
    if not values:
        return "-"
    a = [abs(v) for v in values]
    return f"{statistics.median(a):6.1%} / {max(a):6.1%}"


def family_table(rows: list[dict], variant: str) -> tuple[str, dict]:
    """Per family: verdicts right / clear, GPU-bound |error| median / worst, host-bound inside spread."""
    fams = collections.defaultdict(list)
    for r in rows:
        fams[r["family"]].append(r)
    lines = [f"{'family':20s} {'n':>3s} {'verdict right/clear':>20s} {'GPU-bound n':>11s} "
             f"{'|err| median / worst':>21s} {'host-bound inside spread':>25s} {'host |err| median':>18s}"]
    totals = {"clear": 0, "right": 0, "gpu_errors": [], "host_n": 0, "host_inside": 0, "host_errors": []}

    def line(name: str, rs: list[dict]) -> str:
        clear = [r for r in rs if r["comparison"]["clear"]]
        right = [r for r in clear if r["comparison"][variant]["verdict_right"]]
        gpu = [r["comparison"][variant]["error"] for r in clear if r["comparison"]["measured_verdict"] == "gpu"]
        host = [r for r in clear if r["comparison"]["measured_verdict"] == "host"]
        inside = [r for r in host if r["comparison"][variant]["inside_spread"]]
        host_err = [r["comparison"][variant]["error"] for r in host]
        return (f"{name:20s} {len(rs):3d} {f'{len(right)}/{len(clear)}':>20s} {len(gpu):11d} "
                f"{_abs_summary(gpu):>21s} {f'{len(inside)}/{len(host)}':>25s} "
                f"{(f'{statistics.median(abs(e) for e in host_err):.1%}' if host_err else '-'):>18s}")

    for fam in sorted(fams):
        lines.append(line(fam, fams[fam]))
    lines.append(line("all", rows))
    clear = [r for r in rows if r["comparison"]["clear"]]
    gpu = [abs(r["comparison"][variant]["error"]) for r in clear if r["comparison"]["measured_verdict"] == "gpu"]
    host = [r for r in clear if r["comparison"]["measured_verdict"] == "host"]
    totals = {"clear": len(clear), "verdict_right": sum(r["comparison"][variant]["verdict_right"] for r in clear),
              "gpu_bound": len(gpu), "gpu_error_median": statistics.median(gpu) if gpu else None,
              "gpu_error_worst": max(gpu) if gpu else None, "host_bound": len(host),
              "host_inside_spread": sum(r["comparison"][variant]["inside_spread"] for r in host),
              "host_range_overlaps_spread": sum(r["comparison"][variant]["range_overlaps_spread"] for r in host),
              "host_error_median": statistics.median(abs(r["comparison"][variant]["error"]) for r in host)
              if host else None}
    return "\n".join(lines), totals


def wrong_verdicts(rows: list[dict], variant: str) -> list[str]:
    out = []
    for r in rows:
        c = r["comparison"]
        if c["clear"] and not c[variant]["verdict_right"]:
            p = r["predicted"][variant]
            out.append(f"{r['name']} (measured {c['measured_verdict']}, predicted {p['bound']}: step "
                       f"{p['step_time_us'] / 1e3:.2f} ms, GPU {p['gpu_time_us'] / 1e3:.2f}, host "
                       f"{p['host_time_us'] / 1e3:.2f}; measured {r['measured']['step_ms_median']:.2f} ms)")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measured")
    parser.add_argument("--captures", required=True, help="folder for the captures (reused when present)")
    parser.add_argument("--out")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--family", nargs="*")
    args = parser.parse_args()
    doc = load_measured(args.measured)
    captures = Path(args.captures)
    captures.mkdir(parents=True, exist_ok=True)
    here = measure_cpu_bench()
    device = CpuBench.from_json({**doc["cpu_microbenchmarks"], "cpu": f"{doc['cpu']}, {doc['cpu_count']} cores"})
    ratios = here.ratios_to(device)
    print(f"capture CPU: {here.cpu}; benchmarks {here.to_json()}")
    print(f"target CPU (zoo run): {device.cpu}; benchmarks {device.to_json()}")
    print("device / here, per benchmark (python, dispatch, module): " + ", ".join(f"{r:.2f}" for r in ratios))
    rows = []
    for entry in doc["workloads"]:
        if args.only and entry["name"] not in args.only or args.family and entry["family"] not in args.family:
            continue
        if "measured" not in entry:
            continue
        m = entry["measured"]
        row = {k: entry[k] for k in ("name", "family", "workload")}
        row["measured"] = {"step_ms": m["step_ms"], "step_ms_median": m["step_ms_median"],
                           "gpu_time_us": m["gpu_time_us"], "synced_ms_median": m["synced_ms_median"]}
        try:
            t0 = time.perf_counter()
            cap = capture_for(entry, captures, doc["torch"])
            row["predicted"] = predict_all(cap, m["gpu_time_us"], device)
            row["comparison"] = compare(m, row["predicted"])
            c = row["comparison"]
            cells = "  ".join(f"{p['step_time_us'] / 1e3:7.2f} {p['bound']:5s} ({c[v]['error']:+6.1%})"
                              for v, p in row["predicted"].items())
            print(f"{entry['name']:32s} measured {m['step_ms_median']:7.2f} ms {c['measured_verdict']:5s}"
                  f"{'' if c['clear'] else '?'}  {cells}  [{time.perf_counter() - t0:.1f} s]", flush=True)
        except Exception as exc:  # one broken workload must not lose the others
            row["error"] = f"{type(exc).__name__}: {exc}"[:500]
            row["traceback"] = traceback.format_exc()[-2000:]
            print(f"{entry['name']:32s} FAILED {row['error'][:200]}", flush=True)
            continue
        rows.append(row)
    print("\ncolumns: " + " | ".join(rows[0]["predicted"]) if rows else "")
    summaries = {}
    for variant in rows[0]["predicted"] if rows else ():
        text, totals = family_table(rows, variant)
        summaries[variant] = totals
        print(f"\n== host {variant.split(' / ')[0]}, {variant.split(' / ')[1]}")
        print(text)
        for line in wrong_verdicts(rows, variant):
            print("  wrong verdict: " + line)
    if args.out:
        meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "measured_in": args.measured, "device": doc["device"],
                "device_torch": doc["torch"], "capture_cpu_bench": here.to_json(),
                "target_cpu_bench": device.to_json(), "device_over_capture": list(ratios),
                "command": "python3 scripts/eval/wall_validate.py " + " ".join(sys.argv[1:])}
        Path(args.out).write_text(json.dumps({"meta": meta, "summary": summaries, "workloads": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
