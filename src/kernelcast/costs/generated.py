"""Kernels Inductor generates for torch.compile'd code (ops "triton.<class>.<kernel name>", capture/inductor.py).

Each launch is one kernel. Its bytes are Inductor's own estimate (`kernel_num_gb`, written into the kernel by
its Triton codegen: SIMDKernel.estimate_kernel_num_bytes, which counts a broadcast or sliced operand by what
the kernel reads of it); without it, the capture's byte accounting of its pointer arguments. Writes are its
output pointers' bytes; the rest of Inductor's count is reads. FLOPs are Inductor's estimate where it makes
one (templates), else 0: generated pointwise and reduction kernels are memory-bound.

Each class gets a cost kind of its own ("triton_pointwise", "triton_reduction", ...), so a device profile can
calibrate generated kernels apart from eager ones; until it does, the kernel model stands in the eager kind
of the same class (predict/calibrated.py, MEMORY_FALLBACK), and the prediction's notes say so.
"""

from __future__ import annotations

from kernelcast.records import OpRecord

from .common import gpu_tensors
from .registry import Cost, CostContext, register

# Inductor's heuristics decorator (torch/_inductor/runtime/triton_heuristics.py) -> kernelcast's cost kind.
GENERATED_KINDS = {
    "pointwise": "triton_pointwise",
    "reduction": "triton_reduction",
    "persistent_reduction": "triton_persistent_reduction",
    "cooperative_reduction": "triton_reduction",
    "split_scan": "triton_reduction",
    "foreach": "triton_foreach",
    "template": "triton_template",
    "user_autotune": "triton_pointwise",
    "fixed_config": "triton_pointwise",
}
REDUCTION_NUMEL_ARGS = ("r0_numel", "rnumel", "r1_numel")  # the reduced length per output element


def _generated(op: OpRecord, ctx: CostContext) -> Cost:
    kind = GENERATED_KINDS[op.packet.split(".", 1)[1]]
    reads = [t for t in op.args.get("reads", ()) if hasattr(t, "on_gpu")]
    writes = gpu_tensors(op.tensors_out())
    written = float(sum(t.nbytes for t in writes))
    inductor_bytes = op.args.get("inductor_bytes")
    if inductor_bytes is not None:
        read = max(float(inductor_bytes) - written, 0.0)
    else:
        read = float(sum(t.touched_bytes for t in gpu_tensors(reads)))
    inner = next((int(op.args[k]) for k in REDUCTION_NUMEL_ARGS if isinstance(op.args.get(k), int)), 1)
    main = max(reads + writes, key=lambda t: t.numel, default=None)
    itemsize = main.itemsize if main is not None else 4
    dtype = main.dtype if main is not None else "float32"
    flops = float(op.args.get("inductor_flops") or 0.0)
    math = "matmul" if kind == "triton_template" else "vector"
    return Cost(flops=flops, bytes_read=read, bytes_written=written, kernels=1, math=math, dtype=dtype,
                kind=kind if kind != "triton_template" else "", key=(inner, itemsize))


register(*(f"triton.{cls}" for cls in GENERATED_KINDS))(_generated)
