"""Ops that exist only as CUDA kernels: what FakeTensorMode needs to run them on fake CUDA tensors.

A CUDA build has ops with a CUDA kernel and nothing else: no CPU or Meta kernel, no composite formula, no
decomposition or fake implementation in torch. Composite code reaches some of them on fake CUDA tensors, as
it would on a GPU (ctc_loss asks `_use_cudnn_ctc_loss`; grid_sample with align_corners=True takes
`cudnn_grid_sampler`; SyncBatchNorm calls `batch_norm_stats` and its kin). FakeTensorMode, finding no way to
compute them, falls back to running the kernel on real tensors of the op's device and fails with "Could not
run 'aten::empty_strided' with arguments from the 'CUDA' backend" (zoo wav2vec2_train, whose CTC loss asks
`_use_cudnn_ctc_loss.Tensor`).

FAKES gives each such op its CUDA kernel's outputs (shapes, dtypes, layouts; for the `_use_*` queries, the
kernel's answer), registered as a fake implementation for the length of the capture; an op that only mutates
its arguments and returns nothing (the fused optimizers) gets a fake that does nothing. Every other CUDA-only
op in the CUDA op table gets a fake that stops the capture with one clear line naming it. A CPU kernel does
not make an op computable: FakeTensorMode's fallback runs the kernel of the tensors' device, CUDA here
(`_ctc_loss_backward` has CPU and CUDA kernels and no Meta one). The recurrent ops
(`_cudnn_rnn*`, `_thnn_fused_*_cell*`, `miopen_rnn*`) are left to capture/ code of their own.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch

from kernelcast.errors import CaptureError

from .cuda_path import CUDA, CudaOpTable, overload_of

# Keys with which FakeTensorMode can compute an op without a fake implementation of ours. A CPU kernel is not
# one: for a tensor on fake CUDA, FakeTensorMode's fallback would run the kernel of the tensor's device.
COMPUTABLE_KEYS = ("Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                   "CompositeExplicitAutogradNonFunctional")
# Never given a failing fake here: recurrent ops and ops with data-dependent output shapes (capture code of
# their own handles them), and ops the recorder answers before FakeTensorMode sees them (capture/recorder.py).
LEFT_TO_OTHERS = ("aten::_cudnn_rnn", "aten::_thnn_fused_", "aten::miopen_rnn", "aten::_cudnn_init_dropout_state",
                  "aten::bincount", "aten::_unique", "aten::unique", "aten::masked_select", "aten::nonzero",
                  "aten::repeat_interleave", "aten::_pack_padded_sequence", "aten::equal", "aten::record_stream")
CUDNN_CTC_MAX_TARGET_LENGTH = 256  # cuDNN's CTC loss takes target lengths below 256 (LossCTC.cpp, cudnn)


# -- CTC loss (aten/src/ATen/native/cudnn/LossCTC.cpp) -----------------------------------------------------
def _cudnn_ctc_static(log_probs: torch.Tensor, targets: torch.Tensor, blank: int) -> bool:
    return (torch.backends.cudnn.enabled and blank == 0 and targets.dim() == 1
            and log_probs.dtype == torch.float32 and targets.dtype == torch.int32
            and log_probs.device.type == "cuda" and targets.is_contiguous() and log_probs.dim() == 3)


def use_cudnn_ctc_loss(log_probs, targets, input_lengths, target_lengths, blank):
    """_use_cudnn_ctc_loss: cuDNN when the targets are int32 on the host, every input as long as the
    longest, and every target shorter than 256 and than its input."""
    if not (_cudnn_ctc_static(log_probs, targets, blank) and targets.device.type == "cpu"):
        return False
    if any(n != log_probs.shape[0] for n in input_lengths):
        return False
    return all(t < CUDNN_CTC_MAX_TARGET_LENGTH and t <= n for t, n in zip(target_lengths, input_lengths))


def use_cudnn_ctc_loss_tensor(log_probs, targets, input_lengths, target_lengths, blank):
    """_use_cudnn_ctc_loss.Tensor: the same static checks, lengths as int32 tensors. The CUDA kernel then
    reads the lengths back to check them; fake tensors hold none, so they are taken to pass."""
    return (_cudnn_ctc_static(log_probs, targets, blank) and input_lengths.dtype == torch.int32
            and target_lengths.dtype == torch.int32)


def use_miopen_ctc_loss(*args):
    """MIOpen is ROCm's; a CUDA build never takes it."""
    return False


