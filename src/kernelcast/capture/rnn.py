"""Recurrent layers on fake CUDA as a CUDA build runs them: cuDNN RNNs, fused cells, packed sequences.

On CUDA, `aten::lstm` / `gru` / `rnn_tanh` / `rnn_relu` (CompositeImplicitAutograd, ATen native/RNN.cpp) hand
the whole layer stack to cuDNN through a DispatchStub when `use_cudnn(input)` holds; cuDNN's `_cudnn_rnn` runs
every layer, direction and time step, and autograd's backward is `_cudnn_rnn_backward`. A CPU-only build has
no kernel behind that stub, so the router sends these calls here, and they issue what CUDA's `_cudnn_impl`
(ATen native/cudnn/RNN.cpp) issues: the weight buffer nn.RNNBase flattened (`empty` + `set_` onto the
parameters' storage), then `_cudnn_rnn`. `flatten_parameters()` itself only runs where
`torch.backends.cudnn.is_acceptable` says yes, which a CPU build never does; during a capture it answers as a
CUDA build would, and `_cudnn_rnn_flatten_weight` lays the parameters out in one buffer as cuDNN does
(per layer and direction: w_ih, w_hh, b_ih, b_hh, in the module's order).

Ops a CPU build has no fake (meta) kernel for get one for the length of the capture: `_cudnn_rnn_backward`,
`_thnn_fused_gru_cell` and its backward (nn.GRUCell on CUDA). `_pack_padded_sequence_backward` (a
CompositeImplicitAutograd op reading its batch sizes on the host) is kept whole by a stand-in CUDA kernel
and recorded as one op (dynamic_shapes.py gives its output), and `_pad_packed_sequence` runs here as ATen does.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator
from unittest import mock

import torch
from torch._subclasses.fake_tensor import FakeTensor

from kernelcast import _fake_cuda
from kernelcast.costs.rnn import GRU, LSTM, RNN_RELU, RNN_TANH

aten = torch.ops.aten
_VF = torch._C._VariableFunctions

# cudnnRNNMode_t (cudnn_ops.h): the `mode` argument of _cudnn_rnn.
CUDNN_RNN_MODES = {"rnn_relu": 0, "rnn_tanh": 1, "lstm": 2, "gru": 3}
CUDNN_MODE_OF_MODULE = {"RNN_RELU": 0, "RNN_TANH": 1, "LSTM": 2, "GRU": 3}  # nn.RNNBase.mode -> cudnnRNNMode_t
# at::cudnn_is_acceptable (ATen native/Convolution.cpp) takes these; use_cudnn (native/RNN.cpp) adds bfloat16
# where CUDAHooks::supportsBFloat16RNNWithCuDNN holds: cuDNN >= 9.13 (torch >= 2.10 wheels ship 9.19) on sm >= 80.
CUDNN_RNN_DTYPES = (torch.float16, torch.float32, torch.float64)
CUDNN_BF16_RNN_MIN_SM = 80


def _sm(arch: str) -> int:
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 0


def use_cudnn(t: torch.Tensor, arch: str) -> bool:
    """Whether CUDA's RNN ops take cuDNN for this input (ATen native/RNN.cpp `use_cudnn`)."""
    if not torch._C._get_cudnn_enabled() or t.device.type != "cuda" or t.numel() == 0:
        return False
    return t.dtype in CUDNN_RNN_DTYPES or (t.dtype == torch.bfloat16 and _sm(arch) >= CUDNN_BF16_RNN_MIN_SM)


# -- the layer ops -----------------------------------------------------------------------------------------


def _weight_buf(params: list[torch.Tensor]) -> torch.Tensor | None:
    """try_get_weight_buf: the flat buffer the parameters live in, when they are the consecutive views
    flatten_parameters() made of it; None otherwise (then _cudnn_rnn copies them into a fresh buffer)."""
    first = params[0]
    storage, offset = first.untyped_storage(), 0
    for p in params:
        if (p.untyped_storage()._cdata != storage._cdata or p.storage_offset() != offset or not p.is_contiguous()
                or p.dtype != first.dtype):
            return None
        offset += p.numel()
    return first.new_empty((0,)).set_(storage, 0, (offset,), (1,))


def _copied_weight_buf(params: list[torch.Tensor]) -> torch.Tensor:
    """What _cudnn_rnn does with parameters that are not one flat buffer: zero a buffer, copy each in."""
    with torch.no_grad():
        buf = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
        offset = 0
        for p in params:
            buf[offset:offset + p.numel()].view_as(p).copy_(p)
            offset += p.numel()
    return buf


