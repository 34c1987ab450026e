#!/usr/bin/env bash
# The first device call of 2026-12-05's seventh session: the whole zoo (examples/zoo, every registered workload:
# the 73 of validation/zoo_measured.json.gz and the 13 of the issue-31 set, and the rest) measured on the device
# machine's GPU as scripts/device/zoo_measure.py measures it (step time, kernels and GPU time from the profiler,
# peak memory alone in a fresh process), for a second GPU's whole-model check; first, probe_graph_launch.py (re-pointed
# at kernelcast.measure in the seventh session) as a check that the measure module runs on a GPU.
#   (device tool) bash scripts/device/device_batch_dec05g.sh    -> files under $OUT
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
python3 -c "import torch, transformers; print(torch.__version__, torch.backends.cudnn.version(), transformers.__version__)"
timeout 60 python3 scripts/device/probe_graph_launch.py --out "$OUT/graph_launch_measure_check.json" 2>&1 | tail -3
timeout 500 python3 scripts/device/zoo_measure.py --out "$OUT/zoo_measured_device.json.gz" 2>&1 | grep -v Warning | tail -5
} > "$OUT/batch.log" 2>&1
tail -12 "$OUT/batch.log"
