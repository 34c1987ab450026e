"""Re-predict the host-side evidence here (no GPU) against saved device measurements.

    PYTHONPATH=src python3 scripts/compare_host_local.py validation/host_run1.json validation/host_run2.json [names]

A development aid: captures run on this machine, so the model's Python time is measured here and scaled by
the two machines' Python speed, as a user's capture would be.
"""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate_host as host  # noqa: E402

from kernelcast.api import capture_file  # noqa: E402
from kernelcast.predict import predict_capture  # noqa: E402


def main() -> None:
    runs = [arg for arg in sys.argv[1:] if arg.endswith(".json")]
    wanted = [arg for arg in sys.argv[1:] if not arg.endswith(".json")]
    measured = {}
    for path in runs:
        for row in json.load(open(path))["steps"]:
            if "measured" in row:
                measured.setdefault(row["name"], []).append(row["measured"])
    for name, spec, env in host.HOST_SUITE:
        if (wanted and name not in wanted) or name not in measured:
            continue
        os.environ.update(env)
        try:
            cap = capture_file(spec, "h200")
        except Exception as exc:  # noqa: BLE001
            print(f"{name:26s} capture failed: {exc}"[:200])
            continue
        finally:
            for key in env:
                os.environ.pop(key)
        p = predict_capture(cap, "h200")
        steps = [statistics.median(m["step_ms"]) for m in measured[name]]
        gpu = statistics.median(m["gpu_time_us"] for m in measured[name]) / 1000
        pred = p.step_time_us / 1000
        lo, hi = min(min(m["step_ms"]) for m in measured[name]), max(max(m["step_ms"]) for m in measured[name])
        inside = lo <= pred <= hi
        python = sum(o.python_us for o in p.ops) / 1000
        print(f"{name:26s} pred {pred:8.3f} ms ({p.bound}, host {p.host_time_us / 1000:7.3f} of which python "
              f"{python:6.3f}, GPU {p.gpu_time_us / 1000:7.3f})  meas {'/'.join(f'{s:.3f}' for s in steps)} "
              f"[{lo:.3f}-{hi:.3f}] GPU {gpu:7.3f}  err {pred / statistics.median(steps) - 1:+.0%} "
              f"{'inside' if inside else 'OUTSIDE'}", flush=True)


if __name__ == "__main__":
    main()
