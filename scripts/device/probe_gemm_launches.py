"""GEMMs at log-uniform sizes on the GPU: launch counts (and times) for the launch-count classifier.

    PYTHONPATH=src python3 scripts/device/probe_gemm_launches.py --out $OUT/h200_gemm_log_uniform_raw.json.gz   # on the H200
    python3 scripts/device/probe_gemm_launches.py --evaluate validation/h200_gemm_log_uniform_raw.json.gz         # here

On the device: the sweep section gemm_log_uniform (calibrate/sweep.py: M, N, K log-uniform from 1 to 16384 in
every dtype and layout), run as `kernelcast calibrate --sweep` runs its cases, written in the raw format that
scripts/fit/build_h200_profile.py merges into the profile.

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

ROOT = Path(__file__).resolve().parents[2]
BASE_RUNS = ("validation/h200_sweep_raw.json.gz", "validation/h200_extras2_raw.json.gz")


def run_on_device(out: str, draw: int = 1) -> int:
    return run_section("gemm_log_uniform", "probe_gemm_launches.py", out, draw)


def run_section(name: str, script: str, out: str, draw: int) -> int:
    """Run the `draw`-th sample of the drawn sweep section `name` on this machine's GPU; write the raw run."""
    from kernelcast.calibrate import run_meta, write_raw
    from kernelcast.calibrate.sweep import drawn_section, run_sweep, sweep_cases

    t0 = time.perf_counter()
    section = drawn_section(name, draw)
    results = run_sweep(sweep_cases([section]))
    raw = {"meta": run_meta(f"PYTHONPATH=src python3 scripts/{script} --draw {draw} --out "
                            f"h200_{section}_raw.json.gz", t0),
           "cases": [], "sweep": results, "host": {}}
    write_raw(raw, out)
    errors = sum("error" in r for r in results)
    print(f"{len(results)} cases, {errors} errors, {raw['meta']['seconds']} s")
    return 0


def evaluation_path(kind: str, fit_on: list[str]) -> Path:
    """Where an evaluation is written: validation/KIND_launch_model.json for the first held-out draw (fitted on
    the designed sweep alone), KIND_launch_model_N.json for draw N (fitted on the draws before it too)."""
    return ROOT / f"validation/{kind}_launch_model{'_' + str(len(fit_on) + 1) if fit_on else ''}.json"


def evaluate(path: str, fit_on: list[str] = ()) -> int:
    from kernelcast.calibrate import launch_model, read_raw
    from kernelcast.calibrate.profile import _sweep_rows
    from kernelcast.costs.launch_table import LaunchTable, TreeClassifier

    base = [row[:8] for p in [*(str(ROOT / b) for b in BASE_RUNS), *fit_on]
            for row in _sweep_rows(read_raw(p).get("sweep", ()))[0]]
    held = [row[:8] for row in _sweep_rows(read_raw(path).get("sweep", ()))[0]]
    section = launch_model.fit_gemm_model(base)
    rules = {"nearest row": LaunchTable(tuple(map(tuple, base)), ()),
             "classifier": LaunchTable(tuple(map(tuple, base)), (),
                                       gemm_model=TreeClassifier.from_dict(section["classifier"]))}
    print(f"fitted on {len(base)} GEMMs of the designed sweep{' and earlier draws' if fit_on else ''}; "
          f"held out: {len(held)} log-uniform GEMMs")
    result = {"base_rows": len(base), "held_out_rows": len(held),
              "by_dtype": rule_errors(held, lambda r: r[0], rules, lambda table, r: table.gemm_items(*r[:7]),
                                      lambda r: r[7], "dtype", 10)}
    both = launch_model.fit_gemm_model(base + held)
    result["ten_fold_all_rows"] = both["held_out"]
    print("10-fold over both sets:", both["held_out"])
    out = evaluation_path("gemm", fit_on)
    out.write_text(json.dumps({"command": evaluate_command("probe_gemm_launches.py", path, fit_on),
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


def evaluate_command(script: str, path: str, fit_on: list[str]) -> str:
    return f"python3 scripts/{script} --evaluate {path}" + "".join(f" --fit-on {p}" for p in fit_on)


def probe_main(doc: str, run_on_device: Callable[[str, int], int], evaluate: Callable[[str, list[str]], int]) -> int:
    """The command line of a launch probe: --out runs it on the GPU (--draw N: the section's N-th sample),
    --evaluate scores the rules on a run, fitted on the designed sweep and the runs given with --fit-on."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", help="run the probe on this machine's GPU and write the raw run here")
    parser.add_argument("--draw", type=int, default=1, help="which sample of the drawn section to run (default 1)")
    parser.add_argument("--evaluate", help="a raw run of the probe: the rules' held-out error on it")
    parser.add_argument("--fit-on", action="append", default=[],
                        help="an earlier raw run to fit on besides the designed sweep (repeatable)")
    args = parser.parse_args()
    if args.out:
        return run_on_device(args.out, args.draw)
    if args.evaluate:
        return evaluate(args.evaluate, args.fit_on)
    parser.error("give --out (on the GPU) or --evaluate")
    return 2


if __name__ == "__main__":
    sys.exit(probe_main(__doc__, run_on_device, evaluate))
