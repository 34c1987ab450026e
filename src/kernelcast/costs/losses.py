"""Regression and binary losses with their reductions, and pointwise activations torch does not tag so.

Ops costed here (their launch rules win over any simpler formula elsewhere):
    aten.mse_loss, aten.huber_loss, aten.smooth_l1_loss, aten.binary_cross_entropy,
    aten.mse_loss_backward, aten.huber_loss_backward, aten.smooth_l1_loss_backward,
    aten.binary_cross_entropy_backward,
    aten.hardswish, aten.hardswish_, aten.hardswish_backward, aten.hardsigmoid_backward,
    aten.soft_margin_loss, aten.soft_margin_loss_backward,
    aten.nll_loss_forward, aten.nll_loss_backward (with a reduction: one thread block's walk over the frames),
    aten.multilabel_margin_loss_forward, aten.multilabel_margin_loss_backward, aten.multi_margin_loss,
    aten.multi_margin_loss_backward

Sources (torch 2.11): aten/src/ATen/native/Loss.cpp (mse_loss, huber_loss, smooth_l1_loss_out,
apply_loss_reduction, mse_loss_backward, huber_loss_backward, smooth_l1_loss_backward) and
aten/src/ATen/native/cuda/Loss.cu (binary_cross_entropy_out_cuda, binary_cross_entropy_backward_out_cuda).

soft_margin_loss (Loss.cpp): neg_out, mul_, exp_, log1p_ (four kernels), then the reduction and a copy into the
resized output; its backward: neg, mul, exp, mul_out, mul_, add_, div_, mul_ (eight kernels).
"""

from __future__ import annotations

import dataclasses
import math

from kernelcast.records import OpRecord, TensorMeta

from .common import bytes_written, memory_formula, memory_key, memory_op
from .reduce_config import is_global_reduce
from .registry import Cost, CostContext, register

LOSS_FLOPS_PER_ELEMENT = 1.0
POINTWISE_FLOPS_PER_ELEMENT = 1.0
REDUCTION_NONE = 0  # at::Reduction::None; Mean = 1, Sum = 2
REDUCTION_MEAN = 1
# The backward of mse/huber/smooth-L1: `at::zeros_like(input)`, then the gradient kernel writes into it.
LOSS_BACKWARD_KERNELS = 2
SOFT_MARGIN_FORWARD_KERNELS = 4  # neg_out, mul_, exp_, log1p_
SOFT_MARGIN_REDUCED_COPY_KERNELS = 1  # output.copy_(reduced)
SOFT_MARGIN_BACKWARD_KERNELS = 8  # neg, mul, exp, mul_out, mul_, add_, div_, mul_


def full_reduce_kernels(numel: int, ctx: CostContext) -> int:
    """`.mean()` / `.sum()` over every element: one reduce kernel, plus a semaphore memset when the reduction
    splits its one output across blocks (reduce_config; the H200 ran one for 131072 and 1M fp32 elements, none
    for 4096)."""
    if numel <= 1:
        return 1
    return 1 + is_global_reduce(1, numel, True, ctx.sm_count, ctx.max_threads_per_sm)


def loss_forward_kernels(numel: int, reduction: int, ctx: CostContext) -> int:
    """Elementwise loss kernel, then apply_loss_reduction's mean or sum (none for reduction='none')."""
    return 1 + (full_reduce_kernels(numel, ctx) if reduction != REDUCTION_NONE else 0)


def bce_forward_kernels(numel: int, reduction: int, weighted: bool, ctx: CostContext) -> int:
    """binary_cross_entropy_out_cuda: the loss kernel, loss.mul_(weight), and for a reduction the reduce plus
    `loss.resize_as_(reduced).copy_(reduced)`."""
    reduced = full_reduce_kernels(numel, ctx) + 1 if reduction != REDUCTION_NONE else 0
    return 1 + weighted + reduced


def bce_backward_kernels(reduction: int, weighted: bool) -> int:
    """binary_cross_entropy_backward_out_cuda: the gradient kernel, grad_input.mul_(weight), and for 'mean'
    grad_input.div_(numel)."""
    return 1 + weighted + (reduction == REDUCTION_MEAN)


def _input(op: OpRecord) -> TensorMeta | None:
    value = op.args.get("self", op.args.get("input"))
    return value if isinstance(value, TensorMeta) and value.on_gpu else None


def _reduction(op: OpRecord) -> int:
    return int(op.args.get("reduction", REDUCTION_MEAN))


def _loss(op: OpRecord, kernels: int) -> Cost:
    return dataclasses.replace(memory_op(op, LOSS_FLOPS_PER_ELEMENT, kind="loss"), kernels=kernels)


@register("aten.mse_loss", "aten.huber_loss", "aten.smooth_l1_loss")
def regression_loss(op: OpRecord, ctx: CostContext) -> Cost:
    x = _input(op)
    return _loss(op, loss_forward_kernels(x.numel if x else 0, _reduction(op), ctx))


