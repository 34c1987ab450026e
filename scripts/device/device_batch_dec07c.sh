#!/bin/bash
# A device call (2026-12-07, seventeenth session), asked of an H200: zoo cnn_train_item (the `.item()` graph break)
# and grouped_conv_nchw measured eager and compiled in fresh processes (3 and 1), and the cuDNN convolution host probe
# (scripts/device/probe_conv_host.py, now with the profile's own convolution cases timed beside its rows) twice.
export PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
for i in 1 2 3; do
  timeout 80 python3 scripts/device/compile_measure.py --budget-s 70 --only cnn_train_item \
    --out $OUT/compile_item_run$i.json.gz > /dev/null 2>&1; echo "item $i rc=$? $(date +%T)"
done
timeout 80 python3 scripts/device/compile_measure.py --budget-s 70 --only grouped_conv_nchw \
  --out $OUT/compile_grouped_run1.json.gz > /dev/null 2>&1; echo "grouped rc=$? $(date +%T)"
for i in 1 2; do
  timeout 90 python3 scripts/device/probe_conv_host.py --out $OUT/conv_host_run$i.json > /dev/null 2>&1
  echo "conv $i rc=$? $(date +%T)"
done
