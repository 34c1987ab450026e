"""Predicted vs measured GPU time per op class: capture here (no GPU), compare with a saved GPU measurement.

    PYTHONPATH=src python3 scripts/compare_times_local.py validation/capture_validation.json [names...]

A development aid between device runs; the reported numbers come from the device (scripts/validate_suite.py).
"""

import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import validate_capture as v  # noqa: E402

from kernelcast.capture import capture_workload  # noqa: E402
from kernelcast.capture.workload import load_build, on_sys_path  # noqa: E402
from kernelcast.costs import cost_of  # noqa: E402
from kernelcast.predict import cost_context, predict_capture  # noqa: E402
from kernelcast.devices import get_gpu  # noqa: E402


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
        pred = predict_capture(cap, "h200")
        ctx = cost_context(get_gpu("h200"), cap)
        kind_of = {}
        p_time = collections.Counter()
        for op, p in zip(cap.ops, pred.ops):
            cost = cost_of(op, ctx)
            packet = v.packet(op.op).rstrip("_")
            if cost is not None and cost.kind:
                kind_of.setdefault(packet, cost.kind)
            p_time[packet] += p.time_us
        m_time = collections.Counter()
        for op, _, dur in saved[name]["measured"]["kernel_list"]:
            m_time[op.rstrip("_")] += dur
        by_class_p, by_class_m = collections.Counter(), collections.Counter()
        for packet, t in p_time.items():
            by_class_p[kind_of.get(packet, "other")] += t
        for packet, t in m_time.items():
            by_class_m[kind_of.get(packet, "other")] += t
        tp, tm = sum(p_time.values()), sum(m_time.values())
        print(f"== {name}: GPU time predicted {tp / 1000:.2f} ms, measured {tm / 1000:.2f} ms ({(tp - tm) / tm:+.1%})")
        for cls in sorted(set(by_class_p) | set(by_class_m), key=lambda c: -by_class_m.get(c, 0)):
            pm, mm = by_class_p.get(cls, 0), by_class_m.get(cls, 0)
            err = f"{(pm - mm) / mm:+.0%}" if mm else "-"
            print(f"     {cls:22s} pred {pm / 1000:7.3f} ms  meas {mm / 1000:7.3f} ms  {err}")


if __name__ == "__main__":
    main()