def cudnn_ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, deterministic, zero_infinity):
    """(costs per batch element, gradient like the contiguous log_probs)."""
    costs = log_probs.new_empty((log_probs.shape[1],))
    return costs, torch.empty_like(log_probs, memory_format=torch.contiguous_format)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """(neg_log_likelihood per batch element, log_alpha (batch, time, 2 * longest target + 1)): ctc_loss_gpu_template
    (LossCTC.cu). FakeTensorMode lists _ctc_loss among ops whose output shapes depend on data, which holds for
    lengths in tensors only; with lengths as integers (the recorder reads tensor lengths back as CUDA does,
    capture/recorder.py) the shapes follow from them."""
    batch = log_probs.shape[1]
    longest = max(target_lengths, default=0)
    return log_probs.new_empty((batch,)), log_probs.new_empty((batch, log_probs.shape[0], 2 * longest + 1))


def ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
                      blank, zero_infinity=False):
    """The gradient: full_like(log_probs, -inf), contiguous (aten/src/ATen/native/cuda/LossCTC.cu)."""
    return torch.empty_like(log_probs, memory_format=torch.contiguous_format)


# -- grid sampling (aten/src/ATen/native/cudnn/GridSampler.cpp) ----------------------------------------------
def cudnn_grid_sampler(input, grid):
    """Output (N, C, H_out, W_out), contiguous; the grid is (N, H_out, W_out, 2)."""
    return input.new_empty((input.shape[0], input.shape[1], grid.shape[1], grid.shape[2]))


def cudnn_grid_sampler_backward(input, grid, grad_output):
    return (torch.empty_like(input, memory_format=torch.contiguous_format),
            torch.empty_like(grid, memory_format=torch.contiguous_format))


# -- SyncBatchNorm (aten/src/ATen/native/cuda/Normalization.cu) ---------------------------------------------
def _stats_dtype(input: torch.Tensor) -> torch.dtype:
    """Statistics in the accumulate type: half and bfloat16 inputs keep float statistics."""
    return torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype


def _per_channel(input: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return input.new_empty((input.shape[1],), dtype=dtype)


def _like_input(input: torch.Tensor) -> torch.Tensor:
    """empty_like(input, input.suggest_memory_format()): channels_last stays channels_last."""
    channels_last = input.dim() == 4 and input.is_contiguous(memory_format=torch.channels_last) \
        and not input.is_contiguous()
    return torch.empty_like(input, memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def batch_norm_stats(input, eps):
    """(mean, invstd) per channel."""
    dtype = _stats_dtype(input)
    return _per_channel(input, dtype), _per_channel(input, dtype)


def batch_norm_gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps, count):
    """(mean, invstd) per channel, from every rank's statistics ((ranks, C) tensors)."""
    return mean.new_empty((mean.shape[-1],)), mean.new_empty((mean.shape[-1],))


def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps, counts):
    return batch_norm_gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps, 0)


def batch_norm_elemt(input, weight, bias, mean, invstd, eps):
    return _like_input(input)


def batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
    """(sum_dy, sum_dy_xmu) like mean when the input needs a gradient; weight and bias gradients per channel
    in the weight's dtype when asked for."""
    param_dtype = weight.dtype if weight is not None else input.dtype
    return (torch.empty_like(mean) if input_g else None, torch.empty_like(mean) if input_g else None,
            _per_channel(input, param_dtype) if weight_g else None,
            _per_channel(input, param_dtype) if bias_g else None)


def batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    return _like_input(input)


# -- convolutions CUDA runs by other entry points (aten/src/ATen/native/Convolution.cpp dispatches to them;
# Inductor's generated code and torch.backends' fusions call some directly): each computes what aten.convolution
# computes for its arguments, so the fake is aten.convolution's on the same fakes.
def _convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    return torch.ops.aten.convolution(x, w, bias, list(stride), list(padding), list(dilation), transposed,
                                      list(output_padding), groups)


def cudnn_convolution(self, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32):
    return _convolution(self, weight, None, stride, padding, dilation, False, [0] * len(padding), groups)