@register("aten.mse_loss_backward", "aten.huber_loss_backward", "aten.smooth_l1_loss_backward")
def regression_loss_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """The functional backward zero-fills grad_input and runs the kernel into it (2); the out= variant it calls
    when recorded as the ops CUDA runs (capture/decompose.py) is the kernel alone (1)."""
    return _loss(op, 1 if op.op.endswith(".out") or op.op.endswith(".grad_input") else LOSS_BACKWARD_KERNELS)


@register("aten.binary_cross_entropy")
def binary_cross_entropy(op: OpRecord, ctx: CostContext) -> Cost:
    x = _input(op)
    weighted = isinstance(op.args.get("weight"), TensorMeta)
    return _loss(op, bce_forward_kernels(x.numel if x else 0, _reduction(op), weighted, ctx))


@register("aten.binary_cross_entropy_backward")
def binary_cross_entropy_backward(op: OpRecord, ctx: CostContext) -> Cost:
    weighted = isinstance(op.args.get("weight"), TensorMeta)
    return _loss(op, bce_backward_kernels(_reduction(op), weighted))


@register("aten.hardswish", "aten.hardswish_", "aten.hardswish_backward", "aten.hardsigmoid_backward")
def untagged_pointwise(op: OpRecord, ctx: CostContext) -> Cost:
    """One TensorIterator kernel each (cuda/ActivationHardswishKernel.cu, ActivationHardsigmoidKernel.cu); torch
    does not tag these ops pointwise, so the tag formula does not reach them."""
    return memory_op(op, POINTWISE_FLOPS_PER_ELEMENT, kind="pointwise")


@register("aten.soft_margin_loss")
def soft_margin_loss(op: OpRecord, ctx: CostContext) -> Cost:
    x = _input(op)
    kernels = SOFT_MARGIN_FORWARD_KERNELS
    if _reduction(op) != REDUCTION_NONE and x is not None:
        kernels += full_reduce_kernels(x.numel, ctx) + SOFT_MARGIN_REDUCED_COPY_KERNELS
    return _chain(op, kernels)


@register("aten.soft_margin_loss_backward")
def soft_margin_loss_backward(op: OpRecord, ctx: CostContext) -> Cost:
    return _chain(op, SOFT_MARGIN_BACKWARD_KERNELS)


def _chain(op: OpRecord, kernels: int) -> Cost:
    """A run of pointwise kernels over the input's size: each reads and writes it once."""
    x = _input(op)
    n_bytes = (x.numel * x.itemsize) if x is not None else bytes_written(op)
    kind, key = memory_key(op, "loss")
    return Cost(flops=LOSS_FLOPS_PER_ELEMENT * kernels * (x.numel if x is not None else 0),
                bytes_read=kernels * n_bytes, bytes_written=kernels * n_bytes, kernels=kernels,
                dtype=x.dtype if x is not None else "float32", kind=kind, key=key)


# nll_loss backward zero-fills the gradient, then scatters into it.
NLL_LOSS_BACKWARD_KERNELS = 2
NLL_LOSS_FORWARD_KERNELS = 1
register("aten.nll_loss2d_forward")(memory_formula(LOSS_FLOPS_PER_ELEMENT, "loss", NLL_LOSS_FORWARD_KERNELS))
register("aten.nll_loss2d_backward")(memory_formula(LOSS_FLOPS_PER_ELEMENT, "loss", NLL_LOSS_BACKWARD_KERNELS))

# nll_loss over (frames, classes) with a reduction (the loss cross_entropy ends with) runs ONE thread block
# (aten/src/ATen/native/cuda/Loss.cu: nll_loss_forward_reduce_cuda_kernel_2d, nll_loss_backward_reduce_cuda_kernel_2d)
# of nll_loss_threads(frames) threads, each walking frames / threads frames: a target, then the one
# log-probability it picks (or the gradient element it writes), a dependent read per frame. Its time follows
# that walk, not the input's bytes: on an H100 17-19 µs for 16 frames a thread whatever the classes (512 to 8192
# frames, 10 to 128256 classes), 33-37 µs for 32, 118 µs for 128 (validation/h100_nll_loss_grid_raw.json.gz).
# Without a reduction (a kernel over the frames) and for nll_loss2d, the bytes as before.
NLL_WALK_KEY = "nll_walk"
NLL_THREADS_MIN, NLL_THREADS_MAX = 32, 1024
NLL_FRAMES_PER_THREAD = 16  # nll_loss_threads: clamp(2^round(log2(frames / 16)), 32, 1024), integer division
TARGET_BYTES = 8  # int64 class indices


def nll_loss_threads(frames: int) -> int:
    """The threads of nll_loss's one block for `frames` frames (Loss.cu nll_loss_threads; under 16 frames the
    log2 of 0 leaves the clamp's floor)."""
    whole = frames // NLL_FRAMES_PER_THREAD
    if whole < 1:
        return NLL_THREADS_MIN
    return min(max(1 << round(math.log2(whole)), NLL_THREADS_MIN), NLL_THREADS_MAX)


