#!/usr/bin/env bash
# nll_loss's one-block kernels measured: calibrate section nll_loss_grid (calibrate/grids.py says why), twice in
# separate processes (the second for the run-to-run spread), on whichever GPU the device tool lends.
#   (device tool) bash scripts/device/device_batch_nll_loss.sh    -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100-sxm)
for run in 1 2; do
  timeout 240 python3 -m kernelcast calibrate --gpu "$gpu" --sections nll_loss_grid \
      --out /tmp/nll_loss_profile.json --raw "$OUT/nll_loss_grid_raw_run$run.json" 2>&1 | tail -4
  gzip -f "$OUT/nll_loss_grid_raw_run$run.json"
done
} > "$OUT/batch.log" 2>&1
tail -30 "$OUT/batch.log"
