#!/bin/bash
# A device call (2026-12-08, twenty-second session): what CUDA runs for torch.sparse.mm of a COO matrix, torch.save
# of CUDA tensors and a TorchScript module after its profiling runs (scripts/device/probe_user_kinds.py); then, on an
# H200 only, the issue-31 zoo set again (scripts/device/device_batch_dec07j.sh: its static-cache record is stale).
export PYTHONPATH=src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
timeout 240 python3 scripts/device/probe_user_kinds.py --out $OUT/user_kinds_probe.json > $OUT/probe.log 2>&1
echo "probe rc=$? $(date +%T)"; tail -20 $OUT/probe.log
case "$GPU" in *H200*) bash scripts/device/device_batch_dec07j.sh ;; esac
