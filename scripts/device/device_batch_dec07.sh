#!/bin/bash
# One device call (2026-12-07, sixteenth session), for issue 32's compiled backward host cost, on an H200; three
# rounds, each in fresh processes, so a call cut off at its limit keeps whole rounds:
# - the compiled-host probe's backward cases (grads accumulated, and set to None before each call) at sizes
#   1 4 8 16, eager, default and reduce-overhead, with the forward-only module case beside them;
# - zoo cnn_train_item (the `.item()` graph break) compiled (it had been measured on an H100 only);
# - (rounds 1 and 2) the host time of one cuDNN convolution call by kind (scripts/device/probe_conv_host.py);
# - (round 1) the zoo's reduce-overhead training steps that came out short, measured again.
# It ran on an H100 (2026-12-07 00:27-00:35; an H200 was asked for seven times), whose host ran the CPU
# benchmarks about 2x slower than the H200's (python_bench 17-19 ms against 8.6): validation/probes/
# h100_compiled_host_bwd2/, validation/compile/h100_item_b/ (compile_item_h200_run* renamed compile_item_run*;
# the rerun there completed two workloads), validation/probes/h100_conv_host/ (the second conv run did not come back).
export PYTHONPATH=src
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
for i in 1 2 3; do
  timeout 150 python3 scripts/device/probe_compiled_host.py --only mlp_module mlp_backward mlp_backward_none \
    --sizes 1 4 8 16 --out $OUT/compiled_host_bwd2_run$i.json > $OUT/probe_log$i.txt 2>&1
  echo "probe $i rc=$? $(grep -c error $OUT/probe_log$i.txt) errors $(date +%T)"
  timeout 60 python3 scripts/device/compile_measure.py --budget-s 55 --only cnn_train_item \
    --out $OUT/compile_item_h200_run$i.json.gz > /dev/null 2>&1; echo "item $i rc=$? $(date +%T)"
  [ $i -lt 3 ] || break
  timeout 60 python3 scripts/device/probe_conv_host.py --out $OUT/conv_host_run$i.json > $OUT/conv_log$i.txt 2>&1
  echo "conv $i rc=$? $(grep -c error $OUT/conv_host_run$i.json) errors $(date +%T)"
  [ $i -lt 2 ] || continue
  timeout 80 python3 scripts/device/compile_measure.py --budget-s 75 --only grouped_conv_nchw layernorm_odd_widths \
    losses_train optim_sgd_momentum optim_adamw --out $OUT/compile_rerun_run$i.json.gz > /dev/null 2>&1
  echo "rerun $i rc=$? $(date +%T)"
done
