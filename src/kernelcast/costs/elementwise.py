"""Memory-bound ops: pointwise, reductions, softmax, copies, factories (batch norm is in norms.py, pooling in
pooling.py, losses in losses.py).

FLOPs per element are nominal (one per basic arithmetic step): these ops are bound by bytes, so the count
changes only the reported intensity, never the roof. Named constants keep them visible.

GPU work-item counts marked "measured" were read off torch.profiler on the workplace H200 (torch 2.11,
validation/capture_validation.json); the rest follow the CUDA kernels in PyTorch's sources.
"""

from __future__ import annotations

import dataclasses
import math

from kernelcast.records import DTYPE_BYTES, OpRecord, TensorMeta

from .common import (arg, bytes_written, channels_last, contiguous_copies, dense, gpu_tensors, host_transfer,
                     memory_formula, memory_key, memory_op, out_dtype, row_major, same_layout, width_key, write_only)
from .reduce_config import REDUCE_SEMAPHORE_MEMSETS, is_global_reduce, reduced_dims, reduces_fastest_dim
from .registry import Cost, CostContext, register, register_tag, register_zero_cost
from .tensor_iterator import split_for_32bit_indexing

POINTWISE_FLOPS_PER_ELEMENT = 1.0  # add, mul, relu...: one operation per output element
REDUCTION_FLOPS_PER_ELEMENT = 1.0  # one add/compare per input element
SOFTMAX_FLOPS_PER_ELEMENT = 5.0  # max, subtract, exp, sum, divide
SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT = 4.0  # dot(grad, out), subtract, multiply (x2 passes)



# Pointwise ops whose arithmetic, not their memory traffic, can bound them: on the H200 in bf16 / fp16 (4 bytes
# moved per element) these ran at 2.1-3.8 TB/s where relu, exp, rsqrt and the like stream at 4.1
# (validation/probes/pointwise_math_probe.json, scripts/device/probe_pointwise_math.py); in fp32 all of them stream.
# Their kind carries the op (its arithmetic rate is the profile's `arithmetic_caps`, per element, any dtype), so
# that their times neither set the streaming curve of the other pointwise ops nor are read off it alone.
ARITHMETIC_KIND = "pointwise_math"
ARITHMETIC_OPS = frozenset({"sigmoid", "silu", "tanh", "log", "sin", "erf", "gelu", "mish", "softplus"})


def arithmetic_label(op: OpRecord) -> str | None:
    """The probe's name for an arithmetic-bound pointwise op (gelu's tanh approximation apart), else None."""
    name = op.name.rstrip("_")
    if name not in ARITHMETIC_OPS:
        return None
    return "gelu_tanh" if name == "gelu" and op.args.get("approximate") == "tanh" else name


def pointwise(op: OpRecord, ctx: CostContext) -> Cost:
    cost = split_for_32bit_indexing(op, memory_op(op, POINTWISE_FLOPS_PER_ELEMENT, kind="pointwise"))
    label = arithmetic_label(op)
    if label is None or cost.kind != "pointwise":  # strided, transposing and casting kinds keep theirs
        return cost
    return dataclasses.replace(cost, kind=ARITHMETIC_KIND, key=(*cost.key, label))


def _first_input(op: OpRecord) -> TensorMeta | None:
    return next((t for t in op.tensors_in() if t.on_gpu), None)


# make_reduction_from_out_ty (aten/src/ATen/native/ReduceOpsUtils.h), which sum, nansum, prod and CUDA's mean build
# their iterator with: an input whose dtype is not the one the reduce runs in is cast first (`self.to(in_dtype)`,
# one copy kernel), except a half or bfloat16 input reduced into float32 on CUDA (gpu_lowp_to_f32: the kernel
# reads it as it is). torch.profiler on the CPU build lists sum -> to -> copy_ for a bool, int32 or float32-into-
# float64 sum. Measured on the H200 (zoo losses_train, cross_entropy's count of kept targets, a bool sum into
# int64): a copy kernel beside the reduce. any/all on CUDA read every dtype as it is (get_allany_iter): no cast.
CAST_FIRST_REDUCTIONS = frozenset({"sum", "nansum", "prod", "mean"})
READ_AS_IS_INTO_FLOAT32 = frozenset({"float16", "bfloat16"})


