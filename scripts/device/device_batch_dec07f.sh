#!/bin/bash
# A device call (2026-12-07, nineteenth session), asked of an H200: both probes of this session again on another
# machine (scripts/device/probe_size_rules.py, scripts/device/probe_opinfo_items.py).
export PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
timeout 200 python3 scripts/device/probe_size_rules.py --out $OUT/size_rules_run2.json > $OUT/size_rules_run2.log 2>&1
echo "size rules rc=$? $(date +%T)"
timeout 300 python3 scripts/device/probe_opinfo_items.py --out $OUT/opinfo_items_run2.json.gz --budget-s 250 \
  > $OUT/opinfo_items_run2.log 2>&1
echo "opinfo rc=$? $(date +%T)"; tail -1 $OUT/opinfo_items_run2.log
