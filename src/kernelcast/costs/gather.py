"""Gathers: ops that read selected rows or elements of a source through an index (embedding, index_select,
gather, advanced indexing, take). Their kernels read only what they select, not the whole source: an embedding
of 2048 tokens from a 50k x 1024 table reads 2048 rows (4 MB in bf16), not the table (103 MB).

Ops costed here:
    aten.embedding, aten.index_select, aten.gather, aten.index, aten._unsafe_index, aten.take

Bytes: the output once written and once read from the source (one element read per element written), the
index tensors once. Kind "gather": the calibration measures it apart from streaming copies (random rows).
"""

from __future__ import annotations

import dataclasses
import math

from kernelcast.records import OpRecord, TensorMeta

from .common import memory_key, out_dtype, row_major
from .registry import Cost, CostContext, register

GATHER_KIND = "gather"


def _index_bytes(op: OpRecord) -> int:
    """Bytes of the integer index tensors an op reads (a boolean mask too: it is read once)."""
    total = 0
    for name in ("indices", "index"):
        value = op.args.get(name)
        values = value if isinstance(value, tuple) else (value,)
        total += sum(v.nbytes for v in values if isinstance(v, TensorMeta) and v.on_gpu)
    return total


def gather_cost(op: OpRecord, kernels: int = 1) -> Cost:
    written = sum(t.nbytes for t in op.tensors_out() if t.on_gpu)
    kind, key = memory_key(op, GATHER_KIND)
    return Cost(bytes_read=float(written + _index_bytes(op)), bytes_written=float(written), kernels=kernels,
                dtype=out_dtype(op), kind=kind, key=key)


# Row gathers (vectorized_gather_kernel on the H200) take a fixed time per index as well as their bytes
# (calibrate/unit_rates.py): keyed ("rows", indices, item size) for the calibrated model's time per row.
ROW_GATHERS = ("aten.embedding", "aten.index_select")
ROWS_KEY = "rows"
# The vectorized kernel (a block per index walking its row in 16-byte loads) runs only where each row is a whole
# number of 16-byte vectors (cuda/IndexKernelUtils.h, fast_gather_kernel_eligible<16>: contiguous, aligned
# slices); narrower or ragged rows take TensorIterator's elementwise gather, priced by its indices and elements. The H200 ran
# EmbeddingBag's mean backward gathering 49152 one-float rows in 3.8 µs (_scatter_gather_elementwise_kernel),
# where the per-row time of the wide rows gave 32 µs (validation/probes/sparse_probe.json).
VECTORIZED_GATHER_BYTES = 16
ELEMENTS_KEY = "gathered_elements"  # the elementwise gather: (ELEMENTS_KEY, indices, output elements, item size)


def vectorized_rows(source: TensorMeta | None) -> bool:
    """Whether a gather of `source`'s first-dim rows takes the vectorized kernel: rows contiguous, a whole
    number of 16-byte vectors each."""
    if source is None or len(source.shape) < 2:
        return False
    row_elements = math.prod(source.shape[1:])
    inner_contiguous = source.stride[-1] == 1 and all(
        source.stride[i] == source.stride[i + 1] * source.shape[i + 1] for i in range(1, len(source.shape) - 1))
    return (inner_contiguous and (row_elements * source.itemsize) % VECTORIZED_GATHER_BYTES == 0
            and (source.stride[0] * source.itemsize) % VECTORIZED_GATHER_BYTES == 0)


# index_select of at most SMALL_INDEX_MAX indices (embedding calls it: aten/src/ATen/native/Embedding.cpp) runs
# indexSelectSmallIndex (aten/src/ATen/native/cuda/Indexing.cu, index_select_out_cuda_impl): a grid of
# min(ceil(slice / 128), 8 x SMs) blocks of 128 threads, each thread walking every index in turn over its share of
# the slice, so its time follows indices x the slice elements a thread takes per index, not the bytes or the
# rows. More indices go to gather_out (the row gathers above). The kernel is specialised where the output and
# the source collapse (collapseDims, the select dim kept apart) to the same 1-3 dims and the index is
# contiguous; else it is the generic one (-1 dims), whose offset arithmetic per element is dearer: beam search's
# cache reorders (a strided int32 index of 8) ran it at 7.3 µs on the H200 and an H100, the specialised one's
# embeddings of 8 tokens 4.4 µs.
SMALL_INDEX_MAX = 16
SMALL_INDEX_KEY = "small_index"
# index_add_ of at most SMALL_INDEX_MAX indices runs indexFuncSmallIndex (Indexing.cu, index_add_cuda_impl): the
# same grid, walk and specialised / generic split, an atomic add per element where indexSelectSmallIndex stores
# one; its own lines (calibrate/unit_rates.py small_index_add).
SMALL_INDEX_ADD_KEY = "small_index_add"
INDEX_ADD_PACKETS = ("aten.index_add_", "aten.index_add")
SMALL_INDEX_THREADS = 128  # getDefaultMaxThreadsPerBlock()
SMALL_INDEX_BLOCKS_PER_SM = 8
SPECIALISED, GENERIC = "specialised", "generic"