def reduce_input_cast(op: OpRecord, x: TensorMeta, out_dtype: str) -> Cost | None:
    """The copy casting a reduction's input to the dtype it reduces in (see CAST_FIRST_REDUCTIONS), or None."""
    if op.name not in CAST_FIRST_REDUCTIONS or x.dtype == out_dtype:
        return None
    if x.dtype in READ_AS_IS_INTO_FLOAT32 and out_dtype == "float32":
        return None
    if x.dtype.startswith("complex") and out_dtype.startswith("complex"):
        return None  # in_dtype is the complex type of the result: the same here
    return Cost(bytes_read=float(x.touched_bytes), bytes_written=float(x.numel * DTYPE_BYTES.get(out_dtype, 4)),
                kernels=1, dtype=out_dtype, kind="copy_cast", key=width_key(x))


def reduction(op: OpRecord, ctx: CostContext) -> Cost:
    x, outs = _first_input(op), op.tensors_out()
    cost = _reduce_kernel(op, ctx, x, outs)
    cast = reduce_input_cast(op, x, outs[0].dtype) if x is not None and outs and x.numel else None
    return split_for_32bit_indexing(op, cost if cast is None else cost.with_parts(cast))


# Reductions that keep the index of the value they pick (max / min over a dim, argmax / argmin) carry a (value,
# int64 index) pair through the reduce kernel (MaxOps, ArgMaxOps: aten/src/ATen/native/SharedReduceOps.h) and
# write int64 indices: each kind below gets an "_index" variant of its own. On the H200 (microbenchmark section
# value_index_grid, validation/h200_value_index_grid_raw.json.gz) max over the last dim ran 1.23x (fp32) and
# 1.38x (bf16) the time of amax over the same rows at the median, argmax 1.23x, max across rows 1.5-2.7x the
# sum of the same shape; priced as the value-only kinds they came out at 0.56-0.77 of measured
# (scripts/eval/value_index_check.py).
VALUE_INDEX_REDUCTIONS = frozenset({"aten.max.dim", "aten.min.dim", "aten.argmax.default", "aten.argmin.default",
                                   "aten.max.dim_max", "aten.min.dim_min", "aten.argmax.out", "aten.argmin.out"})
INDEX_SUFFIX = "_index"


def base_kind(kind: str) -> str:
    """The value-only kind an "_index" kind is priced from: "reduction_outer_index" -> "reduction_outer"."""
    return kind.removesuffix(INDEX_SUFFIX)


def factor_key(cost: Cost) -> str:
    """The value-and-index factor a cost takes (calibrate/value_index.py): its value-only kind and input item
    size (the last field of its key), e.g. "reduction:2"; the kind alone where the key carries no item size."""
    itemsize = cost.key[-1] if cost.key and isinstance(cost.key[-1], int) else None
    return base_kind(cost.kind) + (f":{itemsize}" if itemsize else "")


def _reduce_kernel(op: OpRecord, ctx: CostContext, x: TensorMeta | None, outs: list[TensorMeta]) -> Cost:
    """One reduce kernel; a memset more when the reduction splits outputs across thread blocks. Three kinds for
    the time model: a reduction to one value ("reduction_all"), along the rows' last dim ("reduction"), across
    rows ("reduction_outer"); each with "_index" for a reduction that keeps an index (VALUE_INDEX_REDUCTIONS).
    On the H200 a sum of 128 x 768 fp32 to one value took 21.4 µs, to 128 row sums 5.1 µs
    (validation/h200_calibration_raw.json); one curve for both priced T5's row means at 5x."""
    cost = _reduce_kernel_by_shape(op, ctx, x, outs)
    if op.op in VALUE_INDEX_REDUCTIONS:
        return dataclasses.replace(cost, kind=cost.kind + INDEX_SUFFIX)
    return cost


