#!/usr/bin/env bash
# The second device call of 2026-12-05 (issues 30 and 33), each part its own process:
#   (device tool) bash scripts/device/device_batch_dec05b.sh    -> files under $OUT
# 1. reductions over a middle dim (calibrate/microbench.py middle_reduce_grid), the kind KernelBench's sums over
#    dim 1 showed (measured for the next model of the column-reduction curve);
# 2. the zoo's step times with no profiler in the process, a fourth clean run on another machine (issue 33).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
timeout 150 python3 -m kernelcast calibrate --gpu h200 --sections middle_reduce_grid --out /tmp/mr_profile.json \
    --raw "$OUT/h200_middle_reduce_grid_raw.json" 2>&1 | tail -3
gzip -f "$OUT/h200_middle_reduce_grid_raw.json"
timeout 300 python3 scripts/device/zoo_measure.py --timing-only --out "$OUT/zoo_timing_clean_run4.json.gz" 2>&1 | tail -3
} > "$OUT/batch.log" 2>&1
tail -12 "$OUT/batch.log"
