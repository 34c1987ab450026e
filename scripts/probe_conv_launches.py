"""Convolutions drawn across the shapes real models use, on the GPU: launch counts (and times) for the conv
launch-count classifier.

    PYTHONPATH=src python3 scripts/probe_conv_launches.py --out $OUT/h200_conv_log_uniform_raw.json.gz   # on the H200
    python3 scripts/probe_conv_launches.py --evaluate validation/h200_conv_log_uniform_raw.json.gz         # here

On the device: the sweep section conv_log_uniform (calibrate/sweep.py: 1-D and 2-D, groups 1-64 and depthwise,
kernels up to 128 in 1-D and patch embeddings in 2-D, every dtype and layout, forward and both gradients), run as
`kernelcast calibrate --sweep` runs its cases, written in the raw format that scripts/build_h200_profile.py
merges into the profile.

--evaluate: how well each launch-count rule, fitted on the designed sweep alone (the profile's conv rows before
these), predicts the work items of these held-out convolutions, per pass and dtype; then the same 10-fold check
over all rows.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_RUNS = ("validation/h200_sweep_raw.json.gz", "validation/h200_extras2_raw.json.gz")


def run_on_device(out: str) -> int:
    from kernelcast.calibrate import run_meta, write_raw
    from kernelcast.calibrate.sweep import run_sweep, sweep_cases

    t0 = time.perf_counter()
    results = run_sweep(sweep_cases(["conv_log_uniform"]))
    raw = {"meta": run_meta("PYTHONPATH=src python3 scripts/probe_conv_launches.py --out "
                            "h200_conv_log_uniform_raw.json.gz", t0),
           "cases": [], "sweep": results, "host": {}}
    write_raw(raw, out)
    errors = sum("error" in r for r in results)
    print(f"{len(results)} cases, {errors} errors, {raw['meta']['seconds']} s")
    return 0


def _conv_rows(path: Path) -> list:
    """[*conv_key, work items, per-group items] of a raw run's conv cases."""
    from kernelcast.calibrate import read_raw
    from kernelcast.calibrate.profile import _conv_launch_rows

    raw = read_raw(str(path))
    cases = [c for c in raw.get("cases", ()) if "error" not in c and c.get("ops")]
    return _conv_launch_rows(raw.get("sweep", ()), cases)


def evaluate(path: str) -> int:
    from kernelcast.calibrate import launch_model
    from kernelcast.costs.launch_table import LaunchTable, TreeClassifier

    base = [row for p in BASE_RUNS for row in _conv_rows(ROOT / p)]
    held = _conv_rows(Path(path))
    section = launch_model.fit_conv_model(base)
    rules = {"nearest row": LaunchTable((), tuple(map(tuple, base))),
             "classifier": LaunchTable((), tuple(map(tuple, base)),
                                       conv_model=TreeClassifier.from_dict(section["classifier"]))}
    print(f"fitted on {len(base)} convolutions of the designed sweep; held out: {len(held)} drawn ones")
    groups = collections.defaultdict(list)
    for row in held:
        groups[f"{row[0]} {row[1]}"].append(row)
    result = {"base_rows": len(base), "held_out_rows": len(held), "by_pass_dtype": {}}
    print(f"{'pass dtype':26} {'rows':>5} " + " ".join(f"{name + ' wrong':>20} {'items off':>9}" for name in rules))
    for name_, rows in sorted(groups.items()) + [("all", held)]:
        line, entry = f"{name_:26} {len(rows):5d} ", {"rows": len(rows)}
        for name, table in rules.items():
            predicted = [table.conv_items(tuple(r[:12])) or 1 for r in rows]
            wrong = sum(p != r[12] for p, r in zip(predicted, rows))
            off = sum(abs(p - r[12]) for p, r in zip(predicted, rows)) / max(sum(r[12] for r in rows), 1)
            line += f"{wrong:>13d} ({wrong / len(rows):5.1%}) {off:9.1%}"
            entry[name] = {"wrong": wrong, "items_off": round(off, 4)}
        result["by_pass_dtype"][name_] = entry
        print(line)
    both = launch_model.fit_conv_model(base + held)
    result["ten_fold_all_rows"] = both["held_out"]
    print("10-fold over both sets:", both["held_out"])
    out = ROOT / "validation/conv_launch_model.json"
    out.write_text(json.dumps({"command": "python3 scripts/probe_conv_launches.py --evaluate " + path,
                               **result}, indent=1) + "\n")
    print("wrote", out.relative_to(ROOT))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="run the probe on this machine's GPU and write the raw run here")
    parser.add_argument("--evaluate", help="a raw run of the probe: the rules' held-out error on it")
    args = parser.parse_args()
    if args.out:
        return run_on_device(args.out)
    if args.evaluate:
        return evaluate(args.evaluate)
    parser.error("give --out (on the GPU) or --evaluate")
    return 2


if __name__ == "__main__":
    sys.exit(main())
