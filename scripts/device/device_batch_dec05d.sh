#!/usr/bin/env bash
# The device call of 2026-12-05's sixth session (issues 30, 31 and 33), each part its own process:
#   (device tool, carry build/kb = a copy of ../shared/kernelbench/problems) bash scripts/device/device_batch_dec05d.sh
# 1. KernelBench levels 1-2 timed by KernelBench's protocol, twice, in two processes
#    (scripts/device/kernelbench_call_times.py): the day's host against timing/H200_ours;
# 2. cuFFT transforms on this GPU (calibrate/grids.py fft_grid: the H200 beside the H100's of the fifth session);
# 3. what one lone call of a small op costs the host, by kind (scripts/device/probe_lone_call_host.py).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1 KERNELBENCH_DIR=build/kb
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
timeout 200 python3 scripts/device/kernelbench_call_times.py --out "$OUT/call_times_run1.json" 2>&1 | tail -3
timeout 90 python3 -m kernelcast calibrate --gpu h200 --sections fft_grid --out /tmp/fft_profile.json \
    --raw "$OUT/fft_grid_raw.json" 2>&1 | tail -3
gzip -f "$OUT/fft_grid_raw.json"
timeout 60 python3 scripts/device/probe_lone_call_host.py --out "$OUT/lone_call_host_run1.json" 2>&1 | tail -3
timeout 200 python3 scripts/device/kernelbench_call_times.py --out "$OUT/call_times_run2.json" 2>&1 | tail -3
} > "$OUT/batch.log" 2>&1
tail -40 "$OUT/batch.log"
