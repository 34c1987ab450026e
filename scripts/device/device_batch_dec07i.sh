#!/bin/bash
# A device call (2026-12-07, twenty-first session), asked of an H200: the `.item()` graph-break step (zoo
# cnn_train_item, issue 32: eager and compiled) and the two held-out workloads that read the GPU
# (nerf_volume_render_train, policy_gradient_train; issue 31), each in three fresh processes. On an H100 these ran
# as device_batch_dec07g.sh and dec07h.sh.
export PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
for i in 1 2 3; do
  timeout 80 python3 scripts/device/compile_measure.py --budget-s 70 --only cnn_train_item \
    --out $OUT/compile_item_run$i.json.gz > /dev/null 2>&1; echo "item $i rc=$? $(date +%T)"
  timeout 100 python3 scripts/device/zoo_measure.py --only nerf_volume_render_train policy_gradient_train \
    --out $OUT/zoo_readback_kinds_run$i.json.gz > /dev/null 2>&1; echo "readback $i rc=$? $(date +%T)"
done
