#!/bin/bash
# A device call (2026-12-08, twenty-second session): three held-out workloads of the kinds that failed to capture
# until this session (a GCN on a sparse COO adjacency, a checkpoint saved every step, a TorchScript MLP), profiled
# (kernels, GPU time, peak memory) and then timed alone in a fresh process, no profiler.
export PYTHONPATH=src
W="gcn_sparse_adjacency_train checkpoint_each_step_train torchscript_mlp_forward"
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
timeout 200 python3 scripts/device/zoo_measure.py --only $W --out $OUT/zoo_dec08_measured.json.gz \
  > $OUT/measure.log 2>&1; echo "profiled rc=$? $(date +%T)"; tail -5 $OUT/measure.log
for run in 1 2; do
  timeout 90 python3 scripts/device/zoo_measure.py --timing-only --only $W \
    --out $OUT/zoo_dec08_timing_run$run.json.gz > /dev/null 2>&1; echo "timing $run rc=$? $(date +%T)"
done
