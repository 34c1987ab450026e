"""Re-predict the suite here (no GPU) against a saved device measurement (validation/suite.json).

    PYTHONPATH=src python3 scripts/eval/compare_suite_local.py validation/suite.json [names...]

A development aid: local captures use this machine's torch/transformers, which can differ from the device's.
"""

import json
import os
import sys

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(SCRIPTS, d) for d in ("device", "fit", "eval")]  # sibling scripts
import validate_suite as suite  # noqa: E402

from kernelcast.api import capture_file  # noqa: E402
from kernelcast.measure import KernelTime, Measurement  # noqa: E402
from kernelcast.predict import predict_capture  # noqa: E402
from kernelcast.validate import compare  # noqa: E402


def main() -> None:
    args = sys.argv[1:]
    out_json = None
    if "--json" in args:
        i = args.index("--json")
        out_json = args[i + 1]
        del args[i:i + 2]
    saved = {w["name"]: w for w in json.load(open(args[0]))["workloads"]}
    wanted = args[1:] or [name for name, _, _ in suite.SUITE]
    errors = []
    rows = []
    for name, spec, env in suite.SUITE:
        if name not in wanted or "measured" not in saved.get(name, {}):
            continue
        os.environ.update(env)
        cap = capture_file(spec, "h200")
        for key in env:
            os.environ.pop(key)
        m = saved[name]["measured"]
        kernels = tuple(KernelTime(op, mod, kname, dur, float(i)) for i, (op, mod, kname, dur) in enumerate(m["kernels"]))
        measurement = Measurement(m["device"], m["torch"], tuple(m["step_ms"]), kernels, m["work_items"])
        v = compare(cap, predict_capture(cap, "h200"), measurement, spec)
        errors.append(abs(v.gpu_time_error))
        rows.append({"name": name, **v.to_json()})
        print(f"== {name}: GPU time {v.gpu_time_error:+.1%} (pred {v.prediction.gpu_time_us / 1000:.2f} ms, "
              f"meas {measurement.gpu_time_us / 1000:.2f} ms)")
        if len(args) > 1:
            for r in v.rows[:10]:
                err = f"{r.error:+.0%}" if r.error is not None else "-"
                print(f"     {r.kind:24s} pred {r.predicted_us / 1000:7.3f} meas {r.measured_us / 1000:7.3f} {err}")
    errors.sort()
    print(f"median |error| {errors[len(errors) // 2]:.1%}, worst {errors[-1]:.1%}")
    if out_json:
        import kernelcast

        meta = {"command": "PYTHONPATH=src python3 scripts/eval/compare_suite_local.py " + " ".join(sys.argv[1:]),
                "measured_in": args[0], "kernelcast_commit_note": "predictions by the code as committed",
                "torch": __import__("torch").__version__, "kernelcast": getattr(kernelcast, "__version__", "")}
        json.dump({"meta": meta, "workloads": rows}, open(out_json, "w"))


if __name__ == "__main__":
    main()
