#!/bin/bash
# A device call (2026-12-07, twentieth session), asked of an H200: zoo cnn_train_item (the `.item()` graph break,
# issue 32) eager and compiled in three fresh processes, then the size-rule and OpInfo probes (issue 31) once more.
export PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
for i in 1 2 3; do
  timeout 80 python3 scripts/device/compile_measure.py --budget-s 70 --only cnn_train_item \
    --out $OUT/compile_item_run$i.json.gz > /dev/null 2>&1; echo "item $i rc=$? $(date +%T)"
done
timeout 200 python3 scripts/device/probe_size_rules.py --out $OUT/size_rules_run3.json > $OUT/size_rules_run3.log 2>&1
echo "size rules rc=$? $(date +%T)"
timeout 300 python3 scripts/device/probe_opinfo_items.py --out $OUT/opinfo_items_run3.json.gz --budget-s 250 \
  > $OUT/opinfo_items_run3.log 2>&1
echo "opinfo rc=$? $(date +%T)"; tail -1 $OUT/opinfo_items_run3.log
