"""Pooling, unpooling, upsampling and grid sampling beyond the 2-D ops elementwise.py covers.

Forward: one kernel writes the output, reading the input. Backward: most of these kernels scatter-add into the
input gradient (windows or interpolation taps overlap), so CUDA zero-fills it first (`grad_input.zero_()` /
`at::zeros_like(input)`), then runs one kernel: two work items, the gradient written twice. Sources, all in
aten/src/ATen/native/cuda/: DilatedMaxPool3d.cu, AveragePool3d.cu, AdaptiveAveragePooling3d.cu,
AdaptiveMaxPooling2d.cu / 3d.cu, FractionalMaxPool2d.cu, MaxUnpooling.cu (the output is zeroed, then the values
are scattered to their indices), UpSampleBicubic2d.cu, UpSampleLinear1d.cu, UpSampleTrilinear3d.cu,
UpSampleBilinear2d.cu (the anti-aliased variant), GridSampler.cu (the input gradient is zeros_like only when it
is requested). Nearest-neighbour backward gathers instead (each input element sums its own window of the
output gradient: UpSampleNearest1d.cu), one kernel.
"""

from __future__ import annotations

import dataclasses

import math

from kernelcast.records import OpRecord, TensorMeta

from .common import (bytes_written, channels_last_format, channels_last_kind, contiguous_copy, contiguous_in,
                     memory_op, row_major)
from .registry import Cost, CostContext, register

POOL_FLOPS_PER_ELEMENT = 1.0  # nominal: a compare or add per window element read (bytes set the roof)
ZERO_FILL_KERNELS = 1

# Windowed pooling in NC(D)HW: a thread per output (forward) or per gradient element (backward) walks its window,
# so the kernel's time follows the window's taps per output as well as the bytes it moves: on the H200 a 3 x 3 x 3
# max pool at stride 1 over 16 x 32 x 64^3 fp32 took 4.08 ms, 8x the same window at stride 2 (8x the outputs, the
# same input), where the bytes alone give 1.6x (validation/h200_shape_kinds_grid_raw.json.gz). The key carries
# what calibrate/window_rates.py fits a time to: (WINDOW_KEY, pool, window taps, outputs (for the 3-D pools the warp
# lanes their output rows take: output_lanes), input elements, then the
# byte curves' own key (innermost dim, item size), which prices the op where the profile has no window fit).
WINDOW_KEY = "pool_window"
WINDOW_OPS = {"max_pool2d_with_indices": "max_pool2d", "avg_pool2d": "avg_pool2d",
              "max_pool3d_with_indices": "max_pool3d", "avg_pool3d": "avg_pool3d"}


def window_key(op: OpRecord, cost: Cost) -> tuple | None:
    """The window key of a pooling op on a row-major (NCHW / NCDHW) input, else None (channels_last runs other
    kernels, which the byte curves price). Backward ops count the gradient's elements as the outputs."""
    backward = op.name.endswith("_backward")
    pool = WINDOW_OPS.get(op.name.removesuffix("_backward"))
    x = op.args.get("self")
    grad = op.args.get("grad_output") if backward else (op.outputs[0] if op.outputs else None)
    if pool is None or not isinstance(x, TensorMeta) or not isinstance(grad, TensorMeta) or not row_major(x):
        return None
    dims = 3 if pool.endswith("3d") else 2
    kernel = op.args.get("kernel_size")
    kernel = list(kernel) if isinstance(kernel, (list, tuple)) else [kernel]
    kernel = kernel * dims if len(kernel) == 1 else kernel
    if len(kernel) != dims or not all(isinstance(k, int) for k in kernel):
        return None
    inner, itemsize = cost.key if len(cost.key) == 2 else (1, 4)
    outputs = output_lanes(grad) if pool + "_backward" * backward in ROW_BLOCK_POOLS else grad.numel
    return (WINDOW_KEY, pool + "_backward" * backward, math.prod(kernel), outputs, x.numel, inner, itemsize)