def nll_walk(op: OpRecord) -> tuple[int, int] | None:
    """(frames, frames each thread walks) of an nll_loss forward or backward that runs the one-block kernel: a
    reduction, and a 1-D or 2-D input; None for another."""
    x = op.args.get("self")
    if not isinstance(x, TensorMeta) or _reduction(op) == REDUCTION_NONE or len(x.shape) not in (1, 2):
        return None
    frames = x.shape[0] if len(x.shape) == 2 else 1
    return frames, -(-frames // nll_loss_threads(frames))


@register("aten.nll_loss_forward")
def nll_loss_forward(op: OpRecord, ctx: CostContext) -> Cost:
    walk = nll_walk(op)
    if walk is None:
        return memory_op(op, LOSS_FLOPS_PER_ELEMENT, NLL_LOSS_FORWARD_KERNELS, "loss")
    frames, iterations = walk
    x = op.args["self"]
    return Cost(flops=float(frames), bytes_read=float(frames * (TARGET_BYTES + x.itemsize)),
                bytes_written=float(2 * x.itemsize), kernels=1, dtype=x.dtype, kind="loss",
                key=(NLL_WALK_KEY, "forward", iterations, x.itemsize))


@register("aten.nll_loss_backward")
def nll_loss_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """The gradient zero-filled (a fill kernel over the input's size), then the one-block walk writing a value per
    frame."""
    walk = nll_walk(op)
    if walk is None:
        return memory_op(op, LOSS_FLOPS_PER_ELEMENT, NLL_LOSS_BACKWARD_KERNELS, "loss")
    frames, iterations = walk
    x = op.args["self"]
    fill = Cost(bytes_written=float(x.numel * x.itemsize), kernels=1, dtype=x.dtype, kind="fill",
                key=(x.shape[-1] if x.shape else 1, x.itemsize))
    return Cost(flops=float(frames), bytes_read=float(frames * TARGET_BYTES),
                bytes_written=float(frames * x.itemsize), kernels=1, dtype=x.dtype, kind="loss",
                key=(NLL_WALK_KEY, "backward", iterations, x.itemsize)).with_parts(fill)
register("aten.binary_cross_entropy_with_logits")(memory_formula(LOSS_FLOPS_PER_ELEMENT, "loss"))


# CTC loss on CUDA (aten/src/ATen/native/cuda/LossCTC.cu), measured on the H200 (torch 2.11, zoo wav2vec2_train):
# forward = the log_alpha kernel and three pageable host-to-device copies (input lengths, target lengths, target
# offsets); backward = two fills (the gradient, log_beta), the log_beta, collect and zero-padding kernels, and
# the same three copies. With lengths in GPU tensors ctc_loss first copies them to the host: four device-to-
# host copies (each length tensor twice: the cuDNN check and the kernel's own).
CTC_LOSS_FORWARD_ITEMS = 4
CTC_LOSS_BACKWARD_ITEMS = 8
CTC_LENGTHS_READBACK_COPIES = 4


@register("aten._ctc_loss")
def ctc_loss(op: OpRecord, ctx: CostContext) -> Cost:
    lengths = [op.args.get("input_lengths"), op.args.get("target_lengths")]
    read_back = any(isinstance(t, TensorMeta) and t.on_gpu for t in lengths)
    items = CTC_LOSS_FORWARD_ITEMS + (CTC_LENGTHS_READBACK_COPIES if read_back else 0)
    return memory_op(op, LOSS_FLOPS_PER_ELEMENT, items, "loss")


register("aten._ctc_loss_backward")(memory_formula(LOSS_FLOPS_PER_ELEMENT, "loss", CTC_LOSS_BACKWARD_ITEMS))


# multilabel_margin_loss and multi_margin_loss (aten/src/ATen/native/cuda/MultiLabelMarginCriterion.cu,
# MultiMarginLoss.cu): one block per sample writes its loss, into a temporary of per-sample losses that a sum
# reduces when the 2-D input is reduced; each backward is one kernel per sample (the gradient scaled by
# grad_output in the same kernel).
@register("aten.multilabel_margin_loss_forward", "aten.multi_margin_loss")
def margin_loss(op: OpRecord, ctx: CostContext) -> Cost:
    x = op.args.get("self")
    reduced = op.args.get("reduction", 1) != 0 and isinstance(x, TensorMeta) and len(x.shape) == 2
    return memory_op(op, LOSS_FLOPS_PER_ELEMENT, 1 + reduced, kind="pointwise")


register("aten.multilabel_margin_loss_backward", "aten.multi_margin_loss_backward")(
    memory_formula(LOSS_FLOPS_PER_ELEMENT, "pointwise"))
