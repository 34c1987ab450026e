"""Size-decided launches and memory: kernelcast against scripts/device/probe_size_rules.py's device runs.

    python3 scripts/eval/size_rules_check.py validation/probes/size_rules/size_rules_run1.json [--gpu h100-sxm]

Each probe case is captured here as the probe calls it and predicted on the GPU the probe ran on: its work items
(kernels, memsets, copies) against the profiler's count, and its peak memory growth against the allocator's.
The rules the cases try (costs/tensor_iterator.py, costs/pooling.py grid_z_launches, predict/memory.py
FULL_STORAGE_LOSSES) were read from PyTorch's source and checked on KernelBench programs before these shapes
were measured; nothing here is fitted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)

from kernelcast.capture import capture
from kernelcast.devices import get_gpu
from kernelcast.predict import predict_capture

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "device"))
from probe_size_rules import cases  # noqa: E402  (the probe's own cases)

GPU_OF_DEVICE = {"H100": "h100-sxm", "H200": "h200"}


def predicted(make, call, gpu: str) -> tuple[int, int]:
    """(work items, peak growth bytes) kernelcast predicts for one call of a case."""
    with capture(gpu) as cap:
        with cap.paused():
            inputs = make()
            warm = call(inputs)  # the probe's warm-up call: a backward case's x.grad is resident before it
            del warm
        out = call(inputs)
        del out
    pred = predict_capture(cap.capture, gpu)
    memory = pred.memory
    return pred.kernels, (memory.peak_bytes - memory.resident_bytes) if memory else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a probe_size_rules.py output")
    parser.add_argument("--gpu", help="kernelcast's id of the GPU it ran on (default: from the run's device name)")
    args = parser.parse_args()
    doc = json.loads(Path(args.run).read_text())
    gpu = args.gpu or next((g for k, g in GPU_OF_DEVICE.items() if k in doc["device"]), None)
    if gpu is None:
        print(f"size_rules_check: name the GPU of {doc['device']!r} with --gpu", file=sys.stderr)
        return 2
    get_gpu(gpu)
    right_items = right_memory = exact_memory = total = 0
    print(f"{doc['device']}, torch {doc['torch']}, predicted as {gpu}")
    print(f"{'case':32s} {'work items: measured':>21s} {'predicted':>10s} {'peak growth MiB: measured':>26s} "
          f"{'predicted':>10s}")
    for name, (make, call) in cases().items():
        row = doc["rows"].get(name)
        if row is None or "error" in row:
            print(f"{name:32s} {'(not measured: ' + row['error'][:40] + ')' if row else '(not in the run)'}")
            continue
        items, growth = predicted(make, call, gpu)
        total += 1
        right_items += items == row["work_items"]
        measured_growth = row["peak_growth_bytes"]
        close = abs(growth - measured_growth) <= max(0.01 * measured_growth, 64 << 10)
        right_memory += close
        exact_memory += growth == measured_growth
        print(f"{name:32s} {row['work_items']:>21d} {items:>10d} {measured_growth / 2**20:>26.2f} "
              f"{growth / 2**20:>10.2f}{'' if items == row['work_items'] and close else '  <-'}")
    print(f"\nwork items right on {right_items} of {total} cases; peak growth within 1% (or 64 KiB) on "
          f"{right_memory} of {total}, to the byte on {exact_memory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
