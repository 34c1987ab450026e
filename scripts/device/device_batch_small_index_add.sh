#!/usr/bin/env bash
# index_add_ of at most 16 indices (indexFuncSmallIndex) measured: calibrate section small_index_add_grid, twice
# in separate processes (the second for the run-to-run spread). Run on whichever GPU the device tool lends
# (2026-12-06: an H100, kind nvidia-h100-x1), as small_index_grid was.
#   (device tool) bash scripts/device/device_batch_small_index_add.sh    -> files under $OUT
exec bash "$(dirname "$0")/device_batch_section.sh" small_index_add_grid small_index_add_grid
