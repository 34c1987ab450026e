#!/bin/bash
# A device call (2026-12-08, twenty-third session): dec08d without the H200-only zoo rerun (the session's device
# budget was low): torch.save's host time over storages x bytes (scripts/device/probe_torch_save.py) and the
# user-kinds probe again (its sparse.mm host side now too).
export PYTHONPATH=src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
timeout 150 python3 scripts/device/probe_torch_save.py --out $OUT/torch_save_probe.json > $OUT/save_probe.log 2>&1
echo "save probe rc=$? $(date +%T)"; tail -3 $OUT/save_probe.log
timeout 150 python3 scripts/device/probe_user_kinds.py --out $OUT/user_kinds_probe.json > $OUT/probe.log 2>&1
echo "user kinds probe rc=$? $(date +%T)"; tail -14 $OUT/probe.log
