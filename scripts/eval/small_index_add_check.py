"""index_add_ of at most 16 indices (indexFuncSmallIndex) priced by the profile's small_index_add lines, against
the device grid they were fitted on and the cases held out of the fit, beside the per-element line that priced
them before (indexFuncLargeIndex's atomics).

    python3 scripts/eval/small_index_add_check.py validation/h100_small_index_add_grid_raw.json.gz

The grid (calibrate/grids.py small_index_add_grid) adds along dim 0; its `small_index_add_check` cases add along
the middle dim of (8, 64, D) and are not fitted on. Predicted with the H200 profile, whose lines are the H100's
measured ones (scripts/fit/build_h200_profile.py says why they carry).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import statistics
import sys

import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
from kernelcast.costs import cost_of
from kernelcast.costs.indexing import ATOMICS_KEY
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings, OpRecord

KINDS = ("small_index_add", "small_index_add_check")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw")
    parser.add_argument("--gpu", default="h200")
    args = parser.parse_args()
    gpu = get_gpu(args.gpu)
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    cases = json.loads(gzip.open(args.raw).read())["cases"]
    for kind in KINDS:
        errors: dict[str, list[float]] = {"small-index lines": [], "per-element line (before)": []}
        for case in cases:
            if case["kind"] != kind or "error" in case:
                continue
            add = next(OpRecord.from_json(o) for o in case["ops"] if o["op"].startswith("aten.index_add"))
            cost = cost_of(add)
            before = dataclasses.replace(cost, key=(ATOMICS_KEY, cost.key[4], cost.key[5]))
            for name, priced in zip(errors, (cost, before)):
                errors[name].append(model.estimate(priced).time_us / case["device_us"] - 1)
        for name, values in errors.items():
            absolute = sorted(abs(v) for v in values)
            print(f"{kind:22s} {name:26s} n={len(values):3d} median |error| {statistics.median(absolute):6.1%} "
                  f"worst {absolute[-1]:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