def _contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(tuple(shape)):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _autocast_eligible(t: torch.Tensor | None) -> bool:
    """at::autocast::is_eligible: a floating CUDA tensor other than float64."""
    return t is not None and t.device.type == "cuda" and t.is_floating_point() and t.dtype != torch.float64


def _cast_reflatten(params: list[torch.Tensor], weight_buf: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """ATen native/cudnn/AutocastRNN.cpp `_cudnn_rnn_cast_reflatten` under autocast, whatever its dtype: the
    weights copied (cast, autograd-exposed) into a fresh float16 flat buffer each call."""
    buf = torch.zeros(weight_buf.numel(), dtype=torch.float16, device=weight_buf.device)
    cast, offset = [], 0
    for w in params:
        view = buf.new_empty((0,)).set_(buf.untyped_storage(), offset, tuple(w.shape), _contiguous_strides(w.shape))
        view.copy_(w)
        cast.append(view)
        offset += w.numel()
    return cast, buf


def cudnn_rnn(mode: int, x: torch.Tensor, batch_sizes: list[int], hx: torch.Tensor, cx: torch.Tensor | None,
              params: list[torch.Tensor], has_biases: bool, num_layers: int, dropout: float, train: bool,
              bidirectional: bool, batch_first: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ATen native/cudnn/RNN.cpp `_cudnn_impl`: (output, hy, cy) from one `_cudnn_rnn` call, through the
    autocast wrapper CUDA registers for it when autocast is on."""
    hidden_size, proj_size = hx.shape[2], 0
    if cx is not None and cx.shape[2] != hx.shape[2]:  # an LSTM with projections
        hidden_size, proj_size = cx.shape[2], hx.shape[2]
    weight_buf = _weight_buf(params)
    if weight_buf is None:
        weight_buf = _copied_weight_buf(params)
    if torch.is_autocast_enabled("cuda") and _autocast_eligible(weight_buf) and weight_buf.dtype != torch.float16:
        with torch.autocast("cuda", enabled=False):
            params, weight_buf = _cast_reflatten(params, weight_buf)
            x, hx = (t.to(torch.float16) if _autocast_eligible(t) else t for t in (x, hx))
            cx = cx.to(torch.float16) if _autocast_eligible(cx) else cx
    weight_stride0 = (4 if has_biases else 2) + (1 if proj_size else 0)
    with torch.autocast("cuda", enabled=False):
        out = aten._cudnn_rnn.default(x, params, weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size,
                                      num_layers, batch_first, dropout, train, bidirectional, batch_sizes, None)
    return out[0], out[1], out[2]


# Argument names of torch._VF.lstm / gru / rnn_* (native_functions.yaml: lstm.input / lstm.data, ...).
UNPACKED_ARGS = ("input", "hx", "params", "has_biases", "num_layers", "dropout", "train", "bidirectional",
                 "batch_first")
PACKED_ARGS = ("data", "batch_sizes", "hx", "params", "has_biases", "num_layers", "dropout", "train",
               "bidirectional")


def _bind(args: tuple, kwargs: dict, names: tuple[str, ...]) -> tuple | None:
    """Positional arguments in schema order, or None when some are missing (torch then raises its own error)."""
    if len(args) > len(names):
        return None
    rest = names[len(args):]
    if any(n not in kwargs for n in rest):
        return None
    return (*args, *(kwargs[n] for n in rest))


class RnnRoutes:
    """Router entries for the RNN layer functions (torch._VF.*), the weight flattening and packed padding."""

    def __init__(self, arch: str, hints: Any, batch_sizes_of: Callable[[torch.Tensor, int], list[int]]) -> None:
        self.arch = arch
        self._hints = hints  # the recorder's ValueHints
        self._batch_sizes_of = batch_sizes_of  # a packed sequence's batch sizes on the host

    def routes(self) -> dict[Any, Callable]:
        return {
            _VF.lstm: self.lstm,
            _VF.gru: self._one_hidden("gru"),
            _VF.rnn_tanh: self._one_hidden("rnn_tanh"),
            _VF.rnn_relu: self._one_hidden("rnn_relu"),
            _VF._cudnn_rnn_flatten_weight: self.flatten_weight,
            _VF._pad_packed_sequence: self.pad_packed_sequence,
        }

    def _batch_sizes(self, data: torch.Tensor, batch_sizes: torch.Tensor) -> list[int]:
        return self._batch_sizes_of(batch_sizes, data.shape[0])

    def lstm(self, func, args, kwargs):
        # (data, batch_sizes, (hx, cx), params, ...) is a packed sequence; (input, (hx, cx), params, ...) is not
        packed = "batch_sizes" in kwargs or (len(args) > 1 and isinstance(args[1], torch.Tensor))
        bound = _bind(args, kwargs, PACKED_ARGS if packed else UNPACKED_ARGS)
        if bound is None or not use_cudnn(bound[0], self.arch):
            return func(*args, **kwargs)
        args = bound
        if packed:
            data, batch_sizes, (hx, cx), params, has_biases, layers, dropout, train, bidirectional = args
            return cudnn_rnn(CUDNN_RNN_MODES["lstm"], data, self._batch_sizes(data, batch_sizes), hx, cx,
                             list(params), has_biases, layers, dropout, train, bidirectional, False)
        x, (hx, cx), params, has_biases, layers, dropout, train, bidirectional, batch_first = args
        return cudnn_rnn(CUDNN_RNN_MODES["lstm"], x, [], hx, cx, list(params), has_biases, layers, dropout, train,
                         bidirectional, batch_first)

    def _one_hidden(self, name: str) -> Callable:
        mode = CUDNN_RNN_MODES[name]

        def route(func, args, kwargs):
            # (data, batch_sizes, hx, params, ...) is a packed sequence; (input, hx, params, ...) is not
            packed = "batch_sizes" in kwargs or (len(args) > 2 and isinstance(args[2], torch.Tensor))
            bound = _bind(args, kwargs, PACKED_ARGS if packed else UNPACKED_ARGS)
            if bound is None or not use_cudnn(bound[0], self.arch):
                return func(*args, **kwargs)
            args = bound
            if packed:
                data, batch_sizes, hx, params, has_biases, layers, dropout, train, bidirectional = args
                out, hy, _ = cudnn_rnn(mode, data, self._batch_sizes(data, batch_sizes), hx, None, list(params),
                                       has_biases, layers, dropout, train, bidirectional, False)
                return out, hy
            x, hx, params, has_biases, layers, dropout, train, bidirectional, batch_first = args
            out, hy, _ = cudnn_rnn(mode, x, [], hx, None, list(params), has_biases, layers, dropout, train,
                                   bidirectional, batch_first)
            return out, hy

        return route

    def flatten_weight(self, func, args, kwargs):
        """_cudnn_rnn_flatten_weight: one zeroed buffer, each parameter copied in and re-pointed at its slice
        (ATen native/cudnn/RNN.cpp copy_weights_to_flat_buf_views). The buffer is the parameters' numbers
        back to back in the module's order: cuDNN's own layout, bias slots of bias-free RNNs aside."""
        weights = list(args[0])
        with torch.no_grad():
            buf = torch.zeros(sum(w.numel() for w in weights), dtype=weights[0].dtype, device=weights[0].device)
            offset = 0
            for w in weights:
                view = buf[offset:offset + w.numel()].view_as(w)
                view.copy_(w)
                w.set_(view)
                offset += w.numel()
        return buf

    def pad_packed_sequence(self, func, args, kwargs):
        """ATen native/PackedSequence.cpp `_pad_packed_sequence` (CompositeImplicitAutograd: CUDA runs its
        ops): a filled output, one copy per run of equal batch sizes, the lengths on the host."""
        data, batch_sizes, batch_first, padding_value, total_length = args
        sizes = self._batch_sizes(data, batch_sizes)
        max_batch, steps = sizes[0], len(sizes)
        max_steps = max(total_length, steps) if total_length > 0 else steps
        feature = tuple(data.shape[1:])
        output = torch.full((max_steps, max_batch, *feature), padding_value, dtype=data.dtype, device=data.device)
        lengths = [0] * max_batch
        offset, prev_batch, prev_i = 0, max_batch, 0
        for i in range(steps + 1):
            batch = sizes[i] if i != steps else 0
            if batch != prev_batch:
                rows = prev_batch * (i - prev_i)
                block = data[offset:offset + rows].view(i - prev_i, prev_batch, *feature)
                output[prev_i:i, :prev_batch].copy_(block)
                offset += rows
                prev_i = i
            for j in range(batch, prev_batch):
                lengths[j] = i
            prev_batch = batch
        lengths_t = torch.tensor(lengths, dtype=torch.int64)
        self._hints.set(lengths_t, _cpu_tensor(lengths))
        return (output.transpose(0, 1) if batch_first else output), lengths_t


def _cpu_tensor(values: list[int]) -> torch.Tensor:
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        return torch.tensor(values, dtype=torch.int64)


# -- fake kernels for the length of a capture ------------------------------------------------------------


# cuDNN's reserve space in training (cudnnGetRNNTempSpaceSizes; _cudnn_rnn returns it and autograd keeps it for
# the backward): (factor x layers - 1) x directions x rows x hidden x item size + 256 bytes, rows the time steps
# times the batch (a packed input: the sum of its batch sizes). Torch's meta kernel gives it 0 bytes. Measured on
# the H200 (cuDNN 9.19, scripts/device/probe_rnn_memory.py; scripts/fit/fit_rnn_memory.py checks it): exact on 102 of 108
# training configurations (12 of them packed); 6 bf16 ones with batches of 1-8 or 8 time steps had reserves
# 20-630% larger than it.
RESERVE_FACTOR = {RNN_RELU: 2, RNN_TANH: 2, LSTM: 6, GRU: 7}  # per layer, by cudnnRNNMode_t
RESERVE_EXTRA_BYTES = 256


def cudnn_rnn_rows(input_shape: tuple, batch_first: bool, batch_sizes) -> tuple[int, int, int]:
    """(time steps, batch, rows = steps x batch) of a _cudnn_rnn input; packed: rows is the sum of its batch
    sizes, the batch the first of them."""
    if batch_sizes:
        return len(batch_sizes), int(batch_sizes[0]), int(sum(batch_sizes))
    if len(input_shape) == 2:  # unbatched
        return input_shape[0], 1, input_shape[0]
    steps, batch = (input_shape[1], input_shape[0]) if batch_first else (input_shape[0], input_shape[1])
    return steps, batch, steps * batch


def cudnn_rnn_reserve_bytes(mode: int, hidden: int, layers: int, bidirectional: bool, rows: int,
                            itemsize: int) -> int:
    """Bytes of cuDNN's training reserve space (RESERVE_FACTOR's rule)."""
    directions = 2 if bidirectional else 1
    factor = RESERVE_FACTOR.get(mode, RESERVE_FACTOR[LSTM])
    return (factor * layers - 1) * directions * rows * hidden * itemsize + RESERVE_EXTRA_BYTES


def cudnn_rnn_with_cuda_layout(func, args, kwargs):
    """The recorder's handler for `_cudnn_rnn`: torch's meta kernel returns a batch-first output contiguous,
    where CUDA writes it time-major and returns it transposed (`output.transpose_(0, 1)`), which decides
    whether later ops copy it (a linear on it takes matmul's reshape copy, not addmm); and an empty reserve,
    where CUDA's training call returns cuDNN's reserve space (cudnn_rnn_reserve_bytes), which autograd keeps
    until the backward has run."""
    out = func(*args, **kwargs)
    # _cudnn_rnn(input, weight, weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size, num_layers,
    #            batch_first, dropout, train, bidirectional, batch_sizes, dropout_state)
    mode, hidden, _, layers, batch_first, _, train, bidirectional, batch_sizes = args[6:15]
    output = out[0]
    if batch_first and not batch_sizes and output.dim() == 3:
        b, t, f = output.shape
        output = torch.empty_strided((b, t, f), (f, b * f, 1), dtype=output.dtype, device=output.device)
        out = (output, *out[1:])
    if train:
        rows = cudnn_rnn_rows(tuple(args[0].shape), batch_first, batch_sizes)[2]
        reserve = out[3].new_empty((cudnn_rnn_reserve_bytes(mode, hidden, layers, bidirectional, rows,
                                                            args[0].element_size()),), dtype=torch.uint8)
        out = (*out[:3], reserve, *out[4:])
    return out, None


def _cudnn_rnn_backward_meta(input, weight, weight_stride0, weight_buf, hx, cx, output, grad_output, grad_hy,
                             grad_cy, mode, hidden_size, proj_size, num_layers, batch_first, dropout, train,
                             bidirectional, batch_sizes, dropout_state, reserve, output_mask):
    """Shapes of `_cudnn_rnn_backward` (ATen native/cudnn/RNN.cpp): dx laid out as cuDNN writes it (time
    major, transposed back for batch_first), dhx, dcx, and one gradient per weight."""
    if grad_output is None and grad_hy is None and grad_cy is None:
        return None, None, None, [None] * len(weight)
    if batch_first and not batch_sizes:
        b, t = input.shape[0], input.shape[1]
        dx = input.new_empty((t, b, *input.shape[2:])).transpose(0, 1)
    else:
        dx = input.new_empty(input.shape)
    dhx = hx.new_empty(hx.shape)
    dcx = cx.new_empty(cx.shape) if cx is not None else None
    dw = [w.new_empty(w.shape) for w in weight] if output_mask[3] else []
    return dx, dhx, dcx, dw


def _fused_gru_cell_meta(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """ATen native/cuda/RNN.cu `_thnn_fused_gru_cell_cuda`: hy and a (batch, 5 * hidden) workspace."""
    hidden = hx.shape[1]
    hy = hx.new_empty(hx.shape)
    workspace = hx.new_empty((hx.shape[0], 5 * hidden))
    return hy, workspace


def _fused_gru_cell_backward_meta(grad_hy, workspace, has_bias):
    """`_thnn_fused_gru_cell_backward_cuda`: input- and hidden-gate gradients, dhx, and the bias sums."""
    batch, hidden = grad_hy.shape
    grad_input_gates = grad_hy.new_empty((batch, 3 * hidden))
    grad_hidden_gates = grad_hy.new_empty((batch, 3 * hidden))
    grad_hx = grad_hy.new_empty((batch, hidden))
    grad_input_bias = grad_hy.new_empty((3 * hidden,)) if has_bias else None
    grad_hidden_bias = grad_hy.new_empty((3 * hidden,)) if has_bias else None
    return grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias


FAKE_KERNELS = {
    "_cudnn_rnn_backward": _cudnn_rnn_backward_meta,
    "_thnn_fused_gru_cell": _fused_gru_cell_meta,
    "_thnn_fused_gru_cell_backward": _fused_gru_cell_backward_meta,
}
# CompositeImplicitAutograd ops with a CUDA kernel in a CUDA build that read host data (or run as one kernel):
# a stand-in CUDA kernel keeps them whole, so the recorder sees and records them as CUDA runs them.
KEPT_WHOLE = ("_pack_padded_sequence_backward",)


def _stand_in(*args, **kwargs):
    raise RuntimeError("kernelcast: a stand-in CUDA kernel ran; fake tensors should never reach it")


def _is_acceptable(tensor: torch.Tensor) -> bool:
    """torch.backends.cudnn.is_acceptable as a CUDA build with cuDNN answers for a (fake) CUDA tensor."""
    return (torch._C._get_cudnn_enabled() and tensor.device.type == "cuda"
            and tensor.dtype in torch.backends.cudnn.CUDNN_TENSOR_DTYPES)


# A fake tensor's data pointer for identity checks (flatten_parameters asks whether parameters alias): its
# storage's identity, shifted clear of any offset inside it, plus the byte offset. Not an address.
FAKE_STORAGE_ADDRESS_SHIFT = 40


def _fake_data_ptr(tensor: torch.Tensor) -> int:
    storage = tensor.untyped_storage()._cdata
    return (storage << FAKE_STORAGE_ADDRESS_SHIFT) + tensor.storage_offset() * tensor.element_size()


def _get_cudnn_mode(mode: str) -> int:
    if mode not in CUDNN_MODE_OF_MODULE:
        raise Exception(f"Unknown mode: {mode}")  # noqa: TRY002  (what torch.backends.cudnn.rnn raises)
    return CUDNN_MODE_OF_MODULE[mode]


@contextlib.contextmanager
def cudnn_rnns_on_fake_cuda() -> Iterator[None]:
    """Fake kernels and stand-ins above, and cuDNN's answers for flatten_parameters() (is_acceptable, the
    mode numbers, parameters' data pointers told apart), while a capture runs. A CUDA build with a GPU has
    cuDNN, and FakeTensorMode runs the ops with no fake kernel on zero-filled real tensors there: then nothing
    is changed. A CUDA build without a GPU has cuDNN's kernels but no device to run that fallback on, so it
    takes the fakes as a CPU build does (kernelcast's fake CUDA shim is loaded in both)."""
    if not _fake_cuda.state().loaded:
        yield
        return
    import torch.backends.cudnn.rnn as cudnn_rnn_mod

    lib = torch.library.Library("aten", "IMPL")
    try:
        for name, fn in FAKE_KERNELS.items():
            if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta"):
                lib.impl(name, fn, "Meta")
        for name in KEPT_WHOLE:
            if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "CUDA"):
                lib.impl(name, _stand_in, "CUDA")
        with mock.patch.object(torch.backends.cudnn, "is_acceptable", _is_acceptable), \
                mock.patch.object(cudnn_rnn_mod, "get_cudnn_mode", _get_cudnn_mode), \
                mock.patch.object(FakeTensor, "data_ptr", _fake_data_ptr):
            yield
    finally:
        lib._destroy()
