"""Capture the validation workloads here (no GPU) and compare with a saved GPU measurement, op by op.

    PYTHONPATH=src python3 scripts/compare_local.py validation/capture_validation.json [names...]

For iterating on capture rules and launch counts between device runs. The numbers that count are the
device's own (scripts/validate_capture.py); this is a development aid.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import validate_capture as v  # noqa: E402

from kernelcast.capture import capture_workload  # noqa: E402
from kernelcast.capture.workload import load_build, on_sys_path  # noqa: E402
from kernelcast.predict import predict_capture  # noqa: E402


def family(op: str) -> str:
    return op.rstrip("_")


def main() -> None:
    saved = {w["name"]: w for w in json.load(open(sys.argv[1]))["workloads"]}
    wanted = sys.argv[2:] or [name for name, _, _ in v.WORKLOADS]
    for name, spec, env in v.WORKLOADS:
        if name not in wanted or "measured" not in saved.get(name, {}):
            continue
        os.environ.update(env)
        build, folder = load_build(spec)
        with on_sys_path(folder) if folder else v._null():
            cap = capture_workload(build, "h200", workload=spec)
        for key in env:
            os.environ.pop(key)
        pred = v.predicted_kernels(cap, predict_capture(cap, "h200"))
        meas = saved[name]["measured"]
        p_by, m_by = {}, {}
        for op, n in pred["by_op"].items():
            p_by[family(op)] = p_by.get(family(op), 0) + n
        for op, n in meas["by_op"].items():
            m_by[family(op)] = m_by.get(family(op), 0) + n
        err = (pred["kernels"] - meas["kernels"]) / meas["kernels"]
        print(f"== {name}: predicted {pred['kernels']} measured {meas['kernels']} ({err:+.1%})")
        for op in sorted(set(p_by) | set(m_by), key=lambda o: -abs(p_by.get(o, 0) - m_by.get(o, 0)))[:6]:
            if p_by.get(op, 0) != m_by.get(op, 0):
                print(f"     {op:45s} pred {p_by.get(op, 0):5d}  meas {m_by.get(op, 0):5d}")


if __name__ == "__main__":
    main()