# The NCDHW 3-D pooling kernels run one thread per output in blocks of 32 x 8 threads over (output width, output
# height), one block row a warp, and a grid over the output frames x channels x batch (DilatedMaxPool3d.cu
# max_pool3d_with_indices_out_frame and its backward; AveragePool3d.cu avg_pool3d_cuda_update_output): a row
# narrower than a warp leaves lanes idle, so the work goes by the warp lanes the rows take, not by the outputs.
# On the H200, fitted with outputs, KernelBench L2 #6's max pool over 15 x 15 output rows (15 of 32 lanes busy)
# was priced at 56 µs against 121 measured; by lanes, 116 (the fit's own leave-one-out median 9.0% -> 3.6%;
# KernelBench's 15 3-D pools, held out, median 12% -> 5%). The 2-D pools launch a flat grid over their elements:
# no idle lanes. avg_pool3d's backward runs the same blocks (over the input where the stride is 1 and there is no
# padding), but its time follows its atomic adds where windows overlap: by lanes its fit held out no better
# (leave-one-out median 20.2% either way, worst 71% -> 53%), so it keeps its outputs.
ROW_BLOCK_POOLS = frozenset({"max_pool3d", "avg_pool3d", "max_pool3d_backward"})
WARP_LANES = 32


def output_lanes(out: TensorMeta) -> int:
    """Warp lanes an NCDHW 3-D pool's threads take over its output (N, C, T, H, W): every output row rounded up
    to a whole warp."""
    *outer, height, width = out.shape
    return math.prod(outer) * height * math.ceil(width / WARP_LANES) * WARP_LANES


def with_window_key(op: OpRecord, cost: Cost) -> Cost:
    key = window_key(op, cost)
    return cost if key is None else dataclasses.replace(cost, key=key)


# The NCDHW 3-D pools' grids put frames x channels x batch on grid z, whose extent CUDA caps at 65535 blocks: the
# host launches the kernel once per 65535 of them (`while (totalZ > 0) { ... totalZ -= 65535; }` in
# AveragePool3d.cu avg_pool3d_out_cuda_template and its backward, DilatedMaxPool3d.cu
# max_pool3d_with_indices_out_frame and its backward, MaxUnpooling.cu max_unpooling3d_forward_out_cuda). A
# channels_last max pool's blocks hold 64 z-threads, so 64 x 65535 per launch. Measured on the H200 (torch 2.11,
# validation/kernelbench/h200_kernels.json.gz): KernelBench L2 #3's avg_pool3d over 128 x 64 x 16 output frames
# (131072 z-blocks) ran three kernels.
GRID_Z_MAX = 65535
CHANNELS_LAST_Z_THREADS = 64
# op -> (the tensor whose frames x channels x batch are the grid's z, unless the backward's stride-1 path)
GRID_Z_POOLS = {"avg_pool3d": "out", "max_pool3d_with_indices": "out", "avg_pool3d_backward": "grad_output",
                "max_pool3d_with_indices_backward": "grad_output", "max_unpool3d": "self"}


def grid_z_launches(op: OpRecord) -> int:
    """Launches of an NCDHW 3-D pool (GRID_Z_POOLS): one per GRID_Z_MAX blocks of frames x channels x batch."""
    which = GRID_Z_POOLS.get(op.name)
    x = op.args.get("self")
    if which is None or not isinstance(x, TensorMeta) or len(x.shape) < 4:
        return 1
    t = op.outputs[0] if which == "out" and op.outputs else op.args.get(which)
    if op.name == "avg_pool3d_backward" and _unit_stride_unpadded(op):
        t = x  # avg_pool3d_backward_out_frame_stride1 runs over the input's frames
    if not isinstance(t, TensorMeta) or len(t.shape) < 4:
        return 1
    per_launch = GRID_Z_MAX
    if op.name.startswith("max_pool3d") and not row_major(x) and x.stride[-4] == 1:
        per_launch *= CHANNELS_LAST_Z_THREADS
    return max(math.ceil(math.prod(t.shape[:-2]) / per_launch), 1)


def _unit_stride_unpadded(op: OpRecord) -> bool:
    """Stride 1 on every dim and no padding; an empty stride is the kernel size (F.avg_pool3d(x, 2) passes ())."""
    def ints(name: str) -> list:
        v = op.args.get(name)
        return list(v) if isinstance(v, (list, tuple)) else ([] if v is None else [v])
    stride = ints("stride") or ints("kernel_size")
    return bool(stride) and all(s == 1 for s in stride) and all(p == 0 for p in ints("padding"))


