#!/usr/bin/env bash
# nll_loss's one-block kernels measured: calibrate section nll_loss_grid (calibrate/grids.py says why), twice in
# separate processes (the second for the run-to-run spread), on whichever GPU the device tool lends.
#   (device tool) bash scripts/device/device_batch_nll_loss.sh    -> files under $OUT
exec bash "$(dirname "$0")/device_batch_section.sh" nll_loss_grid nll_loss_grid 240
