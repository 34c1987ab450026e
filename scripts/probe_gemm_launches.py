"""GEMMs at log-uniform sizes on the GPU: launch counts (and times) for the launch-count classifier.

    PYTHONPATH=src python3 scripts/probe_gemm_launches.py --out $OUT/h200_gemm_log_uniform_raw.json.gz   # on the H200
    python3 scripts/probe_gemm_launches.py --evaluate validation/h200_gemm_log_uniform_raw.json.gz         # here

On the device: the sweep section gemm_log_uniform (calibrate/sweep.py: M, N, K log-uniform from 1 to 16384 in
every dtype and layout), run as `kernelcast calibrate --sweep` runs its cases, written in the raw format that
scripts/build_h200_profile.py merges into the profile.

--evaluate: how well each launch-count rule, fitted on the designed sweep alone (the profile's rows before
these), predicts the work items of these held-out GEMMs, per dtype; then the same 10-fold check over all rows.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
BASE_RUNS = ("validation/h200_sweep_raw.json.gz", "validation/h200_extras2_raw.json.gz")


def run_on_device(out: str) -> int:
    from kernelcast.calibrate import run_meta, write_raw
    from kernelcast.calibrate.sweep import run_sweep, sweep_cases

    t0 = time.perf_counter()
    results = run_sweep(sweep_cases(["gemm_log_uniform"]))
    raw = {"meta": run_meta("PYTHONPATH=src python3 scripts/probe_gemm_launches.py --out "
                            "h200_gemm_log_uniform_raw.json.gz", t0),
           "cases": [], "sweep": results, "host": {}}
    write_raw(raw, out)
    errors = sum("error" in r for r in results)
    print(f"{len(results)} cases, {errors} errors, {raw['meta']['seconds']} s")
    return 0


def evaluate(path: str) -> int:
    from kernelcast.calibrate import launch_model, read_raw
    from kernelcast.calibrate.profile import _sweep_rows
    from kernelcast.costs.launch_table import LaunchTable, TreeClassifier

    base = [row[:8] for p in BASE_RUNS for row in _sweep_rows(read_raw(str(ROOT / p)).get("sweep", ()))[0]]
    held = [row[:8] for row in _sweep_rows(read_raw(path).get("sweep", ()))[0]]
    section = launch_model.fit_gemm_model(base)
    rules = {"nearest row": LaunchTable(tuple(map(tuple, base)), ()),
             "classifier": LaunchTable(tuple(map(tuple, base)), (),
                                       gemm_model=TreeClassifier.from_dict(section["classifier"]))}
    print(f"fitted on {len(base)} GEMMs of the designed sweep; held out: {len(held)} log-uniform GEMMs")
    result = {"base_rows": len(base), "held_out_rows": len(held),
              "by_dtype": rule_errors(held, lambda r: r[0], rules, lambda table, r: table.gemm_items(*r[:7]),
                                      lambda r: r[7], "dtype", 10)}
    both = launch_model.fit_gemm_model(base + held)
    result["ten_fold_all_rows"] = both["held_out"]
    print("10-fold over both sets:", both["held_out"])
    out = ROOT / "validation/gemm_launch_model.json"
    out.write_text(json.dumps({"command": "python3 scripts/probe_gemm_launches.py --evaluate " + path,
                               **result}, indent=1) + "\n")
    print("wrote", out.relative_to(ROOT))
    return 0


def rule_errors(held: list, group_of: Callable, rules: dict, items: Callable, truth: Callable, label: str,
                width: int) -> dict:
    """Per group of the held-out rows (and for all of them): how many each rule (a LaunchTable) gets wrong and
    its items off (summed |predicted - measured| over the measured items); printed as a table and returned.
    items(table, row) is the rule's answer (None counts as 1), truth(row) the measured work items."""
    groups = collections.defaultdict(list)
    for row in held:
        groups[group_of(row)].append(row)
    print(f"{label:{width}} {'rows':>5} " + " ".join(f"{name + ' wrong':>20} {'items off':>9}" for name in rules))
    result = {}
    for group, rows in sorted(groups.items()) + [("all", held)]:
        line, entry = f"{group:{width}} {len(rows):5d} ", {"rows": len(rows)}
        measured = [truth(r) for r in rows]
        for name, table in rules.items():
            predicted = [items(table, r) or 1 for r in rows]
            wrong = sum(p != m for p, m in zip(predicted, measured))
            off = sum(abs(p - m) for p, m in zip(predicted, measured)) / max(sum(measured), 1)
            line += f"{wrong:>13d} ({wrong / len(rows):5.1%}) {off:9.1%}"
            entry[name] = {"wrong": wrong, "items_off": round(off, 4)}
        result[group] = entry
        print(line)
    return result


def probe_main(doc: str, run_on_device: Callable[[str], int], evaluate: Callable[[str], int]) -> int:
    """The command line of a launch probe: --out runs it on the GPU, --evaluate scores the rules on a run."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
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
    sys.exit(probe_main(__doc__, run_on_device, evaluate))
