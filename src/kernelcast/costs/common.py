"""Shared pieces of the formulas: device-memory bytes of an op's tensors, and the generic memory-bound op.

Byte accounting (see DESIGN in the README): every device input is read once, every device output written
once; a broadcast (stride-0) input counts its distinct elements only; CPU tensors (scalars passed to a
kernel) move no device memory; views move nothing.
"""

from __future__ import annotations

from typing import Callable

from kernelcast.records import OpRecord, TensorMeta

from .registry import Cost


def gpu_tensors(tensors: list[TensorMeta]) -> list[TensorMeta]:
    return [t for t in tensors if t.on_gpu]


# Kernels whose time follows a thread block's serial walk and the blocks in flight, not the bytes (NCHW batch norm
# in training, weight normalization, small sorts, top-k's single-block select): keyed
# (BLOCKS_KEY, blocks, N, elements per block along N, item size) for the calibrated model's block fits
# (calibrate/norm_blocks.py, predict/calibrated.py).
BLOCKS_KEY = "blocks"


def blocks_key(blocks: int, n: int, per_block: int, itemsize: int) -> tuple:
    return (BLOCKS_KEY, blocks, n, per_block, itemsize)


def is_blocks_key(key: tuple) -> bool:
    return key[:1] == (BLOCKS_KEY,)


def distinct(tensors: list[TensorMeta]) -> list[TensorMeta]:
    """The tensors less repeats of the same view of the same storage. An elementwise kernel handed one tensor
    twice (`x * x`, Adam's `exp_avg_sq.addcmul_(grad, grad)`) loads each element twice in the same thread at the
    same moment, the second load from cache: its memory is read once from DRAM (zoo: _foreach_addcmul_ summed
    +21.6% -> -3.2%). Not so for ops whose blocks read their inputs one after another (cat((x, x)) reads x twice)."""
    seen: set[TensorMeta] = set()
    out = []
    for t in tensors:
        if t.storage and t in seen:
            continue
        seen.add(t)
        out.append(t)
    return out


def bytes_read(op: OpRecord, elementwise: bool = False) -> float:
    """Bytes the op's kernels read: each input's touched bytes; for an elementwise kernel, each distinct input's
    (distinct)."""
    tensors = gpu_tensors(op.tensors_in())
    return float(sum(t.touched_bytes for t in (distinct(tensors) if elementwise else tensors)))


def bytes_written(op: OpRecord) -> float:
    return float(sum(t.nbytes for t in gpu_tensors(op.tensors_out())))


def out_dtype(op: OpRecord) -> str:
    outs = op.tensors_out() or op.tensors_in()
    return outs[0].dtype if outs else "float32"


def largest_numel(op: OpRecord) -> int:
    return max((t.numel for t in op.tensors_out() + op.tensors_in()), default=0)


TRANSPOSABLE_KINDS = ("copy", "pointwise")  # kinds with a slower kernel when they transpose or cast


def channels_last(t: TensorMeta) -> bool:
    """A 4-D tensor stored NHWC (channels innermost)."""
    return len(t.shape) == 4 and t.shape[1] > 1 and t.stride[1] == 1


def main_tensor(op: OpRecord) -> TensorMeta | None:
    """The tensor that sets a memory-bound kernel's shape: the largest GPU input, else the largest output."""
    ins = gpu_tensors(op.tensors_in())
    pool = ins or gpu_tensors(op.tensors_out())
    return max(pool, key=lambda t: t.numel) if pool else None


def _stride_order(t: TensorMeta) -> tuple[int, ...]:
    """Dims of size > 1 from the most to the least contiguous: the memory layout, whatever the shape order."""
    return tuple(i for _, i in sorted((s, i) for i, (n, s) in enumerate(zip(t.shape, t.stride)) if n > 1))


def transposes(op: OpRecord) -> bool:
    """Whether the op writes its output in a different memory order than it reads its input (a transpose,
    e.g. .contiguous() of a permuted view); same-layout ops (channels_last in and out) stream through memory."""
    t, outs = main_tensor(op), gpu_tensors(op.tensors_out())
    if t is None or not outs or len(outs[0].shape) != len(t.shape):
        return False
    return _stride_order(t) != _stride_order(outs[0])


