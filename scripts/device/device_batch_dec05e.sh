#!/usr/bin/env bash
# The second device call of 2026-12-05's sixth session (issues 30, 31), each part its own process:
#   (device tool, carry build/kb = a copy of ../shared/kernelbench/problems) bash scripts/device/device_batch_dec05e.sh
# 1. our own whole-model programs (benchmarks/whole_models, KernelBench's format) timed by KernelBench's protocol
#    and profiled (scripts/device/kernelbench_call_times.py --dir --profiled), twice, in two processes;
# 2. KernelBench levels 1-2 by the same protocol (the day's host and GPU);
# 3. cuFFT transforms on this GPU (calibrate/grids.py fft_grid).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1 KERNELBENCH_DIR=build/kb
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
python3 -c "import einops" 2>&1 | tail -1
timeout 150 python3 scripts/device/kernelbench_call_times.py --dir benchmarks/whole_models --profiled \
    --out "$OUT/whole_models_run1.json" 2>&1 | grep -v Warning | tail -3
timeout 200 python3 scripts/device/kernelbench_call_times.py --out "$OUT/call_times_run3.json" 2>&1 | tail -2
timeout 150 python3 scripts/device/kernelbench_call_times.py --dir benchmarks/whole_models --profiled \
    --out "$OUT/whole_models_run2.json" 2>&1 | grep -v Warning | tail -3
timeout 90 python3 -m kernelcast calibrate --gpu h200 --sections fft_grid --out /tmp/fft_profile.json \
    --raw "$OUT/fft_grid_raw.json" 2>&1 | tail -2
gzip -f "$OUT/fft_grid_raw.json"
} > "$OUT/batch.log" 2>&1
tail -30 "$OUT/batch.log"
