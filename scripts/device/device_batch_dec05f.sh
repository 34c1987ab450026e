#!/usr/bin/env bash
# The third device call of 2026-12-05's sixth session: our whole-model programs (benchmarks/whole_models) timed by
# KernelBench's protocol and profiled, GPU busy time now from the device-side events (kernelcast.measure
# work_item_us), twice, in two processes.
#   (device tool) bash scripts/device/device_batch_dec05f.sh    -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
for run in 1 2; do
timeout 150 python3 scripts/device/kernelbench_call_times.py --dir benchmarks/whole_models --profiled \
    --out "$OUT/whole_models_run$run.json" 2>&1 | grep -v Warning | tail -2
done
} > "$OUT/batch.log" 2>&1
tail -10 "$OUT/batch.log"
