#!/usr/bin/env bash
# 2026-12-05, eighth session: KernelBench levels 1-2 eager, compiled (inductor default) and reduce-overhead on the
# device machine's GPU, timed as KernelBench times them (scripts/eval/kernelbench_compiled.py measure: 3 warm-up
# calls, then 100 calls each between CUDA events from an idle GPU), written after every program. The programs are
# carried from ../shared/kernelbench (the device has no ../shared):
#   mkdir -p build/kb && cp -r ../shared/kernelbench/problems build/kb/
#   (device tool, carry build/kb) bash scripts/device/device_batch_dec05h.sh [FIRST_LEVEL]   -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1 KERNELBENCH_DIR=build/kb
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
python3 -c "import torch; print(torch.__version__, torch.backends.cudnn.version())"
timeout 560 python3 scripts/eval/kernelbench_compiled.py measure --modes default reduce-overhead \
    --only ${1:-level} --out "$OUT/kernelbench_compiled_${gpu}.json" 2>&1 | grep -v Warning | tail -3
} > "$OUT/batch.log" 2>&1
tail -8 "$OUT/batch.log"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(len(d['programs']), 'programs')" "$OUT/kernelbench_compiled_${gpu}.json"
