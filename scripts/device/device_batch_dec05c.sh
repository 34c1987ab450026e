#!/usr/bin/env bash
# The device call of 2026-12-05's second session (issues 30 and 33), each part its own process:
#   (device tool) bash scripts/device/device_batch_dec05c.sh    -> files under $OUT
# 1. reductions over a middle dim and cuFFT transforms (calibrate/grids.py middle_reduce_grid, fft_grid);
# 2. the zoo's step times with no profiler in the process, a fourth clean run on another machine (issue 33);
# 3. what one lone call of a small op costs the host, by kind (scripts/device/probe_lone_call_host.py), in two processes.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
timeout 150 python3 -m kernelcast calibrate --gpu h200 --sections middle_reduce_grid --out /tmp/mr_profile.json \
    --raw "$OUT/h200_middle_reduce_grid_raw.json" 2>&1 | tail -3
gzip -f "$OUT/h200_middle_reduce_grid_raw.json"
timeout 90 python3 -m kernelcast calibrate --gpu h200 --sections fft_grid --out /tmp/fft_profile.json \
    --raw "$OUT/h200_fft_grid_raw.json" 2>&1 | tail -3
gzip -f "$OUT/h200_fft_grid_raw.json"
timeout 60 python3 scripts/device/probe_lone_call_host.py --out "$OUT/lone_call_host_run1.json" 2>&1 | tail -40
[ -n "${SKIP_ZOO:-}" ] || timeout "${ZOO_TIMEOUT_S:-300}" python3 scripts/device/zoo_measure.py --timing-only --out "$OUT/zoo_timing_clean_run4.json.gz" 2>&1 | tail -3
[ -n "${SKIP_SECOND_PROBE:-}" ] || timeout 60 python3 scripts/device/probe_lone_call_host.py --out "$OUT/lone_call_host_run2.json" 2>&1 | tail -40
} > "$OUT/batch.log" 2>&1
tail -50 "$OUT/batch.log"
