#!/usr/bin/env bash
# index_add_ of at most 16 indices (indexFuncSmallIndex) measured: calibrate section small_index_add_grid, twice
# in separate processes (the second for the run-to-run spread). Run on whichever GPU the device tool lends
# (2026-12-06: an H100, kind nvidia-h100-x1), as small_index_grid was.
#   (device tool) bash scripts/device/device_batch_small_index_add.sh    -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
for run in 1 2; do
  timeout 200 python3 -m kernelcast calibrate --gpu "${KC_GPU:-h100-sxm}" --sections small_index_add_grid \
      --out /tmp/small_index_add_profile.json --raw "$OUT/small_index_add_grid_raw_run$run.json" 2>&1 | tail -4
  gzip -f "$OUT/small_index_add_grid_raw_run$run.json"
done
} > "$OUT/batch.log" 2>&1
tail -30 "$OUT/batch.log"
