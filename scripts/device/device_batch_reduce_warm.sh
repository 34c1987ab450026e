#!/usr/bin/env bash
# Reductions from L2 against after the L2 flush (calibrate section reduce_warm_grid) and the middle-dim reductions
# (middle_reduce_grid), each twice in separate processes. Run where the device tool lends an H200 (kind nvidia-h200).
#   (device tool) bash scripts/device/device_batch_reduce_warm.sh    -> files under $OUT
exec bash "$(dirname "$0")/device_batch_section.sh" reduce_warm_grid,middle_reduce_grid reduce_warm_grid
