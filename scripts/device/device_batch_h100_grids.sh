#!/usr/bin/env bash
# The grids of scripts/device/device_batch_dec05c.sh on an H100 (kind nvidia-h100-x1) when no H200 was lent
# (2026-12-05): the middle-dim reduction and cuFFT sections measured on a second GPU, for checking how their
# model carries across GPUs, and the lone-call probe on that machine's host. Each part its own process.
#   (device tool, kind nvidia-h100-x1) bash scripts/device/device_batch_h100_grids.sh    -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
timeout 150 python3 -m kernelcast calibrate --gpu h100 --sections middle_reduce_grid,fft_grid --out /tmp/g_profile.json \
    --raw "$OUT/h100_middle_reduce_fft_grid_raw.json" 2>&1 | tail -4
gzip -f "$OUT/h100_middle_reduce_fft_grid_raw.json"
timeout 60 python3 scripts/device/probe_lone_call_host.py --out "$OUT/lone_call_host_h100_run1.json" 2>&1 | tail -40
timeout 60 python3 scripts/device/probe_lone_call_host.py --out "$OUT/lone_call_host_h100_run2.json" 2>&1 | tail -3
} > "$OUT/batch.log" 2>&1
tail -60 "$OUT/batch.log"