def cudnn_convolution_transpose(self, weight, padding, output_padding, stride, dilation, groups, benchmark,
                                deterministic, allow_tf32):
    return _convolution(self, weight, None, stride, padding, dilation, True, output_padding, groups)


def cudnn_convolution_relu(self, weight, bias, stride, padding, dilation, groups):
    return _convolution(self, weight, bias, stride, padding, dilation, False, [0] * len(padding), groups)


def cudnn_convolution_add_relu(self, weight, z, alpha, bias, stride, padding, dilation, groups):
    return _convolution(self, weight, bias, stride, padding, dilation, False, [0] * len(padding), groups)


def slow_conv_transpose3d(self, weight, kernel_size, bias=None, stride=(1, 1, 1), padding=(0, 0, 0),
                          output_padding=(0, 0, 0), dilation=(1, 1, 1)):
    return _convolution(self, weight, bias, stride, padding, dilation, True, output_padding, 1)


def slow_conv_dilated(self, weight, kernel_size, bias=None, stride=None, padding=None, dilation=None):
    dims = len(kernel_size)
    return _convolution(self, weight, bias, stride or [1] * dims, padding or [0] * dims, dilation or [1] * dims,
                        False, [0] * dims, 1)


def conv_depthwise3d(self, weight, kernel_size, bias, stride, padding, dilation):
    return _convolution(self, weight, bias, stride, padding, dilation, False, [0, 0, 0], self.shape[1])


def conv_depthwise2d(self, weight, kernel_size, bias, stride, padding, dilation):
    return _convolution(self, weight, bias, stride, padding, dilation, False, [0, 0], self.shape[1])


def slow_conv2d_forward(self, weight, kernel_size, bias, stride, padding):
    return _convolution(self, weight, bias, stride, padding, [1, 1], False, [0, 0], 1)


