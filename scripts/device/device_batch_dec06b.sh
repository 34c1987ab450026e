#!/bin/bash
# One device call (2026-12-06, fifteenth session; it ran on an H200): the compiled-host probe with its backward case
# under reduce-overhead too (3 fresh processes), then KernelBench's host-bound level-1 programs in 3 fresh processes
# and all of level 1 in one process in order, no profiler (issue 33). KernelBench's programs travel as a copy in the
# working tree: `mkdir -p kb_tmp && cp -r ../shared/kernelbench/problems kb_tmp/` before the call (untracked; the
# device has no ../shared), removed after. Outputs: validation/probes/h200_compiled_host_bwd/ and
# validation/kernelbench/dec06b/ (kb_fresh_run* renamed subset_fresh_run*, kb_level1_inorder level1_inorder).
export PYTHONPATH=src KERNELBENCH_DIR=$PWD/kb_tmp
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
for i in 1 2 3; do
  timeout 150 python3 scripts/device/probe_compiled_host.py --only mm_relu_chain sum_inputs mlp_module \
    mlp_backward --out $OUT/compiled_host_bwd_run$i.json > $OUT/probe_log$i.txt 2>&1
  echo "probe $i rc=$? $(grep -c error $OUT/probe_log$i.txt) errors"
done
ONLY="19_ReLU 30_Softsign 47_Sum 41_Max_Pooling_1D 44_Average 51_Argmax 94_MSE 95_Cross 96_Huber 97_Cos 98_KL"
ONLY="$ONLY 99_Triplet 100_Hinge"
for i in 1 2 3; do
  timeout 60 python3 scripts/device/kernelbench_call_times.py --only $ONLY --out $OUT/kb_fresh_run$i.json \
    > /dev/null 2>&1; echo "fresh $i rc=$?"
done
timeout 200 python3 scripts/device/kernelbench_call_times.py --only level1/ --out $OUT/kb_level1_inorder.json \
    > /dev/null 2>&1; echo "inorder rc=$?"
