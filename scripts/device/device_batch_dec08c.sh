#!/bin/bash
# A device call (2026-12-08, twenty-third session): dec08b's three held-out workloads (profiled, then timed twice in
# fresh processes) and dec08a's probe of what CUDA runs for sparse COO matmuls, torch.save and TorchScript, in one
# call so that one machine start serves both (starts are often refused).
export PYTHONPATH=src
bash scripts/device/device_batch_dec08b.sh
timeout 200 python3 scripts/device/probe_user_kinds.py --out $OUT/user_kinds_probe.json > $OUT/probe.log 2>&1
echo "probe rc=$? $(date +%T)"; tail -20 $OUT/probe.log