def collapsed_dims(t: TensorMeta, dim: int) -> int:
    """How many dims ATen's collapse_dims leaves of t with `dim` kept apart (ATen/CollapseDims.h): size-1 dims
    dropped, neighbours merged where the outer stride is the inner's size x stride."""
    runs, previous = 0, None  # previous: (size, stride) of the run being merged, None at a boundary
    for d, (size, stride) in enumerate(zip(t.shape, t.stride)):
        if d == dim:
            runs, previous = runs + 1, None
            continue
        if size == 1:
            continue
        if previous is not None and previous[1] == size * stride:
            previous = (previous[0] * size, stride)
            continue
        runs, previous = runs + 1, (size, stride)
    return max(runs, 1)


def small_index_path(source: TensorMeta, out: TensorMeta, index: TensorMeta, dim: int) -> str:
    """SPECIALISED or GENERIC: which indexSelectSmallIndex (or indexFuncSmallIndex) an op runs (see
    SMALL_INDEX_MAX): `source` and `out` are the two tensors indexed along dim, in either order."""
    if len(source.shape) == 0:
        return SPECIALISED
    dims = collapsed_dims(source, dim), collapsed_dims(out, dim)
    return SPECIALISED if dims[0] == dims[1] <= 3 and row_major(index) else GENERIC


def small_index_iterations(slice_elements: int, sm_count: int) -> int:
    """Slice elements a thread of indexSelectSmallIndex walks per index on a GPU of sm_count SMs."""
    blocks = min(-(-slice_elements // SMALL_INDEX_THREADS), SMALL_INDEX_BLOCKS_PER_SM * sm_count)
    return -(-slice_elements // max(blocks * min(slice_elements, SMALL_INDEX_THREADS), 1))


def _small_index_operands(op: OpRecord) -> tuple | None:
    """(the tensor of whole slices, the one indexed along dim, index, dim) of an op that may run one of the
    small-index kernels: index_select and embedding (output, source), index_add (source, self); else None."""
    outs = op.tensors_out()
    if op.packet == "aten.embedding":
        return (outs[0] if outs else None), op.args.get("weight"), op.args.get("indices"), 0
    if op.packet == "aten.index_select":
        return (outs[0] if outs else None), op.args.get("self"), op.args.get("index"), op.args.get("dim", 0)
    if op.packet in INDEX_ADD_PACKETS:
        return op.args.get("source"), op.args.get("self"), op.args.get("index"), op.args.get("dim", 0)
    return None


def small_index_units(op: OpRecord, sm_count: int) -> tuple[str, int, int] | None:
    """(path, indices, slice elements a thread walks per index) of an index_select, embedding or index_add that
    runs indexSelectSmallIndex / indexFuncSmallIndex (at most SMALL_INDEX_MAX indices, 32-bit index math), else
    None."""
    operands = _small_index_operands(op)
    if operands is None:
        return None
    slices, indexed, index, dim = operands
    if not (isinstance(slices, TensorMeta) and isinstance(indexed, TensorMeta) and isinstance(index, TensorMeta)) \
            or not slices.numel or not index.numel or index.numel > SMALL_INDEX_MAX \
            or max(slices.numel, indexed.numel) >= 2 ** 31:
        return None
    dim = dim % max(len(indexed.shape), 1)
    if op.packet == "aten.embedding":  # index_select(weight, 0, indices.reshape(-1)): the 2-D (n, D) output
        index = dataclasses.replace(index, shape=(index.numel,), stride=(1,))
        slices = dataclasses.replace(slices, shape=(index.numel, indexed.shape[-1]), stride=(indexed.shape[-1], 1))
    slice_elements = slices.numel // index.numel
    return (small_index_path(indexed, slices, index, dim), index.numel,
            small_index_iterations(slice_elements, sm_count))


def _gathered_rows(op: OpRecord) -> int | None:
    """Indices of a row gather: embedding, index_select, or index with one index tensor over the first dim."""
    if op.packet in ROW_GATHERS:
        index = op.args.get("indices") if op.packet == "aten.embedding" else op.args.get("index")
        return index.numel if isinstance(index, TensorMeta) else None
    indices = op.args.get("indices")
    if op.packet == "aten.index" and isinstance(indices, tuple) and len(indices) == 1 and \
            isinstance(indices[0], TensorMeta) and indices[0].dtype != "bool":
        return indices[0].numel
    return None


@register("aten.embedding", "aten.index_select", "aten.gather", "aten.index", "aten._unsafe_index", "aten.take")
def gather(op: OpRecord, ctx: CostContext) -> Cost:
    cost = gather_cost(op)
    small = small_index_units(op, ctx.sm_count)
    if small is not None:
        return dataclasses.replace(cost, key=(SMALL_INDEX_KEY, *small, op.tensors_out()[0].itemsize))
    rows = _gathered_rows(op)
    outs = op.tensors_out()
    if rows is None or not outs:
        return cost
    source = op.args.get("weight") if op.packet == "aten.embedding" else op.args.get("self")
    if not vectorized_rows(source if isinstance(source, TensorMeta) else None):
        return dataclasses.replace(cost, key=(ELEMENTS_KEY, rows, outs[0].numel, outs[0].itemsize))
    return dataclasses.replace(cost, key=(ROWS_KEY, rows, outs[0].itemsize))
