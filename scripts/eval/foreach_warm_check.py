"""The zoo's optimizer steps, foreach op by foreach op: predicted against measured on the H200 (issue 30, the kernel
model by kind).

    python3 scripts/eval/foreach_warm_check.py    # captures the 14 optim_* steps of examples/zoo/optimizers.py

Each step is captured here and its multi_tensor_apply ops priced as a prediction prices them, with the L2 tracker's
resident share of each op's inputs (predict/l2.py), once as shipped (the L2-resident block line where every input is
resident, predict/calibrated.py _foreach_time_us), once with every op at the HBM line, and once linear in the
resident share (the HBM line plus the share times the L2 line's difference, as the streaming kinds price it); the
measured times are
validation/zoo_measured.json.gz's kernels per aten op, summed by op name as validation/zoo_repredicted.json holds
them (comparison.op_times_us). Printed per op: measured, HBM line, linear, shipped; then the summed |error| of
each.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "validation" / "zoo_repredicted.json"
OPTIMIZERS = ROOT / "examples" / "zoo" / "optimizers.py"


def main() -> int:
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
    from kernelcast.capture import capture_workload
    from kernelcast.costs import cost_of
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.predict.l2 import warm_shares
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    spec = importlib.util.spec_from_file_location("zoo_optimizers", OPTIMIZERS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    measured = {w["name"]: w["comparison"]["op_times_us"] for w in json.loads(ZOO.read_text())["workloads"]}
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    totals = collections.Counter()
    print(f"{'step':22s} {'op':24s} {'measured':>9s} {'HBM line':>9s} {'linear':>9s} {'shipped':>9s}  (µs of kernels, "
          "summed by op)")
    for name in module.OPTIMIZERS:
        cap = capture_workload(getattr(module, f"build_{name}"), "h200", workload=name)
        by_op: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
        for op, share in zip(cap.ops, warm_shares(cap.ops, gpu.l2_bytes)):  # as predict_capture runs the tracker
            cost = cost_of(op)
            if cost is not None and cost.kind == "foreach" and op.parent < 0:
                sums = by_op[op.op.split(".")[1]]
                cold, warm = model.estimate(cost, 0.0).time_us, model.estimate(cost, 1.0).time_us
                sums[0] += cold
                sums[1] += cold + (warm - cold) * share
                sums[2] += model.estimate(cost, share).time_us
        step = measured.get(f"optim_{name}", {})
        for op_name, (cold, linear, shipped) in by_op.items():
            if op_name not in step:
                continue
            meas = step[op_name][1]
            totals.update({"measured": meas, "HBM line": abs(cold - meas), "linear": abs(linear - meas),
                           "shipped": abs(shipped - meas)})
            print(f"optim_{name:16s} {op_name:24s} {meas:9.1f} {cold:9.1f} {linear:9.1f} {shipped:9.1f}")
    print(f"summed |error| over {totals['measured']:.0f} µs measured: HBM line {totals['HBM line']:.0f} µs, "
          f"linear {totals['linear']:.0f} µs, shipped {totals['shipped']:.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
