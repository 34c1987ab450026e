#!/usr/bin/env bash
# Device call: recalibrate (profile + raw cases), then the host-side evidence with captures taken on the
# device's own CPU and predictions made there with the new profile.
#   (device tool) bash scripts/device_run2.sh   -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
python3 -m kernelcast calibrate --gpu h200 --out "$OUT/h200.json" --raw "$OUT/h200_calibration_raw.json" 2>&1 | tail -3
cp "$OUT/h200.json" src/kernelcast/profiles/h200.json
python3 scripts/validate_host.py --out "$OUT/host_run3_device_capture.json" --captures /tmp/caps > "$OUT/host_run3.log" 2>&1
tail -16 "$OUT/host_run3.log"
tar czf "$OUT/device_captures.tgz" -C /tmp caps
gzip -f "$OUT/h200_calibration_raw.json"
