"""Left-one-out error of the calibrated model's lookups, over the calibration's own points (no suite step).

    PYTHONPATH=src python3 scripts/eval/loo_calibration.py [src/kernelcast/profiles/h200.json]

Each measured point is predicted from the others, as the model would predict an unmeasured shape. This is how
the lookup rules in predict/calibrated.py were chosen: per memory-bound kind, the size curve against the
nearest-point blend; for attention, how shapes are compared and whether sequence lengths are padded to tiles.
"""

import json
import statistics
import sys

from kernelcast.predict import calibrated as C
from kernelcast.predict.shape_kinds import ATTENTION_TILE
from kernelcast.costs import Cost
from kernelcast.devices import get_gpu
from kernelcast.records import CaptureSettings


def memory_errors(profile: dict) -> dict[str, tuple[float, int]]:
    """Median left-one-out error per memory-bound kind, with the model's own lookup."""
    out = {}
    for kind, points in sorted(profile["timings"]["memory"].items()):
        errors = []
        for i, (nbytes, items, time_us, inner, itemsize) in enumerate(points):
            others = [p for j, p in enumerate(points) if j != i]
            trimmed = json.loads(json.dumps(profile))
            trimmed["timings"]["memory"][kind] = others
            model = C.CalibratedModel(get_gpu(profile["gpu"]), CaptureSettings(), trimmed, get_gpu(profile["gpu"]))
            if kind not in model._memory or nbytes <= 0:
                continue
            cost = Cost(bytes_read=nbytes, kernels=items, kind=kind, key=(inner, itemsize))
            predicted = model._memory_time_us(cost)
            if predicted is not None:
                errors.append(abs(predicted / time_us - 1))
        if errors:
            out[kind] = (statistics.median(errors), len(errors))
    return out


def attention_errors(profile: dict) -> dict[str, tuple[float, int]]:
    """Median left-one-out error over attention points, odd sequence lengths apart."""
    rows = profile["timings"]["attention"]
    groups: dict[str, list[float]] = {}
    for i, r in enumerate(rows):
        trimmed = json.loads(json.dumps(profile))
        trimmed["timings"]["attention"] = rows[:i] + rows[i + 1:]
        model = C.CalibratedModel(get_gpu(profile["gpu"]), CaptureSettings(), trimmed, get_gpu(profile["gpu"]))
        cost = Cost(flops=r[-1], kernels=r[9], math="attention", dtype="bfloat16", kind="attention", key=tuple(r[:9]))
        rate = model._attention_flops_per_us(cost)
        if rate:
            group = "odd sequence length" if r[3] % ATTENTION_TILE else "multiple of the tile"
            groups.setdefault(group, []).append(abs(r[-1] / rate / r[-2] - 1))
    return {g: (statistics.median(e), len(e)) for g, e in groups.items()}


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "src/kernelcast/profiles/h200.json"
    profile = json.loads(open(path).read())
    for kind, (error, n) in memory_errors(profile).items():
        print(f"memory {kind:36s} {n:4d} points  median error {error:.1%}")
    for group, (error, n) in attention_errors(profile).items():
        print(f"attention, {group:28s} {n:4d} points  median error {error:.1%}")


if __name__ == "__main__":
    main()
