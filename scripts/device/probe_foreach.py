"""GPU time of multi_tensor_apply kernels (torch._foreach_*) against the number of chunks they run (device probe).

multi_tensor_apply (aten/src/ATen/native/cuda/MultiTensorApply.cuh) runs one thread block per chunk of 65536
elements of one tensor. A list with few chunks leaves most of the GPU's SMs idle, and the launch then takes as
long as one block needs for its chunk, whatever the list's total bytes: an optimizer's parameter list of a small
model is such a list (the zoo's 14-tensor MLP: 39 chunks on 132 SMs). This probe times single launches over
lists of N tensors of E elements each (N x ceil(E / 65536) chunks), for ops of depth 2 and 3, with the kernel's
own duration from torch.profiler (median over REPEATS launches), for a model of time against chunks
(predict/calibrated.py, kind "foreach").

    PYTHONPATH=src python3 scripts/device/probe_foreach.py --out $OUT/foreach_probe.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from kernelcast.measure import kernel_durations

ELEMENTS = (4096, 65536, 262144, 1048576)
TENSORS = (1, 2, 4, 8, 16, 32, 64, 132, 264, 528)
OPS = {
    "_foreach_add_.Scalar": (2, lambda xs, ys: torch._foreach_add_(xs, 1.0)),
    "_foreach_addcmul_.Scalar": (3, lambda xs, ys: torch._foreach_addcmul_(xs, ys, ys, 0.5)),
}
REPEATS = 20
MAX_BYTES = 2 ** 31


def kernel_times(fn, cold: bool) -> list[float]:
    """Durations (µs) of the multi_tensor_apply kernels of REPEATS calls, the L2 flushed before each where cold (the
    lists then come from HBM, as an optimizer step's state does; kernelcast.measure kernel_durations)."""
    return [us for call in kernel_durations(fn, REPEATS, flush=cold) for name, us in call
            if "multi_tensor_apply" in name]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    for l2 in ("cold", "warm"):
        for name, (depth, call) in OPS.items():
            for elements in ELEMENTS:
                for n in TENSORS:
                    if n * elements * 4 * depth > MAX_BYTES:
                        continue
                    xs = [torch.ones(elements, device="cuda") for _ in range(n)]
                    ys = [torch.ones(elements, device="cuda") for _ in range(n)]
                    times = kernel_times(lambda: call(xs, ys), l2 == "cold")
                    launches = len(times) // REPEATS
                    per_call = [sum(times[i * launches:(i + 1) * launches]) for i in range(REPEATS)]
                    rows.append({"op": name, "l2": l2, "depth": depth, "tensors": n, "elements": elements,
                                 "chunks": n * -(-elements // 65536), "launches": launches,
                                 "bytes": n * elements * 4 * depth, "gpu_us_median": statistics.median(per_call)})
                    print(rows[-1], flush=True)
                    del xs, ys
    props = torch.cuda.get_device_properties(0)
    doc = {"device": torch.cuda.get_device_name(), "sms": props.multi_processor_count, "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M"),
           "command": "PYTHONPATH=src python3 scripts/device/probe_foreach.py --out OUT", "rows": rows}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
