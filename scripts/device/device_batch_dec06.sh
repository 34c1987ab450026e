#!/usr/bin/env bash
# 2026-12-06: is the H200's reading of KernelBench level 1's losses (timing/H200_ours: MSELoss 102 us, 2.3x
# Softsign's three-op call, where every published GPU reads 1.0-1.2x) the program or the measuring process's
# state? The host-bound level-1 programs timed alone in fresh processes (twice), then all of level 1 in one
# process with --profiled as H200_ours was taken, then the subset again with --profiled.
#   mkdir -p build/kb && cp -r ../shared/kernelbench/problems build/kb/
#   (device tool, carry build/kb) bash scripts/device/device_batch_dec06.sh 1   -> files under $OUT
#   then, on the same warm machine:  bash scripts/device/device_batch_dec06.sh 2
# Part 1 (the subset: fresh processes twice, then --profiled) and part 2 (all of level 1 --profiled) each fit one
# 10-minute device call.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1 KERNELBENCH_DIR=build/kb
subset="level1/19_ level1/21_ level1/23_ level1/25_ level1/30_ level1/47_ level1/48_ level1/94_ level1/95_
        level1/96_ level1/97_ level1/98_ level1/99_ level1/100_"
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
python3 -c "import torch; print(torch.__version__)"
if [ "${1:-1}" = 1 ]; then
    for run in 1 2; do
        timeout 170 python3 scripts/device/kernelbench_call_times.py --only $subset --out "$OUT/subset_fresh_run$run.json"
    done
    timeout 170 python3 scripts/device/kernelbench_call_times.py --only $subset --profiled --out "$OUT/subset_profiled.json"
else
    timeout 540 python3 scripts/device/kernelbench_call_times.py --only level1/ --profiled --out "$OUT/level1_profiled.json"
fi
} > "$OUT/batch.log" 2>&1
tail -5 "$OUT/batch.log"
ls -la "$OUT"
