#!/bin/bash
# A device call (2026-12-08, twenty-fourth session): the issue-31 zoo set (13 workloads: generation loops,
# activation checkpointing beside the same model without it, 3-D CNNs, FFT, TF32, LSTM inference, a 7B AdamW
# step) profiled, then its step times alone in a fresh process, on whichever GPU came. On an H200 it replaces the
# set's stale first record (device_batch_dec07j.sh says why); on an H100 it is the set held out on another GPU
# and host. The checkpointed ViT's step (measured 49.8 ms against 26.4 without checkpointing, on the H200 on
# 2026-12-03) is what autograd's thread runs in Python (capture/host_clock.py LineCounter.adopt).
export PYTHONPATH=src
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
case "$GPU" in *H200*) TAG=h200 ;; *H100*) TAG=h100 ;; *) TAG=other ;; esac
W="gpt2_generate_greedy gpt2_generate_sample gpt2_generate_beam gpt2_generate_eos llama_generate_static_cache
 vit_checkpointed_train vit_plain_train video_conv3d_train volumetric_conv3d_forward_bf16 fft_layers_train
 lstm_inference_fp32 llama7b_adamw_step mlp_tf32_train"
timeout 330 python3 scripts/device/zoo_measure.py --only $W --out $OUT/zoo_issue31_${TAG}_measured.json.gz \
  > $OUT/profiled.log 2>&1; echo "profiled rc=$? $(date +%T)"; tail -2 $OUT/profiled.log
timeout 160 python3 scripts/device/zoo_measure.py --timing-only --only $W \
  --out $OUT/zoo_issue31_${TAG}_timing.json.gz > $OUT/timing.log 2>&1; echo "timing rc=$? $(date +%T)"