def transform_bias_rescale_qkv(qkv, qkv_bias, num_heads):
    """_transform_bias_rescale_qkv (transformers/cuda/attention.cu): the packed (B, T, 3 * D) projection plus its
    bias, q scaled by 1 / sqrt(head dim), written as three (B, heads, T, D / heads) tensors (views of one
    (3, B, heads, T, D / heads) buffer on the GPU; three tensors of the same bytes here)."""
    batch, seq, packed = qkv.shape
    shape = (batch, num_heads, seq, packed // 3 // num_heads)
    return tuple(qkv.new_empty(shape) for _ in range(3))


def masked_softmax(self, mask, dim=None, mask_type=None):
    """_masked_softmax (cuda/SoftMax.cu masked_softmax_cuda): a softmax of the input's shape and dtype."""
    return torch.empty_like(self, memory_format=torch.contiguous_format)


# -- samplers of torch.distributions (aten/src/ATen/native/cuda/Distributions.cu) ------------------------------
# Beta, Gamma, Dirichlet and Binomial sample and differentiate with CUDA-only elementwise kernels: each output is
# `at::empty(first_input.sizes(), first_input.options())`.
def like_first(self, *args, **kwargs):
    return torch.empty(self.shape, dtype=self.dtype, device=self.device)


def like_second(first, second, *args, **kwargs):
    """A backward whose second argument is the input it differentiates (multilabel_margin_loss_backward,
    multi_margin_loss_backward, fractional_max_pool3d_backward: (grad_output, self, ...)): the gradient of `self`."""
    return torch.empty(second.shape, dtype=second.dtype, device=second.device)


# -- fake quantization, quantization-aware training (aten/src/ATen/native/quantized/FakeQuantPer*Affine.cpp) ---
# torch.ao.quantization's FakeQuantize modules call these; their CUDA kernels (cuda/FakeQuantizeCore.cu) write
# the fake-quantized tensor and, for the cachemask forms, a bool mask of the values inside the range, which the
# backward multiplies the gradient by.
def fake_quantize_cachemask(self, *args, **kwargs):
    """The output and its mask in the input's layout (MemoryFormat::Preserve)."""
    return torch.empty_like(self), torch.empty_like(self, dtype=torch.bool)


def fake_quantize_learnable_backward(grad, self, scale, zero_point, *args, **kwargs):
    """The gradients of the input, the scale and the zero point (the last two shaped as they are: one value
    per tensor or per channel)."""
    return torch.empty_like(self), torch.empty_like(scale), torch.empty_like(zero_point, dtype=scale.dtype)


FAKES: dict[str, Callable] = {
    "aten::fake_quantize_per_tensor_affine_cachemask": fake_quantize_cachemask,
    "aten::fake_quantize_per_channel_affine_cachemask": fake_quantize_cachemask,
    "aten::_fake_quantize_per_tensor_affine_cachemask_tensor_qparams": fake_quantize_cachemask,
    "aten::_fake_quantize_learnable_per_tensor_affine": like_first,
    "aten::_fake_quantize_learnable_per_channel_affine": like_first,
    "aten::_fake_quantize_learnable_per_tensor_affine_backward": fake_quantize_learnable_backward,
    "aten::_fake_quantize_learnable_per_channel_affine_backward": fake_quantize_learnable_backward,
    "aten::_sample_dirichlet": like_first,
    "aten::_standard_gamma_grad": like_first,
    "aten::_dirichlet_grad": like_first,
    "aten::binomial": like_first,
    "aten::_logcumsumexp": like_first,  # logcumsumexp's scan (cuda/LogcumsumexpKernel.cu)
    "aten::multilabel_margin_loss_backward": like_second,
    "aten::multi_margin_loss_backward": like_second,
    "aten::fractional_max_pool3d_backward": like_second,
    "aten::cudnn_convolution": cudnn_convolution,
    "aten::cudnn_convolution_transpose": cudnn_convolution_transpose,
    "aten::cudnn_convolution_relu": cudnn_convolution_relu,
    "aten::cudnn_convolution_add_relu": cudnn_convolution_add_relu,
    "aten::slow_conv_transpose3d": slow_conv_transpose3d,
    "aten::slow_conv_dilated2d": slow_conv_dilated,
    "aten::slow_conv_dilated3d": slow_conv_dilated,
    "aten::conv_depthwise3d": conv_depthwise3d,
    "aten::_conv_depthwise2d": conv_depthwise2d,
    "aten::_slow_conv2d_forward": slow_conv2d_forward,
    "aten::_use_cudnn_ctc_loss": use_cudnn_ctc_loss,
    "aten::_use_cudnn_ctc_loss.Tensor": use_cudnn_ctc_loss_tensor,
    "aten::_use_miopen_ctc_loss": use_miopen_ctc_loss,
    "aten::_use_miopen_ctc_loss.Tensor": use_miopen_ctc_loss,
    "aten::_cudnn_ctc_loss": cudnn_ctc_loss,
    "aten::_cudnn_ctc_loss.Tensor": cudnn_ctc_loss,
    "aten::_ctc_loss": ctc_loss,
    "aten::_ctc_loss_backward": ctc_loss_backward,
    "aten::_ctc_loss_backward.Tensor": ctc_loss_backward,
    "aten::cudnn_grid_sampler": cudnn_grid_sampler,
    "aten::cudnn_grid_sampler_backward": cudnn_grid_sampler_backward,
    "aten::batch_norm_stats": batch_norm_stats,
    "aten::batch_norm_gather_stats": batch_norm_gather_stats,
    "aten::batch_norm_gather_stats_with_counts": batch_norm_gather_stats_with_counts,
    "aten::batch_norm_elemt": batch_norm_elemt,
    "aten::batch_norm_backward_reduce": batch_norm_backward_reduce,
    "aten::batch_norm_backward_elemt": batch_norm_backward_elemt,
    "aten::_transform_bias_rescale_qkv": transform_bias_rescale_qkv,
    "aten::_masked_softmax": masked_softmax,
}


def _fake_computable(name: str) -> bool:
    """Whether FakeTensorMode can already compute the op: a kernel it can use, a decomposition, a meta
    function, or a registered fake implementation."""
    if any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in COMPUTABLE_KEYS):
        return True
    func = overload_of(name)
    if func is None:
        return True  # not an op of this build: nothing reaches it
    from torch._decomp import decomposition_table, meta_table
    from torch._subclasses.fake_impls import op_implementations_checks

    return (func in decomposition_table or func in meta_table
            or any(applies(func) for applies, _ in op_implementations_checks)
            or torch._library.simple_registry.singleton.find(name).fake_impl.kernel is not None
            or torch._library.utils.can_generate_trivial_fake_impl(func))  # returns None, or its out= args


