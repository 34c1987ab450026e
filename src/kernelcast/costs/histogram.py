"""torch.histc on CUDA (aten/src/ATen/native/cuda/SummaryOps.cu, _histc_cuda_template).

The output is zero-filled (`at::zeros`), then one kernelHistogram1D kernel bins the input (measured on the H200,
torch 2.11, zoo mixtral_forward: a fill and the histogram kernel per call). When min == max (the default
0, 0), torch first reads the input's min and max back to the host (`self.min().cpu()`, `self.max().cpu()`):
two reductions and two device-to-host copies, and the host waits for them (a sync point; capture/recorder.py).
"""

from __future__ import annotations

from kernelcast.records import OpRecord

from .common import arg, bytes_read, bytes_written
from .registry import Cost, CostContext, register

HISTOGRAM_KERNELS = 2  # zeros + kernelHistogram1D
RANGE_READBACK_ITEMS = 4  # min (reduce) + .cpu() (memcpy) + max (reduce) + .cpu()
HISTOGRAM_FLOPS_PER_ELEMENT = 1.0  # a bin index per element (nominal)


def needs_range(op: OpRecord) -> bool:
    return float(op.args.get("min") or 0) == float(op.args.get("max") or 0)


@register("aten.histc")
def histc(op: OpRecord, ctx: CostContext) -> Cost:
    x = arg(op, "self")
    readback = needs_range(op) and x.numel > 0
    kernels = HISTOGRAM_KERNELS + RANGE_READBACK_ITEMS * readback
    reads = bytes_read(op) * (3 if readback else 1)  # min and max read the input too
    return Cost(flops=HISTOGRAM_FLOPS_PER_ELEMENT * x.numel, bytes_read=reads, bytes_written=bytes_written(op),
                kernels=kernels, dtype=x.dtype, kind="reduction")
