"""Reductions that keep an index (max / min over a dim, argmax / argmin): their time as a factor over the
value-only reduction of the same shape, fitted on the microbenchmark section value_index_grid.

Such a reduce kernel carries a (value, int64 index) pair per thread and writes int64 indices (MaxOps, ArgMaxOps
in aten/src/ATen/native/SharedReduceOps.h), on the same launch geometry as the value-only reduction of its shape
(aten/src/ATen/native/cuda/Reduce.cuh). So each "_index" kind (costs/elementwise.py VALUE_INDEX_REDUCTIONS) is
priced as its value-only kind's curve times a factor per value-only kind and input item size, the median over
the grid's cases of measured / that curve's time. Held out (`python3 scripts/eval/value_index_check.py --holdout`:
factors fitted on alternate shapes of the grid, the other half priced), median |error| with these factors against
the value-only kinds: argmax to one value 4.4% vs 26.9%, argmax over the last dim 7.4% vs 25.8%, max across rows
19.2% vs 43.5%, max over the last dim 5.8% vs 33.3%. Chosen over curves of their own for the "_index" kinds,
which the same split held out at 19.6%, 36.1%, 33.8% and 28.4% (that variant's code is not kept).
Held out of the fit: zoo gpt2_generate_greedy's argmax over the vocabulary 0.72 -> 0.88 of its measured kernels
(16 calls, 13.4 µs each); KernelBench's max / min / argmax over a middle dim (H200, `python3
scripts/device/kernelbench_kernels.py compare ... --all`, median predicted / measured) 0.74-0.82 -> 1.22-1.35: those
shapes' value-only curve already over-prices their sums (level 1 #47, a sum over dim 1 of 16 x 256 x 256: 12.0
µs against 5.3), and the factor rides on it (their max measured 2.75x their sum, as the grid's column
reductions ran 1.5-2.5x theirs).
"""

from __future__ import annotations

import dataclasses
import statistics

from kernelcast.costs.elementwise import INDEX_SUFFIX, base_kind, factor_key
from kernelcast.devices import get_gpu

MIN_CASES = 3  # a factor from fewer cases than this is not kept


def fit(profile: dict, cases: list[tuple[dict, list]]) -> dict[str, float]:
    """{factor key: factor} from the cases whose costed ops hold an "_index" kind. cases: (raw case, its [(op,
    Cost)]) as calibrate/profile.py costs them; profile: the profile built so far, whose memory curves price
    the value-only kinds. A case's factor is its measured device µs over its costs' predicted µs with each
    "_index" kind priced as its value-only kind."""
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.records import CaptureSettings

    spec = get_gpu(profile["gpu"])
    model = CalibratedModel(spec, CaptureSettings(), profile, spec)
    ratios: dict[str, list[float]] = {}
    for case, costs in cases:
        index_costs = [c for _, c in costs if c.kind.endswith(INDEX_SUFFIX)]
        if not index_costs:
            continue
        predicted = sum(model.estimate(dataclasses.replace(c, kind=base_kind(c.kind))).time_us for _, c in costs)
        if predicted > 0:
            ratios.setdefault(factor_key(index_costs[0]), []).append(case["device_us"] / predicted)
    factors = {key: round(statistics.median(r), 4) for key, r in sorted(ratios.items()) if len(r) >= MIN_CASES}
    for key in list(factors):  # a kind-wide factor where an item size has none of its own
        kind = key.split(":")[0]
        factors.setdefault(kind, round(statistics.median(v for k, v in factors.items() if k.split(":")[0] == kind), 4))
    return factors
