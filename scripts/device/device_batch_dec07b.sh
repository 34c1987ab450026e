#!/bin/bash
# A second, short device call (2026-12-07, sixteenth session), asked of an H200: zoo cnn_train_item (the `.item()`
# graph break) compiled in 3 fresh processes, and the cuDNN convolution host probe twice
# (scripts/device/probe_conv_host.py); device_batch_dec07.sh's first call had run on an H100.
export PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
for i in 1 2 3; do
  timeout 60 python3 scripts/device/compile_measure.py --budget-s 55 --only cnn_train_item \
    --out $OUT/compile_item_run$i.json.gz > /dev/null 2>&1; echo "item $i rc=$? $(date +%T)"
done
for i in 1 2; do
  timeout 60 python3 scripts/device/probe_conv_host.py --out $OUT/conv_host_run$i.json > /dev/null 2>&1
  echo "conv $i rc=$? $(date +%T)"
done
