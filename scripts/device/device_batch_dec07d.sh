#!/bin/bash
# A device call (2026-12-07, nineteenth session), asked of an H200: the size-rule probe
# (scripts/device/probe_size_rules.py; checked here by scripts/eval/size_rules_check.py) and the zoo's
# cnn_train_item (the `.item()` graph break) compiled, in three fresh processes.
export PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
timeout 200 python3 scripts/device/probe_size_rules.py --out $OUT/size_rules_run1.json > $OUT/size_rules_run1.log 2>&1
echo "size rules rc=$? $(date +%T)"
for i in 1 2 3; do
  timeout 80 python3 scripts/device/compile_measure.py --budget-s 70 --only cnn_train_item \
    --out $OUT/compile_item_run$i.json.gz > /dev/null 2>&1; echo "item $i rc=$? $(date +%T)"
done
