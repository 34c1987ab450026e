#!/usr/bin/env bash
# One device call for the docs: calibrate, fold this run's host costs into the host runs so far (the shipped
# host section is their per-case median), then the GPU-time suite with that profile.
#   (device tool) bash scripts/device/device_final.sh   -> files under $OUT; then, on the development machine:
#   cp $OUT/h200.json src/kernelcast/profiles/; cp $OUT/{suite,host_calibration_runs}.json validation/
#   python3 scripts/eval/report_validation.py validation/ docs/validation.md
# The wall-time evidence (validation/wall_run*.json) comes from `scripts/device/validate_host.py` runs, each its own
# process: `PYTHONPATH=src python3 scripts/device/validate_host.py --out $OUT/wall_runN.json --captures /tmp/caps`.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
python3 -m kernelcast calibrate --gpu h200 --out "$OUT/h200.json" --raw "$OUT/h200_calibration_raw.json" 2>&1 | tail -2
python3 - "$OUT" <<'PY'
import json, sys, time
out = sys.argv[1]
runs = json.load(open("validation/host_calibration_runs.json"))
runs["runs"].append({"run": f"calibrate {time.strftime('%Y-%m-%d %H:%M')}", "host": json.load(open(f"{out}/h200.json"))["host"]})
json.dump(runs, open(f"{out}/host_calibration_runs.json", "w"), indent=1)
PY
python3 scripts/fit/merge_host_runs.py "$OUT/host_calibration_runs.json" "$OUT/h200.json"
cp "$OUT/h200.json" src/kernelcast/profiles/h200.json
python3 scripts/device/validate_suite.py --out "$OUT/suite.json" 2>&1 | grep -v "^\[transformers\]"
} > "$OUT/final.log" 2>&1
tail -20 "$OUT/final.log"
gzip -f "$OUT/h200_calibration_raw.json"
