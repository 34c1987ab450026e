#!/bin/bash
# A device call (2026-12-07, twenty-first session): steps that call a torch.compile'd function from an eager loop
# (issue 33: the loop's Python now priced by its counted lines), each in three fresh processes: a greedy decode
# loop around a compiled forward (examples/host_steps.py compiled_decode_loop), and transformers' static-cache
# generate() with the eager dynamic-cache one beside it, timed alone (no profiler in the process).
export PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
for i in 1 2 3; do
  timeout 100 python3 scripts/device/measure_workloads.py --warmup 12 --out $OUT/decode_loop_run$i.json \
    examples/host_steps.py:compiled_decode_loop > /dev/null 2>&1; echo "decode loop $i rc=$? $(date +%T)"
  timeout 130 python3 scripts/device/zoo_measure.py --timing-only --only llama_generate_static_cache \
    gpt2_generate_greedy --out $OUT/generate_timing_run$i.json.gz > /dev/null 2>&1; echo "generate $i rc=$? $(date +%T)"
done
