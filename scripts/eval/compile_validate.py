"""Re-predict compiled zoo workloads here against what the GPU measured (scripts/device/compile_measure.py).

    python3 scripts/eval/compile_validate.py validation/compile_measured.json.gz [--only NAME ...]

Each workload is captured on fake CUDA as `kernelcast predict WORKLOAD --compile MODE` does (Inductor runs here
for the target GPU; needs the triton package) for each measured compiled mode, and eager for the baseline.
Printed per workload and mode: kernels per step, GPU time and step time, predicted vs measured, and whether
the sign of the compile speed-up (against eager) is right where the measured change is above SIGN_THRESHOLD.
Issue 13's targets: compiled GPU time median |error| <= 10%, worst <= 25%; kernels per step median <= 10%;
reduce-overhead step time median <= 15%.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import kernelcast  # noqa: F401  (before torch)

from kernelcast.capture import capture_workload
from kernelcast.capture.cpu_speed import CpuBench
from kernelcast.capture.workload import load_build, on_sys_path
from kernelcast.predict import predict_capture

ROOT = Path(__file__).resolve().parents[2]
SIGN_THRESHOLD = 0.10  # a measured change above this must be predicted with the right sign


def _err(predicted: float, measured: float) -> float | None:
    return (predicted - measured) / measured if measured else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("measured")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--out", help="write the comparison as JSON")
    parser.add_argument("--target-host", action="store_true",
                        help="price the host as the measuring machine's, from the CPU benchmarks it recorded "
                             "(predict_capture's target_host), not as the profiled GPU's host: for runs on another "
                             "machine than the one the profile calibrated")
    args = parser.parse_args()
    with (gzip.open if args.measured.endswith(".gz") else open)(args.measured, "rt") as f:
        doc = json.load(f)
    target_host = CpuBench.from_json(doc["cpu_microbenchmarks"]) if args.target_host else None
    rows, errors = [], {"kernels": [], "gpu": [], "step_ro": []}
    signs = []
    for entry in doc["workloads"]:
        if args.only and entry["name"] not in args.only:
            continue
        path, func = entry["workload"].split(":")
        build, folder = load_build(str(ROOT / path) + ":" + func)
        predicted = {}
        for mode, measured in entry["variants"].items():
            if "error" in measured:
                continue
            t0 = time.perf_counter()
            try:
                with on_sys_path(folder):
                    cap = capture_workload(build, args.gpu, workload=entry["workload"],
                                           compile_mode=None if mode == "eager" else mode)
                pred = predict_capture(cap, args.gpu, target_host=target_host)
            except Exception as exc:
                print(f"{entry['name']:28s} {mode:16s} CAPTURE FAILED: {type(exc).__name__}: {exc}"[:300])
                traceback.print_exc(limit=3)
                continue
            predicted[mode] = pred
            row = {"name": entry["name"], "mode": mode, "kernels": pred.kernels, "kernels_measured": measured["work_items"],
                   "gpu_us": pred.gpu_time_us, "gpu_us_measured": measured["gpu_time_us"],
                   "step_us": pred.step_time_us, "step_us_measured": measured["step_ms_median"] * 1e3,
                   "capture_s": round(time.perf_counter() - t0, 1)}
            # A profiled step in which Dynamo compiled frames again holds the recompilation's kernels too: its
            # kernel count and GPU time are not the compiled step's, so they are not compared (the timed steps
            # compiled nothing). Measurements before compile_measure profiled compiled steps without the
            # module-range hooks had such steps (transformers' models); the current one has none.
            row["profile_recompiled"] = measured.get("profile_compiled_frames", 0) > 0
            rows.append(row)
            ek, eg, es = (_err(row["kernels"], row["kernels_measured"]), _err(row["gpu_us"], row["gpu_us_measured"]),
                          _err(row["step_us"], row["step_us_measured"]))
            if mode != "eager" and not row["profile_recompiled"]:
                errors["kernels"].append(abs(ek or 0))
                errors["gpu"].append(abs(eg or 0))
            if mode != "eager":
                if mode == "reduce-overhead":
                    errors["step_ro"].append(abs(es or 0))
            print(f"{entry['name']:28s} {mode:16s} kernels {row['kernels']:5d}/{row['kernels_measured']:<5d} "
                  f"gpu {row['gpu_us'] / 1e3:7.3f}/{row['gpu_us_measured'] / 1e3:<7.3f} ms ({eg or 0:+.0%}) "
                  f"step {row['step_us'] / 1e3:7.3f}/{row['step_us_measured'] / 1e3:<7.3f} ms ({es or 0:+.0%})"
                  + ("  [profiled step recompiled: kernels, GPU not compared]" if row["profile_recompiled"] else ""),
                  flush=True)
        eager = entry["variants"].get("eager", {})
        for mode in ("default", "reduce-overhead"):
            m = entry["variants"].get(mode, {})
            if "eager" in predicted and mode in predicted and "step_ms_median" in m and "step_ms_median" in eager:
                measured_change = m["step_ms_median"] / eager["step_ms_median"] - 1
                predicted_change = predicted[mode].step_time_us / predicted["eager"].step_time_us - 1
                if abs(measured_change) > SIGN_THRESHOLD:
                    signs.append((measured_change > 0) == (predicted_change > 0))
    for key, values in errors.items():
        if values:
            print(f"{key}: median |error| {statistics.median(values):.1%}, worst {max(values):.1%} over {len(values)}")
    if signs:
        print(f"sign of the compile speed-up right on {sum(signs)}/{len(signs)} workloads (measured change > "
              f"{SIGN_THRESHOLD:.0%})")
    if args.out:
        command = " ".join(["python3 scripts/eval/compile_validate.py", args.measured]
                           + (["--gpu", args.gpu] if args.gpu != "h200" else []) + (["--target-host"] if target_host else []))
        Path(args.out).write_text(json.dumps({"command": command,
                                              "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
