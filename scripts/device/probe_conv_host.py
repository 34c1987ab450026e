"""Host time of one cuDNN convolution call by kind of convolution (device probe, issues 32 and 33).

    (device) PYTHONPATH=src python3 scripts/device/probe_conv_host.py --out $OUT/conv_host_run1.json

The profile prices every cuDNN convolution's host side at one calibrated case (calibrate/host.py library_cases: a
16-channel 8x8 fp32 3x3 convolution, and its backward), whatever the convolution. On the H200 the zoo's grouped
fp16 convolution step (groups 32, NCHW: cuDNN runs two layout transforms, a memset, the convolution and a
transform back, then as many in the backward) measured 383-614 µs per step for 119 µs of kernels, where the host
model gave 117 µs. This probe times, per convolution kind, the calling thread's CPU µs per call of the forward
(under no_grad) and of the weight-and-input backward (torch.ops.aten.convolution_backward), CALLS back-to-back
calls with no synchronize inside, the median of REPEATS loops; batch 2 keeps each call's kernels short, so the
host's time is what is measured. Kinds: dense and grouped and depthwise, fp32 and fp16, NCHW and channels_last,
2-D and 3-D. Run it in more than one process: the device host's CPU times move up to 1.6x between runs. The
profile's own two cuDNN convolution cases are timed in the same process before and after the rows (REFERENCE_CASES),
so rows measured on another host can be read as multiples of the calibrated case.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import torch

from probe_compiled_host import CALLS, REPEATS, host_per_call  # sibling scripts (this folder is on sys.path)
from probe_lone_call_host import kernels_per_call

WARMUP = 10
BATCH = 2
# name -> (channels in, channels out, spatial size, kernel, stride, groups, dims)
KINDS = {
    "dense_3x3": (64, 64, 16, 3, 1, 1, 2),
    "dense_1x1": (64, 256, 16, 1, 1, 1, 2),
    "grouped_g32_s2": (1024, 1024, 14, 3, 2, 32, 2),
    "depthwise_3x3": (64, 64, 16, 3, 1, 64, 2),
    "stem_3ch_7x7_s2": (3, 64, 32, 7, 2, 1, 2),
    "dense_3d_3x3x3": (16, 32, 8, 3, 1, 1, 3),
}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
LAYOUTS = ("nchw", "channels_last")


def host_per_call_us(call) -> float:
    """CPU µs of this thread per call, after WARMUP calls: probe_compiled_host's timing (the median over its REPEATS
    loops of CALLS back-to-back calls, no synchronize inside)."""
    for _ in range(WARMUP):
        call()
    return host_per_call(call)[0]


def probe(kind: str, dtype: str, layout: str) -> dict:
    cin, cout, size, k, stride, groups, dims = KINDS[kind]
    spatial = (size,) * dims
    fmt = (torch.channels_last if dims == 2 else torch.channels_last_3d) if layout == "channels_last" \
        else torch.contiguous_format
    x = torch.randn(BATCH, cin, *spatial, device="cuda", dtype=DTYPES[dtype]).contiguous(memory_format=fmt)
    w = torch.randn(cout, cin // groups, *(k,) * dims, device="cuda", dtype=DTYPES[dtype]).contiguous(
        memory_format=fmt)
    conv = torch.nn.functional.conv2d if dims == 2 else torch.nn.functional.conv3d
    pad = k // 2
    with torch.no_grad():
        out = conv(x, w, None, stride, pad, 1, groups)
    grad = torch.randn_like(out)

    def forward():
        with torch.no_grad():
            conv(x, w, None, stride, pad, 1, groups)

    def backward():
        torch.ops.aten.convolution_backward(grad, x, w, [0], [stride] * dims, [pad] * dims, [1] * dims, False,
                                            [0] * dims, groups, [True, True, False])

    return {"kind": kind, "dtype": dtype, "layout": layout, "forward_us": round(host_per_call_us(forward), 3),
            "backward_us": round(host_per_call_us(backward), 3), "forward_items": kernels_per_call(forward),
            "backward_items": kernels_per_call(backward)}


REFERENCE_CASES = ("conv2d 3x3 (cuDNN)", "conv2d backward (cuDNN)")


def reference_us() -> dict[str, float]:
    """The profile's own cuDNN convolution cases (calibrate/host.py library_cases), timed as `kernelcast
    calibrate` times them (median wall µs per call of back-to-back loops): the probe's rows over these, read in
    the same process, carry to another host as ratios to that host's calibrated case."""
    import statistics

    from kernelcast.calibrate.host import library_cases, per_op_us

    cases = library_cases()
    return {name: round(statistics.median(per_op_us(*cases[name])), 3) for name in REFERENCE_CASES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from kernelcast.capture.cpu_speed import measure_cpu_bench

    doc = {"command": "PYTHONPATH=src python3 scripts/device/probe_conv_host.py " + " ".join(sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "device": torch.cuda.get_device_name(), "calls": CALLS, "repeats": REPEATS, "batch": BATCH,
           "cpu_bench": dataclasses.asdict(measure_cpu_bench()), "reference_before": reference_us(), "rows": []}
    for kind in KINDS:
        for dtype in DTYPES:
            for layout in LAYOUTS:
                try:
                    row = probe(kind, dtype, layout)
                except Exception as exc:  # one kind failing keeps the rest
                    row = {"kind": kind, "dtype": dtype, "layout": layout,
                           "error": f"{type(exc).__name__}: {exc}"[:300]}
                doc["rows"].append(row)
                print(json.dumps(row), flush=True)
                with open(args.out, "w") as f:
                    json.dump(doc, f, indent=1)
    doc["reference_after"] = reference_us()  # the host's drift over the run
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
