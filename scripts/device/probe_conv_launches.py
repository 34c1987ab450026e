"""Convolutions drawn across the shapes real models use, on the GPU: launch counts (and times) for the conv
launch-count classifier.

    PYTHONPATH=src python3 scripts/device/probe_conv_launches.py --out $OUT/h200_conv_log_uniform_raw.json.gz   # on the H200
    python3 scripts/device/probe_conv_launches.py --evaluate validation/h200_conv_log_uniform_raw.json.gz         # here

On the device: the sweep section conv_log_uniform (calibrate/sweep.py: 1-D and 2-D, groups 1-64 and depthwise,
kernels up to 128 in 1-D and patch embeddings in 2-D, every dtype and layout, forward and both gradients), run as
`kernelcast calibrate --sweep` runs its cases, written in the raw format that scripts/fit/build_h200_profile.py
merges into the profile.

--evaluate: how well each launch-count rule, fitted on the designed sweep alone (the profile's conv rows before
these), predicts the work items of these held-out convolutions, per pass and dtype; then the same 10-fold check
over all rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts

# the launch probes' shared parts, and the same designed runs to fit on
from probe_gemm_launches import (BASE_RUNS, evaluate_command, evaluation_path, probe_main, rule_errors,  # noqa: E402
                                 run_section)
from kernelcast.costs.matmul import CONV_KEY_FIELDS  # noqa: E402


def run_on_device(out: str, draw: int = 1) -> int:
    return run_section("conv_log_uniform", "probe_conv_launches.py", out, draw)


def _conv_rows(path: Path) -> list:
    """[*conv_key, work items, per-group items] of a raw run's conv cases."""
    from kernelcast.calibrate import read_raw
    from kernelcast.calibrate.profile import _conv_launch_rows

    raw = read_raw(str(path))
    cases = [c for c in raw.get("cases", ()) if "error" not in c and c.get("ops")]
    return _conv_launch_rows(raw.get("sweep", ()), cases)


SUM_SIZE = 40  # convolutions per simulated step
SUM_DRAWS = 2000


class ExpectedCount:
    """A rule tried against the classifier's likeliest class: its expected count, the probability-weighted mean
    of its classes' work items (a per-group loop's classes left out for ungrouped and depthwise passes),
    rounded. LaunchTable.conv_items says why predictions keep the likeliest class."""

    def __init__(self, model):
        self.model = model

    def conv_items(self, key: tuple) -> int:
        from kernelcast.costs.launch_table import conv_features, conv_label_items

        probabilities = self.model.probabilities(conv_features(key))
        if not 2 <= key[8] < key[3]:
            probabilities = {label: p for label, p in probabilities.items() if label > 0}
        total = sum(probabilities.values())
        return max(1, round(sum(p * conv_label_items(int(label), key[8]) for label, p in probabilities.items())
                            / total))


def sum_errors(held: list, rules: dict, kinds: dict) -> dict:
    """Per kind of convolution (a predicate on a row) and rule: |predicted - measured| / measured of the work
    items summed over SUM_SIZE random held-out passes (a step's convolutions), median and 90th percentile over
    SUM_DRAWS draws; printed and returned."""
    import random
    import statistics

    result = {}
    for kind, keep in kinds.items():
        rows = [r for r in held if keep(r)]
        if len(rows) < SUM_SIZE:
            continue
        answers = {name: [table.conv_items(tuple(r[:CONV_KEY_FIELDS])) or 1 for r in rows] for name, table in rules.items()}
        rng = random.Random(0)
        draws = [rng.sample(range(len(rows)), SUM_SIZE) for _ in range(SUM_DRAWS)]
        result[kind] = {}
        for name, predicted in answers.items():
            errors = sorted(abs(sum(predicted[i] for i in d) - sum(rows[i][CONV_KEY_FIELDS] for i in d))
                            / sum(rows[i][CONV_KEY_FIELDS] for i in d) for d in draws)
            result[kind][name] = {"median": round(statistics.median(errors), 4),
                                  "p90": round(errors[int(0.9 * len(errors))], 4)}
            print(f"sums over {SUM_SIZE} {kind} passes, {name}: median {errors[len(errors) // 2]:.1%}, "
                  f"90th percentile {errors[int(0.9 * len(errors))]:.1%}")
    return result


def evaluate(path: str, fit_on: list[str] = ()) -> int:
    from kernelcast.calibrate import launch_model
    from kernelcast.costs.launch_table import LaunchTable, TreeClassifier

    base = [row for p in [*(ROOT / b for b in BASE_RUNS), *map(Path, fit_on)] for row in _conv_rows(p)]
    held = _conv_rows(Path(path))
    section = launch_model.fit_conv_model(base)
    model = TreeClassifier.from_dict(section["classifier"])
    rules = {"nearest row": LaunchTable((), tuple(map(tuple, base))),
             "classifier": LaunchTable((), tuple(map(tuple, base)), conv_model=model),
             "expected count": ExpectedCount(model)}
    print(f"fitted on {len(base)} convolutions of the designed sweep{' and earlier draws' if fit_on else ''}; "
          f"held out: {len(held)} drawn ones")
    result = {"base_rows": len(base), "held_out_rows": len(held),
              "by_pass_dtype": rule_errors(held, lambda r: f"{r[0]} {r[1]}", rules,
                                           lambda table, r: table.conv_items(tuple(r[:CONV_KEY_FIELDS])), lambda r: r[CONV_KEY_FIELDS],
                                           "pass dtype", 26)}
    result["sums"] = sum_errors(held, rules, {"dense": lambda r: r[8] == 1, "depthwise": lambda r: r[8] == r[3],
                                              "all": lambda r: True})
    both = launch_model.fit_conv_model(base + held)
    result["ten_fold_all_rows"] = both["held_out"]
    print("10-fold over both sets:", both["held_out"])
    out = evaluation_path("conv", fit_on)
    out.write_text(json.dumps({"command": evaluate_command("probe_conv_launches.py", path, fit_on),
                               **result}, indent=1) + "\n")
    print("wrote", out.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(probe_main(__doc__, run_on_device, evaluate))
