#!/usr/bin/env bash
# One device call for the docs: calibrate (the profile then ships), the GPU-time suite with that profile, and
# the wall-time evidence in two separate processes (measure, capture on this machine, predict).
#   (device tool) bash scripts/device_final.sh   -> files under $OUT; then, on the development machine:
#   cp $OUT/h200.json src/kernelcast/profiles/; cp $OUT/suite.json validation/; copy host_final_run{1,2}.json to
#   validation/wall_runN.json after the earlier runs (the report takes the spread over all of them)
#   python3 scripts/report_validation.py validation/ docs/validation.md
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
python3 -m kernelcast calibrate --gpu h200 --out "$OUT/h200.json" --raw "$OUT/h200_calibration_raw.json" 2>&1 | tail -2
cp "$OUT/h200.json" src/kernelcast/profiles/h200.json
python3 scripts/validate_suite.py --out "$OUT/suite.json" 2>&1 | grep -v "^\[transformers\]"
for run in 1 2; do
  python3 scripts/validate_host.py --out "$OUT/host_final_run$run.json" --captures /tmp/caps 2>&1 | grep -v "^\[transformers\]"
done
} > "$OUT/final.log" 2>&1
tail -40 "$OUT/final.log"
tar czf "$OUT/device_captures.tgz" -C /tmp caps
gzip -f "$OUT/h200_calibration_raw.json"
