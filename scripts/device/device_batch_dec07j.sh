#!/bin/bash
# A device call (2026-12-07, twenty-first session), asked of an H200: the issue-31 zoo set again (13 workloads),
# since zoo_measure.py profiles a compiled step without its module-range hooks (the set's first H200 run,
# 2026-12-03, profiled transformers' static-cache generate() while Dynamo recompiled for those hooks: 7588 work
# items against 1992 in its steady state); then the set's step times alone in a fresh process, no profiler.
export PYTHONPATH=src
W="gpt2_generate_greedy gpt2_generate_sample gpt2_generate_beam gpt2_generate_eos llama_generate_static_cache
 vit_checkpointed_train vit_plain_train video_conv3d_train volumetric_conv3d_forward_bf16 fft_layers_train
 lstm_inference_fp32 llama7b_adamw_step mlp_tf32_train"
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
timeout 330 python3 scripts/device/zoo_measure.py --only $W --out $OUT/zoo_issue31_measured_run2.json.gz \
  > $OUT/run2.log 2>&1; echo "profiled rc=$? $(date +%T)"; tail -2 $OUT/run2.log
timeout 160 python3 scripts/device/zoo_measure.py --timing-only --only $W \
  --out $OUT/zoo_issue31_timing_run1.json.gz > /dev/null 2>&1; echo "timing rc=$? $(date +%T)"
