#!/usr/bin/env bash
# One device call: environment facts, CUDA dispatch probe, host microbenchmark, capture validation.
#   (device tool) bash scripts/device_validate.sh      -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__)"
python3 scripts/probe_cuda_rules.py > "$OUT/probe.log" 2>&1; tail -3 "$OUT/probe.log"
python3 scripts/host_microbench.py --out "$OUT/host_microbench.json"
python3 scripts/validate_capture.py --out "$OUT/capture_validation.json" "$@"