def _reduce_kernel_by_shape(op: OpRecord, ctx: CostContext, x: TensorMeta | None, outs: list[TensorMeta]) -> Cost:
    kernels, kind = 1, "reduction"
    if x is not None and outs and x.numel:
        dims = reduced_dims(len(x.shape), op.args.get("dim"))
        num_outputs = max(outs[0].numel, 1)
        fastest = reduces_fastest_dim(x.shape, x.stride, dims)
        if is_global_reduce(num_outputs, x.numel // num_outputs, fastest, ctx.sm_count, ctx.max_threads_per_sm):
            kernels += REDUCE_SEMAPHORE_MEMSETS
        if num_outputs == 1:  # to one value: blocks share the work of one output, a kernel of its own speed
            kind = "reduction_all"
        elif not fastest:  # reducing across rows (a bias gradient): a different access pattern and speed
            # keyed by its outputs, the threads it can keep busy: a column sum of (R, C) has C (its last dim, as
            # every calibration point), a mean over the middle dim of (B, L, D) has B x D. Keyed by D, the zoo's
            # mean(1) of 4096 x 8 x 128 fp32 was priced at 32 µs (0.5 TB/s, the rate of 128 column sums); the
            # H200 ran it in 7.8 µs.
            cost = memory_op(op, REDUCTION_FLOPS_PER_ELEMENT, kernels, kind="reduction_outer")
            return dataclasses.replace(cost, key=(num_outputs, x.itemsize))
        else:
            # keyed by the length of the row each output reduces, as the kernel sees it: TensorIterator merges
            # the contiguous reduced dims into one, so a mean over the last four dims of (128, 16, 14, 30, 30)
            # reduces rows of 201600, not of 30 (KernelBench L2 #23 on the H200: 38 µs, 2.7 TB/s; keyed by its
            # last dim, 30, it was priced at the short rows' rate, 59 µs)
            cost = memory_op(op, REDUCTION_FLOPS_PER_ELEMENT, kernels, kind=kind)
            return dataclasses.replace(cost, key=(x.numel // num_outputs, x.itemsize))
    return memory_op(op, REDUCTION_FLOPS_PER_ELEMENT, kernels, kind=kind)


register_tag("pointwise", pointwise)
register_tag("reduction", reduction)

# abs and angle of a complex tensor into a real one run two kernels on CUDA and CPU alike
# (aten/src/ATen/native/UnaryOps.cpp, unary_op_impl_with_complex_to_float_out): the op complex -> complex into a
# temporary, then `result.copy_(at::real(tmp))`, a copy reading every other float of it (torch.profiler on this
# build lists abs -> empty, real, copy_). Measured on the H200 (zoo audio_spectrogram_forward, torch 2.11): |STFT|
# of 8 x 201 x 1001 complex64 ran abs_kernel (5.3 us) and a direct_copy_kernel (5.5 us).
COMPLEX_TO_REAL_OPS = ("aten.abs", "aten.angle")


def _complex_input_real_result(op: OpRecord) -> TensorMeta | None:
    """The complex input of an abs/angle whose result is real (None: a real input, or a complex result). The
    temporary it is first computed into is empty_like(input): its dtype and layout."""
    x, outs = _first_input(op), op.tensors_out()
    if x is None or not outs or not x.dtype.startswith("complex") or outs[0].dtype.startswith("complex"):
        return None
    return x


@register(*COMPLEX_TO_REAL_OPS)
def complex_to_real(op: OpRecord, ctx: CostContext) -> Cost:
    """One pointwise kernel, or for a complex input and a real result (COMPLEX_TO_REAL_OPS) the complex-valued
    kernel into a temporary of the input's dtype and layout and a copy of its real part: the copy reads every
    sector of the temporary (the imaginary halves interleave) and writes the real result."""
    x = _complex_input_real_result(op)
    if x is None:
        return pointwise(op, ctx)
    result = op.tensors_out()[0]
    complex_kernel = dataclasses.replace(pointwise(op, ctx), bytes_written=float(x.nbytes))
    copy_real = Cost(bytes_read=float(x.nbytes), bytes_written=float(result.nbytes), kernels=1, dtype=result.dtype,
                     kind="copy", key=width_key(result))
    return complex_kernel.with_parts(copy_real)

# No kernel, no device traffic: views torch does not mark as such in the schema, allocation, metadata.
register_zero_cost(
    "aten._unsafe_view", "aten._reshape_alias", "aten.lift_fresh", "aten.empty", "aten.empty_like",
    "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided", "aten.resize_", "aten.set_",
    "aten.record_stream", "aten._assert_scalar", "aten._functional_assert_async",
    # ctc_loss's questions whether cuDNN (or MIOpen) would run it: answered on the host (capture/cuda_only.py).
    "aten._use_cudnn_ctc_loss", "aten._use_miopen_ctc_loss",
    "aten.sym_constrain_range_for_size",
    # A sparse COO tensor made from given indices and values aliases them (SparseTensor.cpp,
    # new_with_dims_and_tensor_sparse): no kernel (none measured under it on the H200).
    "aten._sparse_coo_tensor_with_dims_and_tensors", "aten._sparse_coo_tensor_unsafe",
    # A sparse tensor's metadata, read on the host.
    "aten._nnz", "aten.sparse_dim", "aten.dense_dim", "aten.is_coalesced", "aten._coalesced_",
    # A zero tensor with no storage (the ZeroTensor dispatch key): ops on it are shortcut on the host.
    "aten._efficientzerotensor",
    # Splits into views of the input (TensorShape.cpp, unsafe_split: split without the view tracking).
    "aten.unsafe_split",
)

# Pointwise in effect but not tagged so by torch: one TensorIterator kernel each on CUDA (measured on the H200,
# torch 2.11: hardswish, hardswish_backward, hardsigmoid_backward in zoo mobilenet_train; floor_divide and
# masked_fill_ in mixtral_forward and bart_train).
register("aten.native_dropout", "aten.tril", "aten.triu", "aten.where", "aten.masked_fill",
         "aten.clamp_min", "aten.clamp_max", "aten.bernoulli", "aten.floor_divide", "aten.floor_divide_")(pointwise)
# torch.distributions' samplers and their gradients (aten/src/ATen/native/cuda/Distributions.cpp): one kernel each
# for _standard_gamma (Gamma, Beta), poisson, binomial, _standard_gamma_grad and _dirichlet_grad; _sample_dirichlet
# is a gamma draw, its sum over the last dim and the normalising kernel (DIRICHLET_KERNELS).
register("aten._standard_gamma", "aten.poisson", "aten.binomial", "aten._standard_gamma_grad",
         "aten._dirichlet_grad")(pointwise)
DIRICHLET_KERNELS = 3


# Fake quantization for quantization-aware training (native/quantized/FakeQuantPer*Affine.cpp, cuda/
# FakeQuantizeCore.cu; read from the torch 2.11 source, not measured): the cachemask forms are one TensorIterator
# kernel writing the output and its mask; the learnable forms round the zero point first where it is a tensor per
# channel (round, clamp_, and a cast to int for the forward), then run the cachemask kernel, and their backward
# is one kernel writing the three gradients element-wise, then a sum each for the scale's and zero point's. The
# default QAT module (FusedMovingAvgObsFakeQuantize) calls _fused_moving_avg_obs_fq_helper (cuda/
# FusedObsFakeQuant.cu): an aminmax over the tensor (or its rows), the moving-average update, the qparams kernel
# and the cachemask kernel, all with the on/off flags read on the device (no sync point).
register("aten.fake_quantize_per_tensor_affine_cachemask", "aten.fake_quantize_per_channel_affine_cachemask",
         "aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams")(pointwise)
FAKE_QUANT_KERNELS = {"aten._fake_quantize_learnable_per_tensor_affine": 1,
                      "aten._fake_quantize_learnable_per_channel_affine": 4,
                      "aten._fake_quantize_learnable_per_tensor_affine_backward": 3,
                      "aten._fake_quantize_learnable_per_channel_affine_backward": 5,
                      "aten._fused_moving_avg_obs_fq_helper": 4}


@register(*FAKE_QUANT_KERNELS)
def fake_quantize_learnable(op: OpRecord, ctx: CostContext) -> Cost:
    return dataclasses.replace(pointwise(op, ctx), kernels=FAKE_QUANT_KERNELS[op.packet])


@register("aten._sample_dirichlet")
def sample_dirichlet(op: OpRecord, ctx: CostContext) -> Cost:
    return dataclasses.replace(pointwise(op, ctx), kernels=DIRICHLET_KERNELS)


# Likewise one TensorIterator kernel each, from their CUDA sources: the activation backwards
# (native/cuda/Activation*.cu: elu, hardshrink, hardtanh, leaky_relu, log_sigmoid, softplus, softshrink), glu
# and its backward (ActivationGluKernel.cu), prelu forward and backward (one iterator with two outputs:
# ActivationPreluKernel.cu), log_sigmoid_forward (its buffer output is empty on CUDA), rrelu_with_noise (the
# training kernel draws the noise and writes both; eval is leaky_relu) and its backward (a mul by the noise, or
# leaky_relu_backward), rsub (a sub), linalg_cross (cuda/CrossKernel.cu), complex and polar (one iterator each,
# TensorFactories.cpp), in-place tril_ (cuda/TriangularOps.cu).
register("aten.elu_backward", "aten.hardshrink_backward", "aten.hardtanh_backward", "aten.leaky_relu_backward",
         "aten.log_sigmoid_backward", "aten.softplus_backward", "aten.softshrink_backward", "aten.glu",
         "aten.glu_backward", "aten._prelu_kernel", "aten._prelu_kernel_backward", "aten.log_sigmoid_forward",
         "aten.rrelu_with_noise", "aten.rrelu_with_noise_backward", "aten.rsub", "aten.linalg_cross",
         "aten.complex", "aten.polar", "aten.tril_", "aten.triu_")(pointwise)


# aten/src/ATen/native/cuda/SoftMax.cu (torch 2.11): host_softmax and host_softmax_backward make their inputs
# contiguous first (a copy kernel each for a strided one), and softmax's backward (not log_softmax's) multiplies
# grad by output in a pointwise kernel of its own (`Tensor tmp = grad * output`, softmax_backward_cuda_out)
# before the backward kernel. Measured on the H200: a mul under _softmax_backward_data in zoo moe_train and
# unet_block_train, a copy under _log_softmax_backward_data for wav2vec2's CTC (its log-probs transposed).
SOFTMAX_BACKWARD_PRODUCT_KERNELS = 1


# Over a dim that is not the last (inner size > 1), SoftMax.cu runs its spatial kernels, whose time follows
# their launch geometry (predict/spatial_softmax_time.py): the key carries (SPATIAL_SOFTMAX_KEY, pass, outer
# size, dim size, inner size), then the byte curves' own key (innermost dim, item size), which prices the op
# where the profile has no spatial fit.
SPATIAL_SOFTMAX_KEY = "softmax_spatial"


def spatial_softmax_key(x: TensorMeta | None, dim, backward: bool, curve_key: tuple) -> tuple | None:
    """The spatial key of a softmax over `dim` of x (the logical shape: the kernels run on a contiguous copy),
    else None (a softmax over the last dim, or nothing to key)."""
    if not isinstance(x, TensorMeta) or not x.shape or not isinstance(dim, int):
        return None
    d = dim % len(x.shape)
    inner = math.prod(x.shape[d + 1:])
    if inner <= 1:
        return None
    inner_dim, itemsize = curve_key if len(curve_key) == 2 else (1, x.itemsize)
    return (SPATIAL_SOFTMAX_KEY, "backward" if backward else "forward", math.prod(x.shape[:d]), x.shape[d], inner,
            inner_dim, itemsize)


def _spatial(cost: Cost, x: TensorMeta | None, dim, backward: bool) -> Cost:
    key = spatial_softmax_key(x, dim, backward, cost.key)
    return cost if key is None else dataclasses.replace(cost, key=key)


@register("aten._softmax", "aten._log_softmax", "aten._safe_softmax", "aten._masked_softmax")
def softmax(op: OpRecord, ctx: CostContext) -> Cost:
    x = op.args.get("self")
    copies = contiguous_copies(x)
    cost = _spatial(memory_op(op, SOFTMAX_FLOPS_PER_ELEMENT, kind="softmax"), x, op.args.get("dim"), False)
    return cost.with_parts(*copies)


def _with_grad_times_output(cost: Cost, grad: TensorMeta, output: TensorMeta) -> Cost:
    """softmax backward with its `grad * output` kernel: the product reads both and writes a contiguous tensor
    that the backward kernel then reads in grad's place. Kept in the softmax_backward kind rather than priced
    as a pointwise part: the calibration timed _softmax_backward_data whole, both kernels (calibrate/
    microbench.py), so the kind's rate already has the product in it."""
    return dataclasses.replace(
        cost, flops=cost.flops + POINTWISE_FLOPS_PER_ELEMENT * grad.numel,
        bytes_read=cost.bytes_read + grad.touched_bytes + output.touched_bytes,
        bytes_written=cost.bytes_written + grad.nbytes, kernels=cost.kernels + SOFTMAX_BACKWARD_PRODUCT_KERNELS)


@register("aten._softmax_backward_data", "aten._log_softmax_backward_data")
def softmax_backward(op: OpRecord, ctx: CostContext) -> Cost:
    grad, output = op.args.get("grad_output"), op.args.get("output")
    cost = memory_op(op, SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT, kind="softmax_backward")
    if not (isinstance(grad, TensorMeta) and isinstance(output, TensorMeta)):
        return cost
    cost = _spatial(cost, output, op.args.get("dim"), True)
    if op.packet == "aten._softmax_backward_data":  # the product is made contiguous: only output may be copied
        return _with_grad_times_output(cost, grad, output).with_parts(*contiguous_copies(output))
    return cost.with_parts(*contiguous_copies(grad, output))
def _memory(op: OpRecord, ctx: CostContext) -> Cost:
    return memory_op(op)


# _transform_bias_rescale_qkv (transformers/cuda/attention.cu): one kernel adding the packed qkv projection's
# bias, scaling q, and writing q, k and v head-major (nn.MultiheadAttention's fused inference path).
register("aten._transform_bias_rescale_qkv")(memory_formula(2.0, "copy"))
# torch._assert_async on a CUDA tensor checks it on the GPU, without waiting: one kernel of one thread that reads
# the value (aten/src/ATen/native/cuda/TensorCompare.cu, `_assert_async_cuda_kernel<<<1, 1>>>`), measured as a
# work item of its own on an H100 (`_assert_async_cuda_kernel<bool>`, twice in a multinomial's checks:
# validation/probes/opinfo_items/opinfo_items_run1.json.gz). No sync point: a failed check surfaces later as a
# device-side assert.
register("aten._assert_async")(memory_formula(0.0, "pointwise"))

# Data movement: no math.
register("aten.clone", "aten.flip", "aten.repeat", "aten.masked_scatter", "aten.slice_scatter", "aten.select_scatter",
         "aten.diagonal_scatter", "aten.as_strided_scatter", "aten.upsample_nearest2d",
         "aten.upsample_bilinear2d", "aten.upsample_nearest2d_backward", "aten.upsample_bilinear2d_backward",
         "aten.im2col", "aten.col2im", "aten.native_dropout_backward", "aten.unfold_backward",
         "aten.expand_copy")(_memory)


# masked_scatter_ on CUDA (aten/src/ATen/native/cuda/IndexKernel.cu masked_scatter_cuda_impl): an exclusive prefix
# sum of the mask into an int64 tensor (cub: an init and a scan kernel), a kernel checking the source holds enough
# elements (masked_scatter_size_check), then the scatter: four work items. The functional masked_scatter clones
# self first (recorded as its own op). Measured on an H100 (torch 2.11, validation/probes/opinfo_items/
# opinfo_items_run1.json.gz, OpInfo masked_scatter and masked_select's backward): scan init, scan, size check,
# scatter. The prefix sum is a temporary (predict/memory.py).
MASKED_SCATTER_ITEMS = 4
PREFIX_SUM_BYTES = 8  # int64 per mask element


@register("aten.masked_scatter_")
def masked_scatter_(op: OpRecord, ctx: CostContext) -> Cost:
    self_t, mask = op.args.get("self"), op.args.get("mask")
    base = memory_op(op, kernels=MASKED_SCATTER_ITEMS)
    if not isinstance(self_t, TensorMeta) or not isinstance(mask, TensorMeta):
        return base
    scan = float(self_t.numel * PREFIX_SUM_BYTES)  # written by the scan, read by the scatter
    return dataclasses.replace(base, bytes_read=base.bytes_read + scan + self_t.numel * mask.itemsize,
                               bytes_written=base.bytes_written + scan)


# split_with_sizes_copy on CUDA (aten/src/ATen/native/cuda/TensorShape.cu, split_with_sizes_copy_out_cuda): when
# the input and every output are non-overlapping and dense and of one dtype, a fast path packs the pointer and
# size tables on the host, copies them to the device (one non-blocking H2D memcpy, detail::pack_vecs) and runs
# one kernel; otherwise the composite copies split by split. The functional op allocates dense outputs and calls
# the .out one. FSDP2's copy-out is this fast path (H200, torch 2.11: one kernel + one pinned H2D memcpy per call).
SPLIT_COPY_FAST_PATH_ITEMS = 2


@register("aten.split_with_sizes_copy")
def split_with_sizes_copy(op: OpRecord, ctx: CostContext) -> Cost:
    src = op.args.get("self")
    outs = gpu_tensors(op.tensors_out() + [t for t in op.args.get("out") or () if isinstance(t, TensorMeta)])
    if isinstance(src, TensorMeta) and dense(src) and all(dense(t) and t.dtype == src.dtype for t in outs):
        kernels = SPLIT_COPY_FAST_PATH_ITEMS
    else:
        kernels = sum(1 for t in outs if t.numel)
    cost = memory_op(op, kernels=kernels)
    return dataclasses.replace(cost, bytes_written=float(sum(t.nbytes for t in outs)))


# torch.cat on CUDA (aten/src/ATen/native/cuda/Cat.cu): one batched kernel per CAT_ARRAY_BATCH_SIZE inputs
# (half as many when some input is not contiguous) when there are several inputs of the output's dtype and
# at most CAT_ARRAY_MAX_INPUT_DIMS dims; otherwise a copy per non-empty input. Measured on the ViT training
# step under autocast: an fp32 class token and bf16 patches, two copies.
CAT_ARRAY_BATCH_SIZE = 128
CAT_ARRAY_MAX_INPUT_DIMS = 4
INT32_MAX = 2**31 - 1


def cat_path(inputs: list[TensorMeta], out: TensorMeta) -> tuple[int, str]:
    """(work items, path) of one torch.cat, by the CUDA implementation's choice: "batched" (contiguous inputs),
    "batched_strided" (some input is not contiguous, read through its strides) or "copies" (one per input)."""
    parts = [t for t in inputs if t.numel > 0]
    batched = (len(inputs) > 1 and len(out.shape) <= CAT_ARRAY_MAX_INPUT_DIMS and out.numel <= INT32_MAX
               and all(t.dtype == out.dtype and t.numel <= INT32_MAX for t in inputs))
    if batched and all(row_major(t) or (channels_last(out) and channels_last(t)) for t in inputs):
        return -(-len(parts) // CAT_ARRAY_BATCH_SIZE), "batched"
    if batched and not channels_last(out):
        return -(-len(parts) // (CAT_ARRAY_BATCH_SIZE // 2)), "batched_strided"
    return len(parts), "copies"


def cat_kernels(inputs: list[TensorMeta], out: TensorMeta) -> int:
    """Work items of one torch.cat (cat_path)."""
    return cat_path(inputs, out)[0]


@register("aten.cat")
def cat(op: OpRecord, ctx: CostContext) -> Cost:
    """cat_path's work items; a batched cat of some input that is not contiguous is a kind of its own,
    cat_strided (the batched kernel reads it element by element through its strides: calibrate's
    cat_strided_grid)."""
    outs = op.tensors_out()
    inputs = [t for t in op.tensors_in() if t.on_gpu]
    if not outs or not inputs:
        return memory_op(op)
    kernels, path = cat_path(inputs, outs[0])
    cost = memory_op(op, kind="cat_strided") if path == "batched_strided" else memory_op(op)
    return dataclasses.replace(cost, kernels=max(kernels, 1))


# Backward of a slice or select, and constant padding: a fill of the whole output, then a copy of the input
# into its part of it (two work items, measured on the GPT-2 and Llama training steps and ViT's class-token
# select; validation/capture_validation.json). The copy writes the input's bytes a second time.
FILL_THEN_COPY_KERNELS = 2


@register("aten.slice_backward", "aten.select_backward", "aten.constant_pad_nd")
def fill_then_copy(op: OpRecord, ctx: CostContext) -> Cost:
    base = memory_op(op)
    part = next((t for t in op.tensors_in() if t.on_gpu), None)
    if part is None or (op.op.startswith("aten.constant_pad_nd") and base.bytes_written <= part.nbytes):
        return base  # padding that only crops: one copy
    return dataclasses.replace(base, bytes_written=base.bytes_written + part.nbytes, kernels=FILL_THEN_COPY_KERNELS)


@register("aten._to_copy")
def to_copy(op: OpRecord, ctx: CostContext) -> Cost:
    outs = op.tensors_out()
    transfer = host_transfer(arg(op, "self"), outs[0] if outs else None, "pinned" in op.tags)
    if transfer is not None:
        return transfer
    cost = memory_op(op)
    return cost if outs and memcpy_copy(arg(op, "self"), outs[0]) else split_for_32bit_indexing(op, cost)


@register("aten.copy_")
def copy_(op: OpRecord, ctx: CostContext) -> Cost:
    """Reads the source only; writes the destination. Keyed as a copy from the source to the destination, as
    `clone` and `_to_copy` are (CUDA runs both as an allocation and this copy_, capture/decompose.py): a
    source laid out unlike the destination makes it a transposing copy."""
    src = arg(op, "src")
    transfer = host_transfer(src, arg(op, "self"), "pinned" in op.tags, into=True)
    if transfer is not None:
        return transfer
    nbytes = src.touched_bytes if src.on_gpu else 0
    kind, key = memory_key(dataclasses.replace(op, args={"src": src}), "copy")
    cost = Cost(bytes_read=nbytes, bytes_written=bytes_written(op), dtype=out_dtype(op), kind=kind, key=key)
    return cost if memcpy_copy(src, arg(op, "self")) else split_for_32bit_indexing(op, cost)


def memcpy_copy(src: TensorMeta, dst: TensorMeta) -> bool:
    """A device copy CUDA runs as one cudaMemcpyAsync (native/cuda/Copy.cu copy_device_to_device, memcpy_eligible:
    the same dtype, both dense in one layout), not as a TensorIterator kernel."""
    return src.on_gpu and dst.on_gpu and src.dtype == dst.dtype and src.conj == dst.conj and dense(src) \
        and dense(dst) and src.shape == dst.shape and same_layout(src, dst)


def _write_only(op: OpRecord, ctx: CostContext) -> Cost:
    return write_only(op)


def _iterator_write_only(op: OpRecord, ctx: CostContext) -> Cost:
    """A fill or a random draw: one TensorIterator kernel (FillKernel.cu, DistributionTemplates.h), split where
    the output is too large for 32-bit index math (costs/tensor_iterator.py)."""
    return split_for_32bit_indexing(op, write_only(op))


register("aten.fill_", "aten.zero_", "aten.zeros", "aten.ones", "aten.full", "aten.zeros_like", "aten.ones_like",
         "aten.full_like", "aten.normal_", "aten.uniform_", "aten.bernoulli_", "aten.randn", "aten.rand",
         "aten.randint", "aten.randn_like", "aten.rand_like", "aten.exponential_", "aten.random_", "aten.new_zeros",
         "aten.new_ones", "aten.new_full",
         # in-place RNG (one distribution kernel each: cuda/DistributionTemplates.h), and fill / randint_like,
         # which allocate and then run one fill or random kernel
         "aten.cauchy_", "aten.geometric_", "aten.log_normal_", "aten.randint_like", "aten.fill",
         )(_iterator_write_only)
# Kernels of their own indexing (arange, linspace, logspace: gpu_kernel_with_index; randperm; eye), a 0-d fill and
# a host value's copy: one kernel each.
register("aten.scalar_tensor", "aten.arange", "aten.randperm", "aten.lift_fresh_copy", "aten.linspace", "aten.eye",
         "aten.logspace")(_write_only)


# normal with tensor mean and/or std (normal_out_impl in native/DistributionTemplates.h): Tensor_Tensor runs
# output.normal_(0, 1).mul_(std).add_(mean); Tensor_float normal_(0, std).add_(mean); float_Tensor fills a 0-d
# mean (at::full), then normal_(0, 1).mul_(std).add_(mean).
NORMAL_KERNELS = {"Tensor_Tensor": 3, "Tensor_float": 2, "float_Tensor": 4}


@register("aten.normal.Tensor_Tensor", "aten.normal.Tensor_float", "aten.normal.float_Tensor")
def normal_tensor(op: OpRecord, ctx: CostContext) -> Cost:
    """The sampling kernel writes the output; each later kernel reads it back and writes it again."""
    kernels = NORMAL_KERNELS[op.op.split(".")[-1]]
    out_bytes = bytes_written(op)
    passes = kernels - 1
    base = memory_op(op, POINTWISE_FLOPS_PER_ELEMENT * passes, kind="pointwise")
    return dataclasses.replace(base, bytes_read=base.bytes_read + passes * out_bytes,
                               bytes_written=kernels * out_bytes, kernels=kernels)


@register("aten._local_scalar_dense")
def local_scalar_dense(op: OpRecord, ctx: CostContext) -> Cost:
    """A device-to-host copy of one element: one memcpy, a sync."""
    t = arg(op, "self")
    return Cost(bytes_read=t.itemsize if t.on_gpu else 0, kernels=1 if t.on_gpu else 0, kind="memcpy")
