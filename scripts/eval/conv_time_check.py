"""Convolution kernel times on the H200, op by op, against KernelBench levels 1-2 measured on it (issue 30).

    python3 scripts/eval/conv_time_check.py                        # the shipped profile
    python3 scripts/eval/conv_time_check.py --profile /tmp/x.json  # a rebuilt one, before it replaces the shipped one

Each captured program (build/kernelbench/captures, `scripts/eval/kernelbench_validate.py capture`) with exactly one
convolution: that op's predicted kernel time on the H200 against the summed kernels its aten op launched there
(validation/kernelbench/h200_kernels.json.gz, median of the profiled calls). None of these programs is in the
calibration: the profile's conv rows come from the sweep (calibrate/sweep.py). Printed per fitted family
(predict/calibrated.py fitted_name: 1-D/2-D, 3-D or transposed) and per route (a measured shape near it or the
fitted correction), median |error| and the share within 15%; the profile's own held-out errors beside them.
Many level-2 programs share one convolution shape (17 chains start with the same 3 -> 16 channel Conv2d), so
the count of distinct shapes is printed too.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts
KERNELS = ROOT / "validation" / "kernelbench" / "h200_kernels.json.gz"
WITHIN = 0.15


def single_conv_programs() -> list[tuple[str, object, float]]:
    """(program, the conv op's Cost, measured µs of the conv op's kernels) for each captured one-convolution
    program. The measured kernels are all the op launched (a 3-D or transposed convolution's bias add, cuDNN's
    layout copies), so the Cost is the op's whole, its parts included."""
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
    from kernelcast.costs import cost_of
    from kernelcast.measure import packet
    from kernelcast.records import Capture

    from kernelbench_kernels import _measured_by_op
    from kernelbench_validate import CAPTURES

    with gzip.open(KERNELS, "rt") as f:
        programs = json.load(f)["programs"]
    out = []
    for name, entry in sorted(programs.items()):
        path = CAPTURES / (name.replace("/", "__") + ".json")
        if "calls" not in entry or not path.exists():
            continue
        cap = Capture.load(path)
        convs = [cost_of(o) for o in cap.ops if o.parent < 0 and packet(o.op) == "convolution"]
        convs = [c for c in convs if c is not None and c.kind == "conv"]
        if len(convs) != 1:
            continue
        measured = _measured_by_op(entry["calls"], {packet(o.op) for o in cap.ops if o.parent < 0})
        if measured.get("convolution"):
            out.append((name, convs[0], measured["convolution"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", help="a profile JSON to use in place of the shipped H200 one")
    ap.add_argument("--each", action="store_true", help="print every program's error")
    args = ap.parse_args()

    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.predict.shape_kinds import fitted_name
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    data = json.loads(Path(args.profile).read_text()) if args.profile else load_profile("h200").data
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), data, gpu)
    by_family, by_route, shapes = collections.defaultdict(list), collections.defaultdict(list), {}
    for name, cost, measured_us in single_conv_programs():
        # the whole op (its bias add and other parts too), as measured; the route is its convolution's lookup's
        key = cost.key
        predicted_us = model.estimate(cost).time_us
        estimate = model._lookup_shape("conv", key)[1]
        error = predicted_us / measured_us - 1
        by_family[fitted_name("conv", key)].append(error)
        by_route[estimate.source].append(error)
        shapes[key] = error
        if args.each:
            print(f"{error:+7.0%}  {estimate.source:13s} {name[:60]:60s} {key}")

    def line(label: str, errors: list[float]) -> str:
        med = statistics.median(abs(e) for e in errors)
        within = sum(abs(e) <= WITHIN for e in errors) / len(errors)
        return f"{label:18s} {len(errors):4d} {med:13.1%} {within:10.0%}"

    every = [e for errors in by_family.values() for e in errors]
    print(f"{len(every)} single-convolution programs, {len(shapes)} distinct convolutions; conv kernel time on "
          "the H200, predicted against measured")
    print(f"{'':18s} {'n':>4s} {'median |err|':>13s} {'within 15%':>10s}")
    for family, errors in sorted(by_family.items()):
        held = data["timings"].get("fitted", {}).get(family, {}).get("held_out", {})
        print(line(family, errors) + (f"   (sweep held out by region: {held['median_error']:.1%})" if held else ""))
    for route, errors in sorted(by_route.items()):
        print(line(f"route {route}", errors))
    print(line("all", every))
    print(line("distinct shapes", list(shapes.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
