"""Horizontally fused ops over tensor lists: torch._foreach_* and the fused optimizers.

On CUDA these run through multi_tensor_apply, which packs chunks of many tensors into one launch and starts
a new launch when a launch's block or tensor table is full. The tables below are torch's
(aten/src/ATen/native/cuda/MultiTensorApply.cuh, DepthToMaxConfig<true>: the 32 KB kernel-argument tables
with CUDA 13 builds, and DepthToMaxConfig<false>, the 4 KB ones, before; CostContext says which). "Depth" is
the number of tensor lists a launch touches, output list included.
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord, TensorMeta

from .common import dense, distinct, gpu_tensors, width_key
from .registry import Cost, CostContext, register

CHUNK_ELEMENTS = 65536
# (max blocks per launch, max tensors by depth, max tensors by depth for scalar-list ops)
LARGE_ARG_TABLES = (2240, (770, 448, 336, 252, 210), (672, 448, 336, 252, 210))  # 32 KB kernel arguments
SMALL_ARG_TABLES = (320, (110, 64, 48, 36, 30), (96, 64, 48, 36, 30))  # 4 KB kernel arguments
FOREACH_FLOPS_PER_ELEMENT = 1.0
FUSED_ADAM_FLOPS_PER_ELEMENT = 16.0  # moments, bias corrections, sqrt, divide, decay, update
NORM_CLEANUP_KERNELS = 1  # _foreach_norm finishes each tensor's partial sums in one more kernel


def multi_tensor_launches(numels: list[int], depth: int, scalar_list: bool = False, large_args: bool = True) -> int:
    """Kernel launches multi_tensor_apply makes for tensors of these sizes (empty tensors are skipped)."""
    max_blocks, tensors_table, scalarlist_table = LARGE_ARG_TABLES if large_args else SMALL_ARG_TABLES
    table = scalarlist_table if scalar_list else tensors_table
    max_tensors = table[min(depth, len(table)) - 1]
    launches = blocks = tensors = 0
    for numel in numels:
        if numel == 0:
            continue
        tensors += 1
        chunks = math.ceil(numel / CHUNK_ELEMENTS)
        for chunk in range(chunks):
            blocks += 1
            last_chunk = chunk == chunks - 1
            if (tensors == max_tensors and last_chunk) or blocks == max_blocks:
                launches += 1
                blocks = 0
                tensors = 0 if last_chunk else 1  # an unfinished tensor carries into the next launch
    return launches + (1 if blocks else 0)


def tensor_lists(op: OpRecord) -> list[tuple[TensorMeta, ...]]:
    return [v for v in op.args.values()
            if isinstance(v, tuple) and v and all(isinstance(t, TensorMeta) for t in v)]


# Ops whose integer inputs give a float result: multi_tensor_apply cannot write those in place, so an integer
# list takes the slow route (ForeachUtils.h, does_op_promote_integer_inputs_to_float).
PROMOTES_INTEGERS = {"div", "sqrt", "rsqrt", "exp", "expm1", "log", "log10", "log1p", "log2", "sigmoid", "tanh",
                     "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "erf", "erfc", "lgamma",
                     "reciprocal", "pow", "lerp"}
FLOATING = {"float64", "float32", "float16", "bfloat16"}


def fast_route(op: OpRecord, lists: list[tuple[TensorMeta, ...]]) -> bool:
    """Whether a foreach op runs through multi_tensor_apply (aten/src/ATen/native/ForeachUtils.h,
    can_use_fast_route): every tensor of every list on the GPU, of the first tensor's dtype, strided, dense and
    non-overlapping; for a binary list op (`.List`) and copy_, the tensors at one index of every list of the same
    sizes and strides; no integer list for an op that promotes integers to float. Else the slow route: the op
    once per tensor (foreach_tensor_*_slow), one kernel each. On the H200 (torch 2.11): capturable Adam's
    `_foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt)`, full tensors by 0-d ones, ran 4 kernels for 4
    parameters (validation/cases/cuda_graph_kernels.json), while ASGD's `_foreach_addcmul_(axs, intermediate,
    mus)` with 0-d `mus` ran multi_tensor_apply's 2 launches for 16 (zoo optim_asgd): the pointwise ops are
    not held to the sizes check here."""
    first = lists[0]
    dtype = first[0].dtype
    for lst in lists:
        for t in lst:
            if not t.on_gpu or t.dtype != dtype or not dense(t):
                return False
    if op.op.endswith(".List") or op.name.startswith("_foreach_copy"):
        for lst in lists[1:]:
            if len(lst) != len(first) or any(a.shape != b.shape or a.stride != b.stride for a, b in zip(lst, first)):
                return False
    base = op.name.rstrip("_").removeprefix("_foreach_")
    return not (base in PROMOTES_INTEGERS and dtype not in FLOATING)


def _slow_route(op: OpRecord, lists: list[tuple[TensorMeta, ...]], flops_per_element: float) -> Cost:
    """The op once per tensor of the first list: one pointwise kernel for each on the GPU, priced by its own
    bytes."""
    inplace = "inplace" in op.tags
    outputs = gpu_tensors(op.tensors_out())
    parts = []
    for j, t in enumerate(lists[0]):
        if t.numel == 0 or not t.on_gpu:  # a CPU tensor's op (an optimizer's step count) runs on the host
            continue
        read = sum(lst[j].touched_bytes for lst in lists if j < len(lst))
        out = t if inplace or j >= len(outputs) else outputs[j]
        parts.append(Cost(flops=flops_per_element * t.numel, bytes_read=read, bytes_written=out.nbytes, kernels=1,
                          dtype=t.dtype, kind="pointwise", key=width_key(out)))
    return Cost(kernels=0, dtype=lists[0][0].dtype, kind="pointwise").with_parts(*parts)


def _foreach(op: OpRecord, ctx: CostContext, flops_per_element: float = FOREACH_FLOPS_PER_ELEMENT,
             extra_kernels: int = 0) -> Cost:
    lists = tensor_lists(op)
    if not lists:
        return Cost(kernels=0)
    if not fast_route(op, lists):
        return _slow_route(op, lists, flops_per_element)
    first = lists[0]
    inplace = "inplace" in op.tags
    outputs = gpu_tensors(op.tensors_out())
    depth = len(lists) + (0 if inplace or not outputs else 1)
    scalar_list = any(isinstance(v, tuple) and v and not isinstance(v[0], TensorMeta)
                      for v in op.args.values())
    read = sum(t.touched_bytes for t in distinct(gpu_tensors([t for lst in lists for t in lst])))
    written = sum(t.nbytes for t in (gpu_tensors(list(first)) if inplace else outputs))
    launches = multi_tensor_launches([t.numel for t in first], depth, scalar_list, ctx.multi_tensor_large_args)
    return Cost(
        flops=flops_per_element * sum(t.numel for t in first), bytes_read=read, bytes_written=written,
        kernels=launches + (extra_kernels if launches else 0), dtype=first[0].dtype, kind="foreach",
        key=chunk_key([t.numel for t in first]),
    )


def chunk_key(numels: list[int]) -> tuple:
    """The cost key of a multi_tensor_apply op: ("chunks", elements in its largest chunk, chunks). One thread
    block runs each chunk, so a list of few chunks takes as long as one block needs for the largest
    (predict/calibrated.py `foreach_blocks`). Three items: memory kinds read two-item keys as (row, item size)."""
    return (CHUNK_KEY, min(max(numels, default=0), CHUNK_ELEMENTS),
            sum(math.ceil(n / CHUNK_ELEMENTS) for n in numels))


CHUNK_KEY = "chunks"


FOREACH_OPS = (
    "abs", "acos", "add", "addcdiv", "addcmul", "asin", "atan", "ceil", "clamp_max", "clamp_min", "copy",
    "cos", "cosh", "div", "erf", "erfc", "exp", "expm1", "floor", "frac", "lerp", "lgamma", "log", "log10",
    "log1p", "log2", "max", "maximum", "minimum", "mul", "neg", "pow", "reciprocal", "round", "rsqrt",
    "sigmoid", "sign", "sin", "sinh", "sqrt", "sub", "tan", "tanh", "trunc", "zero",
)
register(*(f"aten._foreach_{name}" for name in FOREACH_OPS))(_foreach)
register(*(f"aten._foreach_{name}_" for name in FOREACH_OPS))(_foreach)


@register("aten._foreach_norm")
def foreach_norm(op: OpRecord, ctx: CostContext) -> Cost:
    return _foreach(op, ctx, extra_kernels=NORM_CLEANUP_KERNELS)


@register("aten._fused_adamw_", "aten._fused_adam_", "aten._fused_adamw", "aten._fused_adam")
def fused_adam(op: OpRecord, ctx: CostContext) -> Cost:
    """One fused kernel over params, grads, exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad)."""
    lists = [lst for name, lst in op.args.items() if name != "state_steps" and isinstance(lst, tuple)
             and lst and isinstance(lst[0], TensorMeta)]
    params = lists[0]
    moved = sum(t.nbytes for lst in lists for t in lst)
    depth = len(lists)
    return Cost(
        flops=FUSED_ADAM_FLOPS_PER_ELEMENT * sum(t.numel for t in params),
        bytes_read=moved, bytes_written=moved - sum(t.nbytes for t in lists[1]),  # grads are only read
        kernels=multi_tensor_launches([t.numel for t in params], depth, large_args=ctx.multi_tensor_large_args),
        dtype=params[0].dtype, kind="foreach", key=chunk_key([t.numel for t in params]),
    )


@register("aten._amp_foreach_non_finite_check_and_unscale_")
def amp_unscale(op: OpRecord, ctx: CostContext) -> Cost:
    """GradScaler.unscale_ (AmpKernels.cu, _amp_foreach_non_finite_check_and_unscale_cuda_): one
    multi_tensor_apply over the gradients (depth 1, in place), each multiplied by inv_scale and checked for
    inf/NaN into found_inf. Measured on the H200 (zoo amp_fp16_gradscaler_train): one launch, 32.8 µs."""
    grads = gpu_tensors(list(op.args.get("self") or ()))
    if not grads:
        return Cost(kernels=0)
    numels = [t.numel for t in grads]
    moved = sum(t.nbytes for t in grads)
    return Cost(flops=2.0 * sum(numels), bytes_read=moved, bytes_written=moved,
                kernels=multi_tensor_launches(numels, 1, large_args=ctx.multi_tensor_large_args),
                dtype=grads[0].dtype, kind="foreach", key=chunk_key(numels))


AMP_UPDATE_SCALE_KERNELS = 1  # amp_update_scale_cuda_kernel: one thread updates the scale and growth tracker


@register("aten._amp_update_scale_")
def amp_update_scale(op: OpRecord, ctx: CostContext) -> Cost:
    """GradScaler.update (AmpKernels.cu, _amp_update_scale_cuda_): one single-thread kernel on a few scalars."""
    scalars = gpu_tensors(op.tensors_in())
    return Cost(bytes_read=sum(t.nbytes for t in scalars), bytes_written=sum(t.nbytes for t in scalars[:2]),
                kernels=AMP_UPDATE_SCALE_KERNELS, dtype="float32", kind="pointwise", key=(1, 4))
