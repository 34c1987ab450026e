#!/bin/bash
# A device call (2026-12-08, twenty-fourth session): what a cuDNN attention call at a new shape costs the host
# (scripts/device/probe_cudnn_graphs.py, twice, in two fresh processes), then the zoo's dynamic-cache decode step
# and its neighbours timed alone in a fresh process.
export PYTHONPATH=src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
for run in 1 2; do
  timeout 150 python3 scripts/device/probe_cudnn_graphs.py --out $OUT/cudnn_graphs_run$run.json > $OUT/graphs_run$run.log 2>&1
  echo "graphs run $run rc=$? $(date +%T)"; tail -12 $OUT/graphs_run$run.log
done
timeout 150 python3 scripts/device/zoo_measure.py --timing-only --only gpt2_decode_dynamic_cache llama_decode_static_cache \
  gpt2_generate_greedy --out $OUT/zoo_decode_timing.json.gz > $OUT/decode_timing.log 2>&1
echo "decode timing rc=$? $(date +%T)"; tail -4 $OUT/decode_timing.log