def layout_copy_kind(op: OpRecord) -> str:
    """The kind of a copy whose output is laid out unlike its input. Compared over the input's dims that hold
    data (broadcast, stride-0 dims left out: an expand made contiguous, as GQA's repeat_kv, reads in order):
    "copy_transpose" where the output's innermost dim is not the input's (a true transpose, the last two dims
    swapped, NCHW <-> NHWC: reads stride through memory), else "copy_permute": a strided copy whose reads keep
    their memory order (only outer dims move, attention's heads, (B, S, H, D) <-> (B, H, S, D); or only broadcast
    dims differ), both sides coalesced but not vectorized (zoo llama_decode_static_cache's repeat_kv, 33.5 MB
    written from 8.4 MB: 38 us, 1.1 TB/s, against 4 TB/s for a contiguous copy). On the H200 permuting copies
    streamed at 1.4 TB/s (bf16) where true transposes ran 450-650 GB/s at the same sizes
    (validation/h200_norm_layout_linalg_raw.json.gz, section layout_grid)."""
    t, outs = main_tensor(op), gpu_tensors(op.tensors_out())
    if t is None or not outs or len(outs[0].shape) != len(t.shape):
        return "copy"
    return _strided_copy_kind(t, lambda dims: _order_on(outs[0], dims))


def _strided_copy_kind(t: TensorMeta, out_order: Callable[[list[int]], tuple[int, ...]]) -> str:
    """copy_transpose or copy_permute (layout_copy_kind) for a copy reading t; out_order(dims) gives the output's
    order of those dims, most contiguous first."""
    dims = [i for i, (n, s) in enumerate(zip(t.shape, t.stride)) if n > 1 and s != 0]
    if not dims:  # one value expanded (sum()'s gradient): written as a fill is, zoo grouped_conv_nchw's in 5.5 us
        return "copy"
    ins, out = _order_on(t, dims), out_order(dims)
    return "copy_transpose" if ins[0] != out[0] else "copy_permute"


def _order_on(t: TensorMeta, dims: list[int]) -> tuple[int, ...]:
    """The given dims of t from the most to the least contiguous."""
    return tuple(sorted(dims, key=lambda d: (t.stride[d], -d)))


def reads_across(op: OpRecord) -> bool:
    """Whether an input of a pointwise op has another innermost dim than the output among the dims it spans
    (broadcast dims aside): TensorIterator then walks that input against its memory order and its reads are not
    coalesced, as a transpose's are not. Measured on the H200 (zoo whisper_encoder_forward): Whisper's permuted
    conv output plus its contiguous positional embedding, 4 x 1500 x 384 bf16, took 17-18 µs where a same-order
    add of that size takes about 5. Outer dims in another order (RoPE's (B, S, H, D) against (B, H, S, D), D
    innermost in both) keep the reads coalesced: the zoo's decoders measured those adds at the strided rate."""
    outs = gpu_tensors(op.tensors_out())
    if not outs or len(outs[0].shape) < 2:
        return False
    out = outs[0]
    for t in gpu_tensors(op.tensors_in()):
        if t.numel <= 1 or len(t.shape) > len(out.shape):
            continue
        lead = len(out.shape) - len(t.shape)  # broadcasting aligns the trailing dims
        spanned = [d for d in range(len(t.shape)) if t.shape[d] > 1 and t.stride[d] != 0]
        if len(spanned) >= 2 and _order_on(t, spanned)[0] + lead != _order_on(out, [d + lead for d in spanned])[0]:
            return True
    return False


def casts(op: OpRecord) -> bool:
    """Whether a copy or pointwise op converts dtypes on the way (CUDA then runs a casting, often unvectorised,
    kernel; fp32 -> bf16 copies have a fast path of their own, which the item size of the input tells apart)."""
    floating = {"float64", "float32", "float16", "bfloat16"}  # bool masks and int indices do not make a cast
    dtypes = {t.dtype for t in gpu_tensors(op.tensors_in()) if t.numel > 1 and t.dtype in floating}
    outs = {t.dtype for t in gpu_tensors(op.tensors_out()) if t.dtype in floating}
    return len(dtypes | outs) > 1


def dense(t: TensorMeta) -> bool:
    """Non-overlapping and dense in some memory order (row-major, channels_last, ...): no gaps, no broadcast.
    Size-1 dims may have any stride."""
    expected = 1
    for n, stride in sorted(((n, st) for n, st in zip(t.shape, t.stride) if n != 1), key=lambda d: d[1]):
        if stride != expected:
            return False
        expected *= n
    return True


