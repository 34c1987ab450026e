#!/usr/bin/env bash
# One device call (2026-12-05) for issues 30, 31 and 33, each part its own process:
#   (device tool) bash scripts/device/device_batch_dec05.sh    -> files under $OUT
# 1. the zoo's step times with no profiler in the process, a third clean run (issue 33: host-bound truth from
#    separate processes and machines; runs 1 and 2 are validation/host_spread/zoo_timing_clean_run{1,2}.json.gz);
# 2. the fused-inference-path encoders (examples/zoo/program_kinds.py *_fastpath_*) measured as the zoo is;
# 3. value-and-index reductions (calibrate/microbench.py value_index_grid);
# 4. static-cache generate() over many calls in one process (scripts/device/probe_generate_calls.py).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
timeout 220 python3 scripts/device/zoo_measure.py --timing-only --out "$OUT/zoo_timing_clean_run3.json.gz" 2>&1 | tail -3
timeout 100 python3 scripts/device/zoo_measure.py --only encoder_fastpath_forward encoder_fastpath_padded_fp16 \
    mha_fastpath_forward --out "$OUT/zoo_fastpath_measured.json.gz" 2>&1 | tail -5
timeout 120 python3 -m kernelcast calibrate --gpu h200 --sections value_index_grid --out /tmp/vi_profile.json \
    --raw "$OUT/h200_value_index_grid_raw.json" 2>&1 | tail -3
gzip -f "$OUT/h200_value_index_grid_raw.json"
timeout 150 python3 scripts/device/probe_generate_calls.py --out "$OUT/generate_calls.json" 2>&1 | grep -v Warning | tail -8
} > "$OUT/batch.log" 2>&1
tail -30 "$OUT/batch.log"
