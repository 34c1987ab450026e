"""Embedding and EmbeddingBag forward and backward: the kernels their CUDA host code launches.

Ops costed here (their launch rules win over any simpler formula elsewhere):
    aten.embedding_dense_backward, aten._embedding_bag, aten._embedding_bag_forward_only,
    aten._embedding_bag_backward, aten._embedding_bag_dense_backward,
    aten._embedding_bag_per_sample_weights_backward, aten.embedding_renorm_

Sources (torch 2.11): aten/src/ATen/native/cuda/Embedding.cu (embedding_dense_backward_cuda),
EmbeddingBag.cu (_embedding_bag_cuda, _embedding_bag_dense_backward_cuda, embedding_bag_backward_cuda_sum_avg,
embedding_bag_backward_cuda_max), EmbeddingBackwardKernel.cu (embedding_backward_cuda_kernel) and
aten/src/ATen/native/EmbeddingBag.cpp (promoteIndicesAndOffsets, _embedding_bag_backward).
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import OpRecord, TensorMeta

from .common import memory_op, row_major
from .cub import SCAN_KERNELS, UNIQUE_BY_KEY_KERNELS, radix_sort_pairs_kernels
from .registry import Cost, CostContext, register

# embedding_dense_backward_cuda: up to this many indices (and without scale_grad_by_freq) a zero-fill of the
# gradient and one embedding_backward_feature_kernel; beyond it the sort-based path.
EMBEDDING_DIRECT_MAX_INDICES = 3072
EMBEDDING_DIRECT_KERNELS = 2
# The sort-based paths sort (index, position) pairs over every bit of the index type (the nbits argument is
# commented out in both callers), after an arange of positions.
ARANGE_KERNELS = 1
# scale_grad_by_freq: counts per index by cub inclusive_sum_by_key, then inclusive_scan_by_key (max) in reverse.
FREQUENCY_SCANS = 2
# embedding_backward_cuda_kernel (two-pass path): zero-fill of grad_weight, unique_by_key of the sorted
# indices, krn_partials_per_segment, an exclusive sum, compute_num_of_partial_segments,
# krn_partial_segment_offset, compute_grad_weight(_bags), sum_and_scatter.
SEGMENT_SINGLE_KERNELS = 6  # fill, partials_per_segment, num_of_partial_segments, partial_segment_offset,
#                             compute_grad_weight, sum_and_scatter
EMBEDDING_BAG_MAX_BACKWARD_KERNELS = 2  # zeros + EmbeddingBag_accGradParametersKernel_max
EMBEDDING_BAG_FORWARD_KERNELS = 1  # EmbeddingBag_updateOutputKernel_sum_mean or _max
MODE_MAX = 2  # EmbeddingBagMode: 0 sum, 1 mean, 2 max
EMBEDDING_BAG_KEY = "embedding_bag_rows"  # Cost.key[0]: (EMBEDDING_BAG_KEY, indices, bags, row width, item size)


def segment_backward_kernels() -> int:
    """embedding_backward_cuda_kernel: six kernels of its own, a unique_by_key and an exclusive sum."""
    return SEGMENT_SINGLE_KERNELS + UNIQUE_BY_KEY_KERNELS + SCAN_KERNELS


def sorted_backward_kernels(num_indices: int, index_bytes: int, scale_grad_by_freq: bool) -> int:
    """The sort-based gradient: arange, a full-width radix sort of (index, position) pairs, the frequency scans
    when asked, then embedding_backward_cuda_kernel."""
    sort = radix_sort_pairs_kernels(num_indices, 8 * index_bytes, index_bytes)
    scans = FREQUENCY_SCANS * SCAN_KERNELS if scale_grad_by_freq else 0
    return ARANGE_KERNELS + sort + scans + segment_backward_kernels()


def embedding_dense_backward_kernels(grad: TensorMeta, indices: TensorMeta, scale_grad_by_freq: bool) -> int:
    """embedding_dense_backward_cuda: grad.contiguous() and indices.contiguous() copies, then the direct
    per-feature kernel for few indices or the sort-based path."""
    copies = (not row_major(grad)) + (not row_major(indices))
    if indices.numel <= EMBEDDING_DIRECT_MAX_INDICES and not scale_grad_by_freq:
        return copies + EMBEDDING_DIRECT_KERNELS
    return copies + sorted_backward_kernels(indices.numel, indices.itemsize, scale_grad_by_freq)


def promote_copies(indices: TensorMeta, offsets: TensorMeta | None) -> int:
    """promoteIndicesAndOffsets: the narrower of the two index dtypes is converted (one copy kernel)."""
    return int(offsets is not None and offsets.dtype != indices.dtype)


def embedding_bag_dense_backward_kernels(grad: TensorMeta, indices: TensorMeta, mode: int,
                                         scale_grad_by_freq: bool) -> int:
    """_embedding_bag_dense_backward_cuda: grad.contiguous(), then max mode's zero-fill + atomic kernel, or
    the sum/mean sort-based path (zeros alone for no indices)."""
    copies = int(not row_major(grad))
    if mode == MODE_MAX:
        return copies + EMBEDDING_BAG_MAX_BACKWARD_KERNELS
    if indices.numel == 0:
        return copies + 1
    return copies + sorted_backward_kernels(indices.numel, indices.itemsize, scale_grad_by_freq)


def _tensor(op: OpRecord, name: str) -> TensorMeta | None:
    value = op.args.get(name)
    return value if isinstance(value, TensorMeta) and value.on_gpu else None


def _with_kernels(op: OpRecord, kernels: int) -> Cost:
    return dataclasses.replace(memory_op(op, 0.0, kind="embedding_backward"), kernels=kernels)


@register("aten.embedding_dense_backward")
def embedding_dense_backward(op: OpRecord, ctx: CostContext) -> Cost:
    grad, indices = _tensor(op, "grad_output"), _tensor(op, "indices")
    if grad is None or indices is None:
        return memory_op(op, 0.0, kind="embedding_backward")
    scale = bool(op.args.get("scale_grad_by_freq"))
    return _with_kernels(op, embedding_dense_backward_kernels(grad, indices, scale))


@register("aten._embedding_bag", "aten._embedding_bag_forward_only")
def embedding_bag(op: OpRecord, ctx: CostContext) -> Cost:
    """_embedding_bag_cuda: one gather-and-reduce kernel per call, after promoting the index dtypes. It reads one
    weight row per index (not the table), the indices and offsets, and writes one row per bag."""
    base = memory_op(op)
    indices, weight = _tensor(op, "indices"), _tensor(op, "weight")
    if indices is None:
        return base
    if weight is not None and len(weight.shape) == 2:
        rows = indices.numel * weight.shape[1] * weight.itemsize
        offsets = _tensor(op, "offsets")
        read = rows + indices.nbytes + (offsets.nbytes if offsets is not None else 0)
        out = op.tensors_out()[0] if op.tensors_out() else None
        bags = out.shape[0] if out is not None and out.shape else 1
        # its own kind, keyed for the profile's fitted bag kernel (predict/sparse_time.py); "gather" stands in
        base = dataclasses.replace(base, bytes_read=float(read), bytes_written=float(out.nbytes if out else 0),
                                   kind="embedding_bag",
                                   key=(EMBEDDING_BAG_KEY, indices.numel, bags, weight.shape[1], weight.itemsize))
    return dataclasses.replace(base, kernels=promote_copies(indices, _tensor(op, "offsets"))
                               + EMBEDDING_BAG_FORWARD_KERNELS)


@register("aten._embedding_bag_backward", "aten._embedding_bag_dense_backward")
def embedding_bag_backward(op: OpRecord, ctx: CostContext) -> Cost | None:
    """_embedding_bag_backward promotes the index dtypes and calls the dense (or sparse) backward. The sparse
    gradient (sparse=True) builds a COO tensor through several ops that this rule does not follow: uncosted."""
    grad, indices = _tensor(op, "grad"), _tensor(op, "indices")
    if op.args.get("sparse"):
        return None
    if grad is None or indices is None:
        return memory_op(op, 0.0, kind="embedding_backward")
    mode = int(op.args.get("mode", 0))
    kernels = promote_copies(indices, _tensor(op, "offsets")) + embedding_bag_dense_backward_kernels(
        grad, indices, mode, bool(op.args.get("scale_grad_by_freq")))
    return _with_kernels(op, kernels)


@register("aten._embedding_bag_per_sample_weights_backward")
def embedding_bag_per_sample_weights_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """_embedding_bag_per_sample_weights_backward_cuda: one warp-per-sample kernel after promoting dtypes."""
    base = memory_op(op)
    indices, weight, grad = _tensor(op, "indices"), _tensor(op, "weight"), _tensor(op, "grad")
    if indices is None:
        return base
    if weight is not None and grad is not None and len(weight.shape) == 2:
        # a dot of each index's weight row with its bag's gradient row: the rows it touches, not the table
        # (the whole 145 MB table had been charged for 3.6 MB gathered: a fresh user's recommender)
        read = indices.numel * weight.shape[1] * weight.itemsize + grad.nbytes + indices.nbytes
        base = dataclasses.replace(base, bytes_read=float(read), kind="gather")
    return dataclasses.replace(base, kernels=promote_copies(indices, _tensor(op, "offsets")) + 1)


# nn.Embedding(max_norm=...) renormalises the rows it looks up first (Embedding.cu, embedding_renorm_cuda_): the
# indices sorted (`indices.sort()`), cub::unique over them (DeviceSelect: an init kernel and the select), the count
# of unique rows read to the host to size the grid (a sync point: capture/recorder.py HOST_READS), then one
# renorm kernel. ASSUMED from the source, not measured: the sort as one kernel (its in-place bitonic sort of up
# to 4096 indices; more take a segmented radix sort of a few kernels).
EMBEDDING_RENORM_ITEMS = 1 + 2 + 1 + 1  # sort, unique (init + select), the copy to the host, renorm


@register("aten.embedding_renorm_")
def embedding_renorm(op: OpRecord, ctx: CostContext) -> Cost:
    """The rows the indices name, read and written (at most the table), and the indices read."""
    table, indices = op.args.get("self"), op.args.get("indices")
    base = dataclasses.replace(memory_op(op, 1.0, kind="embedding"), kernels=EMBEDDING_RENORM_ITEMS)
    if not isinstance(table, TensorMeta) or not isinstance(indices, TensorMeta) or len(table.shape) != 2:
        return base
    rows = min(indices.numel, table.shape[0]) * table.shape[1] * table.itemsize
    return dataclasses.replace(base, bytes_read=float(rows + indices.nbytes), bytes_written=float(rows))
