"""Host (CPU) time per op: Python + dispatcher + kernel launch, in eager PyTorch.

First version: fixed costs per kind of op. The constants are the medians measured on the workplace's H200
host by scripts/validate_capture.py (host_microbench in validation/h200_capture.json); the host model issue
replaces them with a calibrated per-host profile and Python overhead measured during capture.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelcast.costs import Cost
from kernelcast.records import OpRecord

# Measured on the H200 host (see module doc): CPU time of one eager op that launches one kernel, of one more
# kernel launched by the same op, of a view/metadata op, and of an op on CPU tensors only.
EAGER_KERNEL_OP_US = 9.0
EXTRA_KERNEL_LAUNCH_US = 3.0
VIEW_OP_US = 2.5
HOST_ONLY_OP_US = 4.0
# Returning from a sync once the GPU is idle (event query, memcpy completion, Python resume).
SYNC_RETURN_US = 15.0


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