def cuda_only_ops(table: CudaOpTable) -> list[str]:
    """Ops with a CUDA kernel in the CUDA build that this build cannot compute on fake tensors."""
    here = set(torch._C._dispatch_get_all_op_names())
    return sorted(name for name, keys in table.ops.items()
                  if CUDA in keys and name in here and not name.startswith(LEFT_TO_OTHERS)
                  and not _fake_computable(name))


def _returns_nothing_in_place(name: str) -> bool:
    """An op that only mutates its arguments (the fused optimizers: `_fused_adagrad_`, `_fused_sgd_`, ...):
    its outputs are its inputs, whose metadata it keeps, so a fake needs do nothing."""
    func = overload_of(name)
    return (func is not None and not func._schema.returns
            and any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments))


def _in_place_no_op(*args, **kwargs) -> None:
    return None


def _unsupported(name: str) -> Callable:
    def fake(*args, **kwargs):
        raise CaptureError(f"{name} runs only as a CUDA kernel and kernelcast has no fake implementation of it "
                           "yet (capture/cuda_only.py): this step cannot be captured without a GPU")

    return fake


def _out_arguments(func) -> list[str]:
    """The names of an overload's out= arguments (keyword-only, written: `Tensor(a!) out`)."""
    return [a.name for a in func._schema.arguments
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def out_variant_fake(name: str, functional: Callable) -> Callable | None:
    """A fake for an out= overload (Inductor's generated code calls `_scaled_mm.out`, `mm.out`, ...: issue 32):
    the functional overload's result on the same fakes, the out= tensors resized to it and returned, as
    aten's out= convention has it (at::native::resize_output). None for an op that is not an out= overload."""
    func = overload_of(name)
    if func is None:
        return None
    outs = _out_arguments(func)
    if not outs:
        return None

    def fake(*args, **kwargs):
        given = {n: kwargs.pop(n) for n in outs if n in kwargs}
        result = functional(*args, **kwargs)
        results = result if isinstance(result, tuple) else (result,)
        for out_name, value in zip(outs, results):
            out = given.get(out_name)
            if out is not None and isinstance(value, torch.Tensor):
                out.resize_(value.shape)
        written = tuple(given.get(n) for n in outs)
        return written[0] if len(written) == 1 else written

    return fake


def _functional_of(name: str, fakes: dict[str, Callable]) -> Callable | None:
    """The functional overload of an out= op, where FakeTensorMode can compute it (or FAKES has a fake): the
    OpOverloadPacket's default."""
    base = name.split(".")[0]
    if base in fakes:
        return fakes[base]
    func = overload_of(base)
    return func if func is not None and _fake_computable(base) else None


@contextlib.contextmanager
def cuda_only_fakes(table: CudaOpTable) -> Iterator[None]:
    """Fake implementations of the CUDA-only ops (and of the ops in FAKES), for the length of the capture: an
    out= overload whose functional form can be computed gets that form's result in its out tensors."""
    here = set(torch._C._dispatch_get_all_op_names())
    fakes = {name: fn for name, fn in FAKES.items() if table.has_cuda_kernel(name) and name in here}
    for name in cuda_only_ops(table):
        if name in fakes:
            continue
        functional = _functional_of(name, fakes) if "." in name else None
        out_fake = out_variant_fake(name, functional) if functional is not None else None
        fakes[name] = out_fake or (_in_place_no_op if _returns_nothing_in_place(name) else _unsupported(name))
    if not fakes:
        yield
        return
    lib = torch.library.Library("aten", "FRAGMENT")
    try:
        for name, fake in fakes.items():
            _register_fake(name, fake, lib)
        yield
    finally:
        lib._destroy()


# torch >= 2.12 lets a fake override an op's Meta kernel (register_fake's allow_override); earlier builds refuse
# with this message (torch 2.11 on the H200 machine: `aten::_ctc_loss already has an DispatchKey::Meta
# implementation`, which failed every capture there).
_HAS_META_MESSAGE = "already has an DispatchKey::Meta implementation"


def _register_fake(name: str, fake: Callable, lib: torch.library.Library) -> None:
    """Register `fake` for the op; where this torch refuses because the op has a Meta kernel of its own, keep
    that kernel (it computes the op's output on fake tensors; only the shapes FakeTensorMode would not infer
    from data are then the build's)."""
    try:
        torch.library.register_fake(name, fake, lib=lib)
    except RuntimeError as exc:
        if _HAS_META_MESSAGE not in str(exc):
            raise
