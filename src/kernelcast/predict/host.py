"""Host (CPU) time per op: Python + dispatcher + kernel launch, in eager PyTorch.

First version: fixed costs per kind of op, measured on the workplace's H200 host (validation/
host_microbench*.json: two runs, 2026-11-29; `kernelcast calibrate` now measures the same cases into a
profile's `host` section). The host-model work replaces them with the calibrated per-host costs and the
Python overhead measured during capture.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelcast.costs import Cost
from kernelcast.records import OpRecord

# CPU time per op on the H200 host (mean of the two runs' medians; the runs differ by up to 45%):
EAGER_KERNEL_OP_US = 8.6  # an eager op launching one kernel ("add": 7.8 and 9.4 us)
VIEW_OP_US = 1.5  # a view or metadata op ("view": 1.37 and 1.58 us)
HOST_ONLY_OP_US = 6.1  # an op on CPU tensors ("cpu add": 5.2 and 7.1 us)
SYNC_RETURN_US = 10.7  # an .item() on an idle GPU: memcpy, sync, Python resume (10.1 and 11.3 us)
# Not measured yet: one more cudaLaunchKernel from the same op (a few us is the usual order).
EXTRA_KERNEL_LAUNCH_US = 3.0


@dataclass(frozen=True)
class HostModel:
    eager_kernel_op_us: float = EAGER_KERNEL_OP_US
    extra_kernel_launch_us: float = EXTRA_KERNEL_LAUNCH_US
    view_op_us: float = VIEW_OP_US
    host_only_op_us: float = HOST_ONLY_OP_US
    sync_return_us: float = SYNC_RETURN_US
    host: str = "H200 host (workplace device machine)"

    def op_us(self, op: OpRecord, cost: Cost | None) -> float:
        if op.op.startswith("host."):
            return 0.0
        if "host" in op.tags:
            return self.host_only_op_us
        if cost is None or cost.kernels == 0:
            return self.view_op_us
        return self.eager_kernel_op_us + (cost.kernels - 1) * self.extra_kernel_launch_us
