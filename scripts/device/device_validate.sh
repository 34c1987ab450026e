#!/usr/bin/env bash
# One device call: environment facts, CUDA dispatch probe, calibration, capture validation, the suite.
#   (device tool) bash scripts/device/device_validate.sh      -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__)"
python3 scripts/device/probe_cuda_rules.py > "$OUT/probe.log" 2>&1; tail -3 "$OUT/probe.log"
python3 -m kernelcast calibrate --gpu h200 --out src/kernelcast/profiles/h200.json --raw "$OUT/h200_calibration_raw.json"
cp src/kernelcast/profiles/h200.json "$OUT/h200.json"
python3 scripts/device/validate_capture.py --out "$OUT/capture_validation.json"
python3 scripts/device/validate_suite.py --out "$OUT/suite.json"
