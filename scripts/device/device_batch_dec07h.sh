#!/bin/bash
# A device call (2026-12-07, twentieth session): the two new held-out zoo workloads of backward formulas and shared
# kernels that read the GPU (examples/zoo/program_kinds.py nerf_volume_render_train, policy_gradient_train), each in
# three fresh processes.
export PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
for i in 1 2 3; do
  timeout 150 python3 scripts/device/zoo_measure.py --only nerf_volume_render_train policy_gradient_train \
    --out $OUT/zoo_readback_kinds_run$i.json.gz > $OUT/run$i.log 2>&1; echo "run $i rc=$? $(date +%T)"
done