# Operands a pool's CUDA code makes contiguous before its kernel runs, in the input's suggested memory format
# (DilatedMaxPool2d.cu, AveragePool2d.cu: `input_.contiguous(memory_format)`, `gradOutput_.contiguous(memory_format)`,
# max_pool3d likewise) or row-major (AveragePool3d.cu `input.contiguous()`, `gradOutput.contiguous()`,
# AdaptiveAveragePooling3d.cu / AdaptiveMaxPooling3d.cu `gradOutput_.contiguous()`). Where one is not (the expanded
# gradient of `out.sum()`, a strided slice), a copy kernel runs and its result is held while the pool runs.
# Measured on an H100 (validation/probes/size_rules/size_rules_run1.json, `python3 scripts/eval/size_rules_check.py`):
# avg_pool3d's and max_pool3d's backward under `y.sum().backward()` ran one copy kernel each and took 17 MiB and 8
# MiB (the gradient's size) more than their outputs.
LAYOUT_OPERANDS = {"max_pool2d_with_indices": ("self",), "avg_pool2d": ("self",),
                   "max_pool2d_with_indices_backward": ("grad_output", "self", "indices"),
                   "avg_pool2d_backward": ("grad_output",), "max_pool3d_with_indices": ("self",),
                   "max_pool3d_with_indices_backward": ("grad_output", "indices"), "avg_pool3d": ("self",),
                   "avg_pool3d_backward": ("grad_output",), "_adaptive_avg_pool3d_backward": ("grad_output",),
                   "adaptive_max_pool3d_backward": ("grad_output",)}
ROW_MAJOR_POOLS = frozenset({"avg_pool3d", "avg_pool3d_backward", "_adaptive_avg_pool3d_backward",
                             "adaptive_max_pool3d_backward"})


def layout_copied(op: OpRecord) -> list[TensorMeta]:
    """The operands of a pool (LAYOUT_OPERANDS) its CUDA code copies to contiguous: those not already laid out so."""
    x = op.args.get("self")
    if not isinstance(x, TensorMeta):
        return []
    channels_last_order = op.name not in ROW_MAJOR_POOLS and channels_last_format(x)
    tensors = (op.args.get(name) for name in LAYOUT_OPERANDS.get(op.name, ()))
    return [t for t in tensors if isinstance(t, TensorMeta) and t.on_gpu and t.numel > 1
            and not contiguous_in(t, channels_last_order)]


def with_layout_copies(op: OpRecord, cost: Cost) -> Cost:
    """The cost with the copy kernels of layout_copied(op) added."""
    return cost.with_parts(*(contiguous_copy(t) for t in layout_copied(op)))


def _one_kernel(op: OpRecord, ctx: CostContext) -> Cost:
    base = memory_op(op, POOL_FLOPS_PER_ELEMENT, kernels=grid_z_launches(op), kind="pool")
    return with_layout_copies(op, with_window_key(op, base))


def _zero_then_scatter(op: OpRecord, ctx: CostContext) -> Cost:
    """A zero fill of the output, then the scatter kernel (once per grid-z chunk of a 3-D pool): the output is
    written twice."""
    base = memory_op(op, POOL_FLOPS_PER_ELEMENT, kernels=ZERO_FILL_KERNELS + grid_z_launches(op), kind="pool")
    written_twice = dataclasses.replace(base, bytes_written=2 * base.bytes_written)
    return with_layout_copies(op, with_window_key(op, written_twice))


register("aten.max_pool3d_with_indices", "aten.avg_pool3d", "aten._adaptive_avg_pool3d", "aten.adaptive_max_pool2d",
         "aten.adaptive_max_pool3d", "aten.fractional_max_pool2d", "aten.fractional_max_pool3d",
         "aten.upsample_bicubic2d", "aten.upsample_linear1d", "aten.upsample_trilinear3d",
         "aten._upsample_bilinear2d_aa", "aten._upsample_bicubic2d_aa", "aten.upsample_nearest1d",
         "aten.upsample_nearest3d", "aten._upsample_nearest_exact1d", "aten._upsample_nearest_exact2d",
         "aten._upsample_nearest_exact3d", "aten.upsample_nearest1d_backward",
         "aten._upsample_nearest_exact1d_backward", "aten._upsample_nearest_exact2d_backward",
         "aten.upsample_nearest3d_backward", "aten._upsample_nearest_exact3d_backward",
         "aten.grid_sampler_2d", "aten.grid_sampler_3d")(_one_kernel)

