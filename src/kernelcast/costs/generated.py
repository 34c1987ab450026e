"""Kernels Inductor generates for torch.compile'd code (ops "triton.<class>.<kernel name>", capture/inductor.py).

Each launch is one kernel. Its bytes are Inductor's own estimate (`kernel_num_gb`, written into the kernel by
its Triton codegen: SIMDKernel.estimate_kernel_num_bytes, which counts a broadcast or sliced operand by what
the kernel reads of it); without it, the capture's byte accounting of its pointer arguments. Writes are its
output pointers' bytes (no more than Inductor's count: a kernel storing into part of a buffer); the rest of
Inductor's count is reads. FLOPs are Inductor's estimate where it makes one (templates), else 0: generated
pointwise and reduction kernels are memory-bound.

A kernel that adds atomically (Inductor's lowering of index_put / index_add with accumulate, an embedding's
backward, scatter_add: `tl.atomic_add`, one per element stored) is limited by its atomics, not its bytes
(zoo gcn_train compiled: 312 us for 128M fp32 atomic adds that Inductor counts as 112 MB, 8x the
bandwidth-bound time): it is keyed (GENERATED_ATOMICS_KEY, elements added, indices, destination bytes) and
priced by the profile's atomics fit (calibrate/generated.py atomics_fit) or its bytes, whichever is longer.
The indices are the largest integer tensor it reads (the scatter's index); none found, every element counts.

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
GENERATED_ATOMICS_KEY = "generated_atomics"
_INDEX_DTYPES = ("int64", "int32")


def _atomics_key(elements: int, reads: list, writes: list) -> tuple:
    indices = max((t.numel for t in reads if t.dtype in _INDEX_DTYPES), default=elements)
    return (GENERATED_ATOMICS_KEY, elements, indices, max(float(t.nbytes) for t in writes))


def _generated(op: OpRecord, ctx: CostContext) -> Cost:
    kind = GENERATED_KINDS[op.packet.split(".", 1)[1]]
    reads = [t for t in op.args.get("reads", ()) if hasattr(t, "on_gpu")]
    writes = gpu_tensors(op.tensors_out())
    written = float(sum(t.nbytes for t in writes))
    inductor_bytes = op.args.get("inductor_bytes")
    if inductor_bytes is not None:
        # A kernel that stores into part of a buffer (a scatter into an embedding's gradient, a KV-cache
        # update) touches less than the buffer: Inductor's count holds what it stores, so it caps the writes.
        written = min(written, float(inductor_bytes))
        read = max(float(inductor_bytes) - written, 0.0)
    else:
        read = float(sum(t.touched_bytes for t in gpu_tensors(reads)))
    inner = next((int(op.args[k]) for k in REDUCTION_NUMEL_ARGS if isinstance(op.args.get(k), int)), 1)
    main = max(reads + writes, key=lambda t: t.numel, default=None)
    itemsize = main.itemsize if main is not None else 4
    dtype = main.dtype if main is not None else "float32"
    flops = float(op.args.get("inductor_flops") or 0.0)
    math = "matmul" if kind == "triton_template" else "vector"
    key: tuple = (inner, itemsize)
    if op.args.get("atomic_elements") and writes:
        key = _atomics_key(int(op.args["atomic_elements"]), reads, writes)
    return Cost(flops=flops, bytes_read=read, bytes_written=written, kernels=1, math=math, dtype=dtype,
                kind=kind if kind != "triton_template" else "", key=key)


register(*(f"triton.{cls}" for cls in GENERATED_KINDS))(_generated)


def l2_share(destination_bytes: float, l2_bytes: float) -> float:
    """The share of a scatter's destination that stays in L2 (all of it when it fits)."""
    return min(1.0, l2_bytes / destination_bytes) if destination_bytes > 0 else 1.0


def atomics_features(elements: float, indices: float, destination_bytes: float, l2_bytes: float) -> list[float]:
    """[1, elements added in L2, elements added in DRAM, indices]: an atomic add resolves in L2 when its
    destination is resident there and is about twice as slow when not (H200 grid: 1.8 vs 3.8 ps an element),
    and each index costs the contention of the adds to one row (26 ps an element at row width 1)."""
    share = l2_share(destination_bytes, l2_bytes)
    return [1.0, elements * share, elements * (1.0 - share), indices]


def atomics_time_us(fit: dict, elements: float, indices: float, destination_bytes: float) -> float:
    """A generated kernel's atomic adds by a profile's fit (calibrate/generated.py atomics_fit), µs."""
    coef = (fit["floor_us"], fit["us_per_element_l2"], fit["us_per_element_dram"], fit["us_per_index"])
    return sum(c * x for c, x in zip(coef, atomics_features(elements, indices, destination_bytes, fit["l2_bytes"])))
