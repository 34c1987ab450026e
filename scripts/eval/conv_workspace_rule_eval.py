"""Held out: does tying a cuDNN pass's workspace class to the launch classifier's work items help? (issue 31)

    python3 scripts/eval/conv_workspace_rule_eval.py validation/probes/h200_conv_workspace.json.gz [--items 1]

predict/conv_workspace.py prices a pass the H200 launch classifier gives NO_WORKSPACE_ITEMS work items with no
workspace, whatever the workspace classifier says. Both classifiers were fitted on the same sweep, so the rule
looks right there by memory: this splits the workspace probe's passes into 10 folds (calibrate/workspace_model.py's
folds) and, for each, refits both the workspace classifier and the conv launch classifier without the fold's
passes (their launch rows out too, matched by conv_key), then counts the fold's classes right with the workspace
classifier alone and with the rule on top. `--items N` ties the rule to at most N items (the shipped rule: 1).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys

import numpy as np

from kernelcast.calibrate.launch_model import (CONV_BOOSTING_ITERATIONS, CONV_MAX_LEAF_NODES, _merge_rare, conv_label,
                                               new_classifier)
from kernelcast.calibrate.workspace_model import FOLDS, ITERATIONS, LEAVES, SEED, label, probe_rows
from kernelcast.costs.launch_table import conv_features, conv_label_items
from kernelcast.costs.matmul import CONV_KEY_FIELDS
from kernelcast.profiles import load_profile


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe")
    parser.add_argument("--items", type=int, default=1)
    args = parser.parse_args(argv)
    rows = probe_rows(json.load(gzip.open(args.probe, "rt")))
    x = np.array([conv_features(key) for key, _, _ in rows])
    y = np.array([label(ws / total) for _, ws, total in rows])
    folds = np.random.RandomState(SEED).randint(0, FOLDS, len(rows))
    launch_rows = [tuple(r) for r in load_profile("h200").data["launches"]["conv"]]
    lx = np.array([conv_features(r[:CONV_KEY_FIELDS]) for r in launch_rows], dtype=float)
    ly = np.array(_merge_rare([conv_label(r) for r in launch_rows]))
    launch_keys = [r[:CONV_KEY_FIELDS] for r in launch_rows]
    base = np.zeros(len(rows), dtype=int)
    ruled = np.zeros(len(rows), dtype=int)
    for f in range(FOLDS):
        test = np.flatnonzero(folds == f)
        held_keys = {tuple(rows[i][0]) for i in test}
        keep = np.array([k not in held_keys for k in launch_keys])
        workspace = new_classifier(ITERATIONS, LEAVES).fit(x[folds != f], y[folds != f])
        launches = new_classifier(CONV_BOOSTING_ITERATIONS, CONV_MAX_LEAF_NODES).fit(lx[keep], ly[keep])
        base[test] = workspace.predict(x[test])
        items = [conv_label_items(int(c), rows[i][0][8]) for i, c in zip(test, launches.predict(x[test]))]
        ruled[test] = [0 if n <= args.items else c for n, c in zip(items, base[test])]
        print(f"fold {f}: {len(test)} passes, {int(keep.size - keep.sum())} launch rows held out", flush=True)
    changed = base != ruled
    out = {"command": f"python3 scripts/eval/conv_workspace_rule_eval.py {args.probe} --items {args.items}",
           "passes": len(rows), "class_right_classifier": round(float((base == y).mean()), 4),
           "class_right_with_rule": round(float((ruled == y).mean()), 4), "changed": int(changed.sum()),
           "right_after": int((ruled[changed] == y[changed]).sum()),
           "right_before": int((base[changed] == y[changed]).sum())}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