register("aten.max_pool3d_with_indices_backward", "aten.avg_pool3d_backward", "aten._adaptive_avg_pool3d_backward",
         "aten.adaptive_max_pool2d_backward", "aten.adaptive_max_pool3d_backward",
         "aten.fractional_max_pool2d_backward", "aten.fractional_max_pool3d_backward", "aten.max_unpool2d",
         "aten.max_unpool3d", "aten.upsample_bicubic2d_backward", "aten.upsample_linear1d_backward",
         "aten.upsample_trilinear3d_backward", "aten._upsample_bilinear2d_aa_backward",
         "aten._upsample_bicubic2d_aa_backward")(_zero_then_scatter)


@register("aten.grid_sampler_2d_backward", "aten.grid_sampler_3d_backward")
def grid_sampler_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """One kernel writes both gradients; the input gradient, when requested (output_mask[0]), is zeros_like
    first (GridSampler.cu, grid_sampler_2d_backward_cuda)."""
    mask = tuple(op.args.get("output_mask") or (True, True))
    base = memory_op(op, POOL_FLOPS_PER_ELEMENT, kernels=1 + ZERO_FILL_KERNELS * bool(mask[0]), kind="pool")
    grad_input = op.outputs[0] if op.outputs and mask[0] else None
    extra = float(grad_input.nbytes) if grad_input is not None and grad_input.on_gpu else 0.0
    return dataclasses.replace(base, bytes_written=bytes_written(op) + extra)


MAX_POOL_BACKWARD_KERNELS = 2  # zero the input gradient, then scatter into it (measured)


# Pooling: window reads that neither stream like a copy nor reduce along rows (measured on the H200 at a third of
# the copy rate forward and a fifth backward, channels_last: docs/validation.md); a kind of their own, calibrated
# by calibrate's extras2 section.
# Each op and layout is its own kernel: on the H200 an adaptive average pool to 1x1 of the same 51 MB ran in
# 0.64 ms in NCHW (a reduction over H x W) and 5.5 ms in channels_last (validation/h200_extras2_raw.json.gz).
POOLING_KINDS = {"max_pool2d_with_indices": "max_pool", "avg_pool2d": "avg_pool",
                 "_adaptive_avg_pool2d": "adaptive_avg_pool"}


def pooling_kind(op: OpRecord, backward: bool = False) -> str:
    name = op.name.removesuffix("_backward")
    x = op.args.get("self") if isinstance(op.args.get("self"), TensorMeta) else op.args.get("input")
    kind = POOLING_KINDS.get(name, "pooling") + ("_backward" if backward else "")
    return channels_last_kind(kind, x) if isinstance(x, TensorMeta) else kind


@register("aten.max_pool2d_with_indices", "aten.avg_pool2d", "aten._adaptive_avg_pool2d")
def pooling(op: OpRecord, ctx: CostContext) -> Cost:
    return with_layout_copies(op, with_window_key(op, memory_op(op, kind=pooling_kind(op))))


@register("aten.avg_pool2d_backward", "aten._adaptive_avg_pool2d_backward")
def pooling_backward(op: OpRecord, ctx: CostContext) -> Cost:
    return with_layout_copies(op, with_window_key(op, memory_op(op, kind=pooling_kind(op, backward=True))))


@register("aten.max_pool2d_with_indices_backward")
def max_pool2d_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """Zero-fills the input gradient, then writes the pooled gradients into it: two work items (measured on
    the CNN example's channels_last step, validation/capture_validation.json). The generic byte count reads
    the forward input, which neither kernel reads; it has the size of the zero-fill's write, so the total
    stands."""
    base = memory_op(op, kind=pooling_kind(op, backward=True))
    return with_layout_copies(op, with_window_key(op, dataclasses.replace(base, kernels=MAX_POOL_BACKWARD_KERNELS)))
