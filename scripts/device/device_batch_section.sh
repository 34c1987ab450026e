#!/usr/bin/env bash
# One or more `kernelcast calibrate` sections measured twice in separate processes (the second for the run-to-run
# spread), on whichever GPU the device tool lends: the raw runs come back gzipped as $OUT/<name>_raw_run{1,2}.json.gz.
#   (device tool) bash scripts/device/device_batch_section.sh SECTIONS NAME [TIMEOUT_S]
# SECTIONS: comma-separated calibrate sections; NAME: the files' stem; the GPU id is KC_GPU where set, else h200 on an
# H200 and h100-sxm on anything else. The per-grid scripts beside this one (device_batch_nll_loss.sh, ...) call it.
set -uo pipefail
sections=$1 name=$2 timeout_s=${3:-200}
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
gpu=${KC_GPU:-$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100-sxm)}
for run in 1 2; do
  timeout "$timeout_s" python3 -m kernelcast calibrate --gpu "$gpu" --sections "$sections" \
      --out "/tmp/${name}_profile.json" --raw "$OUT/${name}_raw_run$run.json" 2>&1 | tail -4
  gzip -f "$OUT/${name}_raw_run$run.json"
done
} > "$OUT/batch.log" 2>&1
tail -30 "$OUT/batch.log"
