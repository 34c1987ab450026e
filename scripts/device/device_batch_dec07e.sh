#!/bin/bash
# A device call (2026-12-07, nineteenth session), asked of an H200: torch's own OpInfo samples, forward and
# backward, their work items and peak memory (scripts/device/probe_opinfo_items.py; checked here by
# scripts/eval/opinfo_items_check.py).
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
timeout 520 python3 scripts/device/probe_opinfo_items.py --out $OUT/opinfo_items_run1.json.gz --budget-s 430 \
  > $OUT/opinfo_items_run1.log 2>&1
echo "opinfo rc=$? $(date +%T)"; tail -1 $OUT/opinfo_items_run1.log
