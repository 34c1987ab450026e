#!/usr/bin/env bash
# Reductions from L2 against after the L2 flush (calibrate section reduce_warm_grid) and the middle-dim reductions
# (middle_reduce_grid), each twice in separate processes. Run where the device tool lends an H200 (kind nvidia-h200).
#   (device tool) bash scripts/device/device_batch_reduce_warm.sh    -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
for run in 1 2; do
  timeout 200 python3 -m kernelcast calibrate --gpu "${KC_GPU:-h200}" --sections reduce_warm_grid,middle_reduce_grid \
      --out /tmp/reduce_warm_profile.json --raw "$OUT/reduce_warm_grid_raw_run$run.json" 2>&1 | tail -4
  gzip -f "$OUT/reduce_warm_grid_raw_run$run.json"
done
} > "$OUT/batch.log" 2>&1
tail -30 "$OUT/batch.log"
