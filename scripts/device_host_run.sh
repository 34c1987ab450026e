#!/usr/bin/env bash
# One device call: calibration (profile + raw cases), then the host-side evidence measured twice, each in its
# own process, so the run-to-run spread of host-bound steps is visible; a second host-cost run as well.
#   (device tool) bash scripts/device_host_run.sh   -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -m kernelcast calibrate --gpu h200 --out "$OUT/h200.json" --raw "$OUT/h200_calibration_raw.json" 2>&1 | tail -4
for run in 1 2; do
  python3 scripts/validate_host.py --out "$OUT/host_run$run.json" --captures /tmp/caps --measure-only ${HOST_ONLY:-} \
    > "$OUT/host_run$run.log" 2>&1
  tail -16 "$OUT/host_run$run.log"
done
python3 -c "import json, kernelcast.calibrate.host as h; print(json.dumps(h.host_costs()))" > "$OUT/host_costs_run2.json"
gzip -f "$OUT/h200_calibration_raw.json"