def row_major(t: TensorMeta) -> bool:
    """Contiguous in the default (row-major) order: dense, innermost dim fastest. Size-1 dims may have any
    stride."""
    return dense(t) and _stride_order(t) == tuple(i for i in reversed(range(len(t.shape))) if t.shape[i] > 1)


def same_layout(a: TensorMeta, b: TensorMeta) -> bool:
    """The same strides on every dim of more than one element (a's shape): one memory order, no gaps between."""
    return all(x == y for n, x, y in zip(a.shape, a.stride, b.stride) if n != 1)


def strided_inputs(op: OpRecord) -> bool:
    """Whether a pointwise op reads a broadcast or gapped tensor, or one laid out unlike its output (a bias, a
    per-row scale, a slice). CUDA's TensorIterator then runs its non-vectorised kernel with per-element
    offset arithmetic instead of 16-byte vector loads (ATen native/cuda/CUDALoops.cuh: the vectorised path
    needs operands that are dense in one common order, as channels_last tensors are). A one-element GPU tensor
    broadcast over a larger output is such an operand: only a CPU scalar takes the unary-functor path
    (gpu_kernel_with_scalars), so `x * scale` with a 0-d nn.Parameter, or torch.where with a Python number
    (which aten turns into a scalar_tensor on the GPU), runs elementwise_kernel<128, 2> (tests/costs/test_hidden_copies.py
    says where it was measured)."""
    outs = gpu_tensors(op.tensors_out())
    if not outs:
        return False
    out = outs[0]
    return any((t.numel > 1 or out.numel > 1) and (t.shape != out.shape or not dense(t) or not same_layout(t, out))
               for t in gpu_tensors(op.tensors_in()))


def memory_key(op: OpRecord, kind: str) -> tuple[str, tuple]:
    """(kind, (innermost dim, item size)) by which a calibrated model looks a memory-bound op up. Transposing
    and casting copies and pointwise ops are different, slower kernels: "<kind>_transpose", "<kind>_cast";
    so are pointwise ops on broadcast or strided inputs: "pointwise_strided"."""
    t = main_tensor(op)
    if t is None or not t.shape:
        return kind, (1, 4)
    if kind == "copy" and transposes(op):
        kind = layout_copy_kind(op)
    elif kind in TRANSPOSABLE_KINDS and (transposes(op) or (kind == "pointwise" and reads_across(op))):
        kind = f"{kind}_transpose"
    elif kind in TRANSPOSABLE_KINDS and casts(op):
        kind = f"{kind}_cast"
    elif kind == "pointwise" and strided_inputs(op):
        kind = "pointwise_strided"
    return kind, (t.shape[-1], t.itemsize)


def channels_last_kind(kind: str, x: TensorMeta) -> str:
    """The kind of a 4-D op's kernels by its input's layout: channels_last runs other kernels than NCHW (cuDNN's
    batch norm, pooling), timed apart."""
    return f"{kind}_channels_last" if len(x.shape) == 4 and channels_last(x) else kind


def width_key(t: TensorMeta) -> tuple[int, int]:
    """(innermost dim, item size): the key a memory-bound kind's curves are read by (memory_key's, for one tensor)."""
    return (t.shape[-1] if t.shape else 1, t.itemsize)


def contiguous_copy(t: TensorMeta) -> Cost:
    """`.contiguous()` of a strided tensor inside another op's CUDA code: one copy kernel reading and writing its
    elements; a transposing copy where its innermost dim is not the last (reads and writes cannot both be
    coalesced; layout_copy_kind), a permuting one where only outer dims are out of order or a dim is broadcast, a
    plain one for a slice. Measured on the H200 (zoo whisper_encoder_forward): layer norm of Whisper's permuted
    conv output, 4 x 1500 x 384 bf16, ran a 16 µs copy before its 11 µs norm kernel. A broadcast tensor (a
    stride-0 dim, as `sum()`'s gradient is) reads each distinct element once and writes them all (zoo
    grouped_conv_nchw: the expanded grad_output of a convolution, 6.4 MB written, 5.5 us)."""
    broadcast = any(s == 0 and n > 1 for n, s in zip(t.shape, t.stride))
    order = _stride_order(t)
    if not order or (order == tuple(sorted(order, reverse=True)) and not broadcast):
        kind = "copy"  # a slice: read in order, one contiguous run per row
    else:
        kind = _strided_copy_kind(t, lambda dims: tuple(sorted(dims, reverse=True)))  # into row-major
    return Cost(bytes_read=t.touched_bytes, bytes_written=t.nbytes, kernels=1, dtype=t.dtype, kind=kind,
                key=width_key(t))


