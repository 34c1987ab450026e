"""Memory-bound ops: pointwise, reductions, normalisations, softmax, losses, copies, indexing, factories.

FLOPs per element are nominal (one per basic arithmetic step): these ops are bound by bytes, so the count
changes only the reported intensity, never the roof. Named constants keep them visible.
"""

from __future__ import annotations

from kernelcast.records import OpRecord

from .common import arg, bytes_written, memory_op, out_dtype, write_only
from .registry import Cost, register, register_tag, register_zero_cost

POINTWISE_FLOPS_PER_ELEMENT = 1.0  # add, mul, relu...: one operation per output element
REDUCTION_FLOPS_PER_ELEMENT = 1.0  # one add/compare per input element
SOFTMAX_FLOPS_PER_ELEMENT = 5.0  # max, subtract, exp, sum, divide
SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT = 4.0  # dot(grad, out), subtract, multiply (x2 passes)
NORM_FLOPS_PER_ELEMENT = 8.0  # mean, centre, square, sum, rstd, scale, weight, bias
NORM_BACKWARD_FLOPS_PER_ELEMENT = 12.0
LOSS_FLOPS_PER_ELEMENT = 1.0

# GPU work items: LayerNorm/GroupNorm backward run one kernel for the input gradient and one for the
# weight/bias gradients; nll_loss backward zero-fills the gradient, then scatters into it.
NORM_BACKWARD_KERNELS = 2
NLL_LOSS_BACKWARD_KERNELS = 2
NLL_LOSS_FORWARD_KERNELS = 1


def pointwise(op: OpRecord) -> Cost:
    return memory_op(op, POINTWISE_FLOPS_PER_ELEMENT)


def reduction(op: OpRecord) -> Cost:
    return memory_op(op, REDUCTION_FLOPS_PER_ELEMENT)


# No kernel, no device traffic: views torch does not mark as such in the schema, allocation, metadata.
register_zero_cost(
    "aten._unsafe_view", "aten._reshape_alias", "aten.lift_fresh", "aten.empty", "aten.empty_like",
    "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided", "aten.resize_", "aten.set_",
    "aten._to_copy_noop", "aten.record_stream", "aten._assert_async", "aten._assert_scalar",
    "aten._functional_assert_async", "aten.sym_constrain_range_for_size", "aten._nested_tensor_from_mask",
)

register_tag("pointwise", pointwise)
register_tag("reduction", reduction)

# Pointwise in effect but not tagged so by torch.
register("aten.native_dropout", "aten.tril", "aten.triu", "aten.where", "aten.masked_fill",
         "aten.clamp_min", "aten.clamp_max")(pointwise)

register("aten._softmax", "aten._log_softmax", "aten._safe_softmax")(
    lambda op: memory_op(op, SOFTMAX_FLOPS_PER_ELEMENT))
register("aten._softmax_backward_data", "aten._log_softmax_backward_data")(
    lambda op: memory_op(op, SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT))

register("aten.native_layer_norm", "aten.native_group_norm", "aten._fused_rms_norm",
         "aten.native_batch_norm", "aten._native_batch_norm_legit", "aten._native_batch_norm_legit_functional",
         "aten._native_batch_norm_legit_no_training", "aten.cudnn_batch_norm", "aten._batch_norm_with_update",
         "aten._batch_norm_no_update")(lambda op: memory_op(op, NORM_FLOPS_PER_ELEMENT))
register("aten.native_layer_norm_backward", "aten.native_group_norm_backward", "aten._fused_rms_norm_backward")(
    lambda op: memory_op(op, NORM_BACKWARD_FLOPS_PER_ELEMENT, kernels=NORM_BACKWARD_KERNELS))
register("aten.native_batch_norm_backward", "aten.cudnn_batch_norm_backward", "aten.batch_norm_backward")(
    lambda op: memory_op(op, NORM_BACKWARD_FLOPS_PER_ELEMENT))

register("aten.nll_loss_forward", "aten.nll_loss2d_forward")(
    lambda op: memory_op(op, LOSS_FLOPS_PER_ELEMENT, kernels=NLL_LOSS_FORWARD_KERNELS))
register("aten.nll_loss_backward", "aten.nll_loss2d_backward")(
    lambda op: memory_op(op, LOSS_FLOPS_PER_ELEMENT, kernels=NLL_LOSS_BACKWARD_KERNELS))
register("aten.mse_loss", "aten.mse_loss_backward", "aten.binary_cross_entropy",
         "aten.binary_cross_entropy_backward", "aten.binary_cross_entropy_with_logits",
         "aten.smooth_l1_loss", "aten.smooth_l1_loss_backward")(
    lambda op: memory_op(op, LOSS_FLOPS_PER_ELEMENT))

# Data movement: no math.
register("aten._to_copy", "aten.clone", "aten.cat", "aten.index_select", "aten.gather", "aten.scatter",
         "aten.scatter_add", "aten.scatter_reduce", "aten.index", "aten._unsafe_index", "aten.index_add",
         "aten.index_copy", "aten.constant_pad_nd", "aten.flip", "aten.roll", "aten.repeat",
         "aten.embedding", "aten.masked_scatter", "aten.slice_scatter", "aten.select_scatter",
         "aten.diagonal_scatter", "aten.as_strided_scatter", "aten.cumsum", "aten.cumprod", "aten.sort",
         "aten.topk", "aten.upsample_nearest2d", "aten.upsample_bilinear2d", "aten.upsample_nearest2d_backward",
         "aten.upsample_bilinear2d_backward", "aten.max_pool2d_with_indices",
         "aten.max_pool2d_with_indices_backward", "aten.avg_pool2d", "aten.avg_pool2d_backward",
         "aten._adaptive_avg_pool2d", "aten._adaptive_avg_pool2d_backward", "aten.masked_select", "aten.nonzero",
         "aten.im2col", "aten.col2im", "aten.native_dropout_backward", "aten.unfold_backward",
         "aten.select_backward", "aten.slice_backward", "aten.index_put", "aten.index_put_",
         "aten._index_put_impl_", "aten.split_with_sizes_copy", "aten.expand_copy",
         "aten.embedding_dense_backward")(memory_op)


@register("aten.copy_")
def copy_(op: OpRecord) -> Cost:
    """Reads the source only; writes the destination."""
    src = arg(op, "src")
    nbytes = src.touched_bytes if src.on_gpu else 0
    return Cost(bytes_read=nbytes, bytes_written=bytes_written(op), dtype=out_dtype(op))


register("aten.fill_", "aten.zero_", "aten.zeros", "aten.ones", "aten.full", "aten.zeros_like", "aten.ones_like",
         "aten.full_like", "aten.scalar_tensor", "aten.arange", "aten.normal_", "aten.uniform_", "aten.bernoulli_",
         "aten.randn", "aten.rand", "aten.randint", "aten.randperm", "aten.randn_like", "aten.rand_like",
         "aten.exponential_", "aten.random_", "aten.lift_fresh_copy", "aten.new_zeros", "aten.new_ones",
         "aten.new_full", "aten.linspace", "aten.eye")(write_only)


@register("aten._local_scalar_dense")
def local_scalar_dense(op: OpRecord) -> Cost:
    """A device-to-host copy of one element: one memcpy, a sync."""
    t = arg(op, "self")
    return Cost(bytes_read=t.itemsize if t.on_gpu else 0, kernels=1 if t.on_gpu else 0)


@register("aten.bernoulli")
def bernoulli(op: OpRecord) -> Cost:
    return memory_op(op, POINTWISE_FLOPS_PER_ELEMENT)
