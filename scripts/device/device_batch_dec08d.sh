#!/bin/bash
# A device call (2026-12-08, twenty-third session): torch.save's host time over a grid of storages and bytes
# (scripts/device/probe_torch_save.py), the user-kinds probe again, then, on an H200 only, the issue-31 zoo set again (device_batch_dec07j.sh).
export PYTHONPATH=src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
timeout 120 python3 scripts/device/probe_torch_save.py --out $OUT/torch_save_probe.json > $OUT/save_probe.log 2>&1
echo "save probe rc=$? $(date +%T)"; tail -3 $OUT/save_probe.log
# the SpMM, TorchScript and torch.save cases again on this GPU (first run: an H100, validation/h100/user_kinds_dec08)
timeout 120 python3 scripts/device/probe_user_kinds.py --out $OUT/user_kinds_probe.json > $OUT/probe.log 2>&1
echo "user kinds probe rc=$? $(date +%T)"
case "$GPU" in *H200*) bash scripts/device/device_batch_dec07j.sh ;; esac