def channels_last_format(t: TensorMeta) -> bool:
    """Whether `t.suggest_memory_format()` is channels_last / channels_last_3d: a dense 4-D or 5-D tensor with
    its channels innermost."""
    return len(t.shape) in (4, 5) and t.shape[1] > 1 and t.stride[1] == 1 and dense(t)


def contiguous_in(t: TensorMeta, channels_last_order: bool) -> bool:
    """Whether `t.contiguous(memory_format)` returns t itself: dense in row-major order, or (channels_last_order)
    in channels-last order, channels innermost, then the spatial dims from the last, then the batch."""
    if not channels_last_order or len(t.shape) not in (4, 5):
        return row_major(t)
    order = (1, *reversed(range(2, len(t.shape))), 0)
    return dense(t) and _stride_order(t) == tuple(d for d in order if t.shape[d] > 1)


def strided(*tensors) -> list[TensorMeta]:
    """The GPU tensors among these (None and other values skipped) that `.contiguous()` / `expect_contiguous()`
    copy: the ones not row-major."""
    return [t for t in tensors if isinstance(t, TensorMeta) and t.on_gpu and not row_major(t)]


def contiguous_copies(*tensors) -> tuple[Cost, ...]:
    """The copies `.contiguous()` / `expect_contiguous()` make of the strided ones among the tensors."""
    return tuple(contiguous_copy(t) for t in strided(*tensors))


def memory_op(op: OpRecord, flops_per_element: float = 0.0, kernels: int = 1, kind: str = "copy") -> Cost:
    """Read every input once, write every output once; math proportional to the largest tensor."""
    kind, key = memory_key(op, kind)
    return Cost(
        flops=flops_per_element * largest_numel(op), bytes_read=bytes_read(op, kind.startswith("pointwise")),
        bytes_written=bytes_written(op), kernels=kernels, dtype=out_dtype(op), kind=kind, key=key,
    )


def memory_formula(flops_per_element: float, kind: str, kernels: int = 1):
    """A cost formula (registry.register) pricing an op as memory_op does with these FLOPs, kernels and kind."""
    def formula(op: OpRecord, ctx) -> Cost:
        return memory_op(op, flops_per_element, kernels, kind)

    return formula


def write_only(op: OpRecord, kernels: int = 1) -> Cost:
    """Fills, factories and in-place RNG: they write their output and read nothing."""
    kind, key = memory_key(op, "fill")
    return Cost(bytes_written=bytes_written(op), kernels=kernels, dtype=out_dtype(op), kind=kind, key=key)


def arg(op: OpRecord, name: str) -> TensorMeta:
    value = op.args[name]
    if not isinstance(value, TensorMeta):
        raise TypeError(f"{op.op}: argument {name} is not a tensor")
    return value


# Host <-> device copies cross PCIe (or NVLink-C2C), not device memory: their own kinds, timed by the host
# link's bandwidth. Pinned host memory is DMA'd directly; pageable memory is staged through a pinned buffer.
# A copy into pageable memory the step already holds (`buf.copy_(x)`: "_into") is its own kind: a fresh
# pageable allocation (`.to("cpu")`) is paged in by the copy itself, a reused buffer's pages are mapped already.
# On the H200 host (calibrate/host.py copy_rates): 64 MiB device-to-host at 1.6 GB/s into a new tensor, 14.7 GB/s
# into a reused one (shared case d2h_nonblocking_pageable: 4.3 ms measured for the latter).
TRANSFER_KINDS = ("h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable", "h2d_pageable_into",
                  "d2h_pageable_into")
INTO_SUFFIX = "_into"


def host_transfer(src: TensorMeta | None, dst: TensorMeta | None, pinned: bool, into: bool = False) -> Cost | None:
    """The copy's cost when it crosses between host and device (one memcpy work item), else None. into: the
    destination is a tensor the step already holds (copy_), not one the copy allocates (_to_copy)."""
    if src is None or dst is None or src.on_gpu == dst.on_gpu:
        return None
    direction = "d2h" if src.on_gpu else "h2d"
    kind = f"{direction}_{'pinned' if pinned else 'pageable'}"
    return Cost(bytes_read=float(src.nbytes), kernels=1, dtype=dst.dtype,
                kind=kind + (INTO_SUFFIX if into and not pinned else ""))
