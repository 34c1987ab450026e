"""A cuDNN convolution call's host time, kernelcast against scripts/device/probe_conv_host.py's device runs.

    python3 scripts/eval/conv_host_check.py validation/probes/h100_conv_host/conv_host_run1.json \\
        validation/probes/h100_conv_host_b/conv_host_run*.json [--without-items]

Each probe row (one kind of convolution, dtype and layout; the forward under no_grad and the weight-and-input
backward) is captured here as the probe calls it, and its convolution op's host price (predict_capture, the
run's own three CPU benchmarks as the target host) is compared with the CPU µs per call the run measured.
--without-items prices every call at its calibrated case alone, as before a convolution's extra cuDNN work items
(layout transforms, memsets) were priced (predict/host.py LIBRARY_LAUNCH_OPS).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
from pathlib import Path

import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
import torch

from kernelcast.capture import capture_workload
from kernelcast.capture.cpu_speed import CpuBench
from kernelcast.predict import predict_capture

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "device"))
from probe_conv_host import BATCH, DTYPES, KINDS, LAYOUTS  # noqa: E402  (the probe's own kinds)

PASSES = ("forward", "backward")


def _builds(kind: str, dtype: str, layout: str):
    """(forward build, backward build) of one probe row, each returning (step, args) as capture_workload wants."""
    cin, cout, size, k, stride, groups, dims = KINDS[kind]
    fmt = (torch.channels_last if dims == 2 else torch.channels_last_3d) if layout == "channels_last" \
        else torch.contiguous_format
    conv = torch.nn.functional.conv2d if dims == 2 else torch.nn.functional.conv3d

    def operands():
        x = torch.randn(BATCH, cin, *(size,) * dims, device="cuda", dtype=DTYPES[dtype]).contiguous(memory_format=fmt)
        w = torch.randn(cout, cin // groups, *(k,) * dims, device="cuda", dtype=DTYPES[dtype]).contiguous(
            memory_format=fmt)
        return x, w

    def forward_build():
        def step(x, w):
            with torch.no_grad():
                conv(x, w, None, stride, k // 2, 1, groups)
        return step, operands()

    def backward_build():
        x, w = operands()
        grad = torch.randn_like(conv(x, w, None, stride, k // 2, 1, groups))

        def step(grad, x, w):
            torch.ops.aten.convolution_backward(grad, x, w, [0], [stride] * dims, [k // 2] * dims, [1] * dims,
                                                False, [0] * dims, groups, [True, True, False])
        return step, (grad, x, w)

    return forward_build, backward_build


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--without-items", action="store_true")
    args = parser.parse_args()
    if args.without_items:
        host = importlib.import_module("kernelcast.predict.host")
        host.LIBRARY_LAUNCH_OPS = host.LIBRARY_LAUNCH_OPS - {"convolution", "convolution_backward"}
    captures = {}
    for kind in KINDS:
        for dtype in DTYPES:
            for layout in LAYOUTS:
                captures[kind, dtype, layout] = [capture_workload(b, "h200") for b in _builds(kind, dtype, layout)]
    errors: dict[str, list[float]] = {p: [] for p in PASSES}
    for path in args.runs:
        run = json.loads(Path(path).read_text())
        target = CpuBench(**run["cpu_bench"])  # the probe wrote dataclasses.asdict(measure_cpu_bench())
        for row in run["rows"]:
            if "error" in row:
                continue
            for pass_, cap in zip(PASSES, captures[row["kind"], row["dtype"], row["layout"]]):
                pred = predict_capture(cap, "h200", target_host=target)
                host_us = sum(p.host_us for p in pred.ops if "convolution" in p.op)
                errors[pass_].append(host_us / row[f"{pass_}_us"] - 1.0)
    for pass_, e in errors.items():
        print(f"{pass_:9s} {len(e)} calls: median error {statistics.median(e):+.0%}, "
              f"median |error| {statistics.median(map(abs, e)):.0%}, within 25%: {sum(abs(x) <= 0.25 for x in e)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
