"""Recurrent layers: cuDNN's RNN forward and backward, the fused LSTM/GRU cells, packed-sequence backward.

FLOPs are the gate GEMMs (2 FLOPs per multiply-add) plus the cell's pointwise math; bytes are every device
input read once and every output written once, plus the gate pre-activations cuDNN writes after each layer's
input GEMM and reads back step by step. Work items follow how CUDA launches them.

cuDNN (`_cudnn_rnn`, `_cudnn_rnn_backward`). PyTorch picks the algorithm per call (ATen native/cudnn/RNN.cpp
`get_algo`): PERSIST_STATIC_SMALL_H for small hidden sizes (forward: RNN_TANH/RELU <= 384, LSTM/GRU <= 192;
backward: 256 and 128) on unpacked, non-double input; PERSIST_STATIC for fp16 one-layer unidirectional RNNs
whose sizes are multiples of 128 on large GPUs; STANDARD otherwise, and always with projections or packed input.
Launches, read off the H200's kernel lists (torch 2.11, cuDNN 9.19, validation/zoo_measured.json.gz):
- STANDARD forward, per layer and direction: the input GEMM, then per time step one recurrent GEMM and one
  elementwise cell kernel. gru_bidirectional_forward (T=200, 2 layers, 2 directions): 4 + 200*2*2*2 = 1604 of
  1606 measured (2 memsets before layer 1's GEMMs are not modelled); lstm_packed_forward (T=300, 1 layer, 2
  directions): 2 + 1200, plus 2 copies (h and c) at each of the 15 batch-size changes of the reverse
  direction, 30: 1232 measured.
- A unidirectional stack of several layers runs as a wavefront: each layer's input GEMM is issued per chunk
  of RNN_WAVEFRONT_CHUNK_STEPS steps (lstm_train, T=128, 2 layers: a GEMM every 16 steps, 8 per layer,
  528 launches + the input's contiguous copy = 529 measured). The chunk length is one measurement at T=128,
  H=512, B=32: scripts/probe_rnn.py sweeps T, layers, directions, hidden size and batch to pin it.
- STANDARD backward, per layer and direction: per step an elementwise kernel, a memset and the recurrent data
  GEMM; per chunk two input-gradient GEMMs and a memset; then the weight gradients: the bias reduction, three
  GEMMs and two helpers (memsets or split-K reductions). lstm_train: 768 + 48 + 12, plus ATen's zeros for the
  missing hy/cy gradients, the copies of the batch-first input and output gradient and the zeroed weight
  gradient buffer: 834 measured.
- Persistent algorithms, per layer and direction: forward the input GEMM and one persistent kernel;
  backward an elementwise kernel, the persistent kernel and the input-gradient GEMM, then the same six weight
  gradient launches. rnn_tanh_train (H=128, small-h): 2 forward, 3 + 6 + 2 ATen zeros = 11 backward measured.
Assumed without a measurement: GRU and RNN backward launch per step as the LSTM does; a dropout between
layers (training, dropout > 0) adds one kernel per layer output and chunk; packed unidirectional layers copy
no hidden state at batch-size changes.
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord, TensorMeta

from .common import arg, bytes_read, bytes_written, row_major
from .registry import Cost, CostContext, register

# cudnnRNNMode_t -> gates per hidden unit (ATen native/cudnn/RNN.cpp _num_linear_layers / 2).
RNN_TANH, RNN_RELU, LSTM, GRU = 1, 0, 2, 3
GATES = {RNN_RELU: 1, RNN_TANH: 1, LSTM: 4, GRU: 3}
# Pointwise FLOPs per hidden unit per step of one cell: the two bias adds per gate, the activations and the
# state update. LSTM: 8 bias adds, 3 sigmoids + 2 tanh, c = f*c + i*g (3), h = o*tanh(c) (1) = 17.
# GRU: 6 bias adds, 2 sigmoids, n = tanh(x_n + r*h_n) (3), h = (1-z)*n + z*h (4) = 15. RNN: 2 bias adds + 1.
CELL_FLOPS_PER_HIDDEN = {RNN_RELU: 3, RNN_TANH: 3, LSTM: 17, GRU: 15}
CELL_BACKWARD_FLOPS_FACTOR = 2  # a pointwise backward reads the saved gates and writes two gradients per one

# get_algo's thresholds (ATen native/cudnn/RNN.cpp use_rnn_persist_small_h, use_persist_*_heuristics).
SMALL_H_FORWARD = {RNN_RELU: 384, RNN_TANH: 384, LSTM: 192, GRU: 192}
SMALL_H_BACKWARD = {RNN_RELU: 256, RNN_TANH: 256, LSTM: 128, GRU: 128}
PERSIST_MAX_HIDDEN, PERSIST_SIZE_MULTIPLE = 1024, 128
PERSIST_MIN_SMS = 98  # `prop->multiProcessorCount >= 98` (sm_80+; sm_86 parts all have fewer SMs)
PERSIST_MAX_BATCH, PERSIST_BATCH_MULTIPLE = 128, 8
PERSIST_RNN_LARGE_BATCH, PERSIST_RNN_LARGE_HIDDEN = 96, 896

RNN_WAVEFRONT_CHUNK_STEPS = 16  # measured, see the module docstring
STEP_LAUNCHES_FORWARD = 2  # recurrent GEMM + elementwise cell
STEP_LAUNCHES_BACKWARD = 3  # elementwise cell backward + memset + recurrent data GEMM
CHUNK_LAUNCHES_BACKWARD = 3  # two input-gradient GEMMs + a memset
PERSIST_LAUNCHES_FORWARD = 2  # input GEMM + persistent kernel
PERSIST_LAUNCHES_BACKWARD = 3  # elementwise backward + persistent kernel + input-gradient GEMM
WEIGHT_GRAD_LAUNCHES = 6  # bias reduction + 3 GEMMs + 2 memsets / split-K reductions
DROPOUT_LAUNCHES_PER_CHUNK = 1  # assumed: cuDNN drops a layer's output chunk in one kernel


def _time_major(t: TensorMeta, batch_first: bool) -> TensorMeta:
    """The (T, B, F) view cuDNN is given of a batch-first (B, T, F) tensor."""
    if not batch_first or len(t.shape) != 3:
        return t
    return TensorMeta((t.shape[1], t.shape[0], t.shape[2]), t.dtype, (t.stride[1], t.stride[0], t.stride[2]),
                      t.device)


def _copies_to_contiguous(t: TensorMeta | None, batch_first: bool, packed: bool) -> int:
    """One copy kernel where ATen calls .contiguous() on a tensor that is not (time-major for unpacked input)."""
    if t is None or t.numel <= 1:
        return 0
    return 0 if row_major(t if packed else _time_major(t, batch_first)) else 1


class RnnShape:
    """The sizes of one cuDNN RNN call, from the arguments of _cudnn_rnn / _cudnn_rnn_backward."""

    def __init__(self, op: OpRecord) -> None:
        a = op.args
        x = arg(op, "input")
        self.mode = int(a["mode"])
        self.hidden = int(a["hidden_size"])
        self.proj = int(a.get("proj_size") or 0)
        self.layers = int(a["num_layers"])
        self.directions = 2 if a["bidirectional"] else 1
        self.batch_first = bool(a["batch_first"])
        self.batch_sizes = tuple(int(b) for b in (a.get("batch_sizes") or ()))
        self.packed = bool(self.batch_sizes)
        if self.packed:
            self.steps, self.batch, self.rows = len(self.batch_sizes), self.batch_sizes[0], x.shape[0]
        else:
            t_dim, b_dim = (1, 0) if self.batch_first else (0, 1)
            self.steps, self.batch = x.shape[t_dim], x.shape[b_dim]
            self.rows = self.steps * self.batch
        self.input_size = x.shape[-1]
        self.dtype = x.dtype
        self.dropout = float(a.get("dropout") or 0.0)
        self.train = bool(a.get("train"))
        self.has_bias = int(a.get("weight_stride0") or 4) - (1 if self.proj else 0) >= 4
        self.gates = GATES.get(self.mode, 1)

    @property
    def out_size(self) -> int:
        return self.proj or self.hidden

    def layer_input(self, layer: int) -> int:
        return self.input_size if layer == 0 else self.out_size * self.directions

    def chunks(self) -> int:
        """Input GEMMs per layer and direction: one, or one per wavefront chunk of a unidirectional stack."""
        if self.layers > 1 and self.directions == 1:
            return math.ceil(self.steps / RNN_WAVEFRONT_CHUNK_STEPS)
        return 1

    def batch_shrinks(self) -> int:
        return sum(1 for a, b in zip(self.batch_sizes, self.batch_sizes[1:]) if b < a)

    def algo(self, forward: bool, ctx: CostContext) -> str:
        """ATen native/cudnn/RNN.cpp get_algo."""
        if self.proj:
            return "standard"
        if not self.packed:
            small_h = SMALL_H_FORWARD if forward else SMALL_H_BACKWARD
            if self.dtype != "float64" and self.hidden <= small_h.get(self.mode, 0):
                return "persist_small_h"
            if self.dtype == "float16" and self._persist_common() and self._persist_device(ctx):
                return "persist_static"
        return "standard"

    def _persist_common(self) -> bool:
        return (self.layers == 1 and self.hidden <= PERSIST_MAX_HIDDEN and self.directions == 1
                and self.hidden % PERSIST_SIZE_MULTIPLE == 0 and self.input_size % PERSIST_SIZE_MULTIPLE == 0)

    def _persist_device(self, ctx: CostContext) -> bool:
        if ctx.sm_count < PERSIST_MIN_SMS or self.mode == GRU:
            return False
        fits = self.batch % PERSIST_BATCH_MULTIPLE == 0 and self.batch <= PERSIST_MAX_BATCH
        if self.mode == LSTM:
            return fits
        return fits and (self.batch < PERSIST_RNN_LARGE_BATCH or self.hidden < PERSIST_RNN_LARGE_HIDDEN)

    # -- math ------------------------------------------------------------------------------------------
    def gemm_flops(self) -> float:
        """Forward: the input and recurrent GEMMs of every layer and direction (and LSTM projections)."""
        total = 0.0
        for layer in range(self.layers):
            per_row = self.gates * self.hidden * (self.layer_input(layer) + self.out_size)
            per_row += self.hidden * self.proj if self.proj else 0
            total += 2.0 * self.rows * per_row * self.directions
        return total

    def cell_flops(self) -> float:
        return float(self.rows * self.hidden * CELL_FLOPS_PER_HIDDEN.get(self.mode, 3) * self.layers
                     * self.directions)

    def gate_bytes(self, itemsize: int) -> float:
        """Gate pre-activations of every layer and direction: written by the input GEMM, read step by step."""
        return float(self.rows * self.gates * self.hidden * self.layers * self.directions * itemsize)


def _rnn_cost(op: OpRecord, flops: float, extra_bytes: float, kernels: int, shape: RnnShape) -> Cost:
    # cuDNN's tensor-core switch for RNNs is torch.backends.cudnn.allow_tf32, as for convolutions: "conv" math.
    return Cost(flops=flops, bytes_read=bytes_read(op) + extra_bytes, bytes_written=bytes_written(op) + extra_bytes,
                kernels=kernels, math="conv", dtype=shape.dtype, kind="")


def forward_launches(s: RnnShape, ctx: CostContext) -> int:
    """cuDNN's launches for one forward call (see the module docstring)."""
    if s.algo(True, ctx) != "standard":
        return PERSIST_LAUNCHES_FORWARD * s.layers * s.directions
    per_direction = s.chunks() + STEP_LAUNCHES_FORWARD * s.steps
    launches = per_direction * s.layers * s.directions
    if s.packed and s.directions == 2:
        launches += s.batch_shrinks() * (2 if s.mode == LSTM else 1) * s.layers
    if s.train and s.dropout > 0:
        launches += DROPOUT_LAUNCHES_PER_CHUNK * (s.layers - 1) * s.chunks() * s.directions
    return launches


@register("aten._cudnn_rnn")
def cudnn_rnn(op: OpRecord, ctx: CostContext) -> Cost:
    s = RnnShape(op)
    x = arg(op, "input")
    weights = op.args.get("weight") or ()
    # _cudnn_rnn copies a non-contiguous input; without a flat weight buffer it zeroes one and copies each in.
    aten_kernels = _copies_to_contiguous(x, s.batch_first, s.packed)
    if op.args.get("weight_buf") is None:
        aten_kernels += 1 + len(weights)
    itemsize = x.itemsize
    return _rnn_cost(op, s.gemm_flops() + s.cell_flops(), s.gate_bytes(itemsize),
                     forward_launches(s, ctx) + aten_kernels, s)


def backward_launches(s: RnnShape, ctx: CostContext, weights: bool) -> int:
    if s.algo(False, ctx) != "standard":
        launches = PERSIST_LAUNCHES_BACKWARD * s.layers * s.directions
    else:
        per_direction = STEP_LAUNCHES_BACKWARD * s.steps + CHUNK_LAUNCHES_BACKWARD * s.chunks()
        launches = per_direction * s.layers * s.directions
        if s.train and s.dropout > 0:
            launches += DROPOUT_LAUNCHES_PER_CHUNK * (s.layers - 1) * s.chunks() * s.directions
    if weights:
        bias_launches = 0 if s.has_bias else 1
        launches += (WEIGHT_GRAD_LAUNCHES - bias_launches) * s.layers * s.directions
    return launches


def _backward_aten_kernels(op: OpRecord, s: RnnShape, weights: bool) -> int:
    """What ATen's _cudnn_rnn_backward runs around cuDNN: zeros for each missing output gradient, .contiguous()
    copies of the input (twice: data and weight passes) and output gradient, and the zeroed dw buffer."""
    a = op.args
    kernels = (a.get("grad_output") is None) + (a.get("grad_hy") is None)
    kernels += a.get("cx") is not None and a.get("grad_cy") is None
    x = arg(op, "input")
    x_copy = _copies_to_contiguous(x, s.batch_first, s.packed)
    kernels += x_copy * (2 if weights else 1)
    grad_output = a.get("grad_output")
    if isinstance(grad_output, TensorMeta):
        kernels += _copies_to_contiguous(grad_output, s.batch_first, s.packed)
    else:  # zeros_like(output) is row-major (B, T, F): batch-first, its time-major view is copied too
        kernels += s.batch_first and not s.packed and s.steps > 1 and s.batch > 1
    for name in ("grad_hy", "grad_cy"):
        g = a.get(name)
        if isinstance(g, TensorMeta) and g.numel > 1 and not row_major(g):
            kernels += 1
    return int(kernels) + (1 if weights else 0)


@register("aten._cudnn_rnn_backward")
def cudnn_rnn_backward(op: OpRecord, ctx: CostContext) -> Cost:
    s = RnnShape(op)
    mask = tuple(op.args.get("output_mask") or (True, True, True, True))
    weights = bool(mask[3])
    gemm = s.gemm_flops()  # data gradients: the same GEMM volume as forward
    flops = gemm * (2 if weights else 1) + s.cell_flops() * CELL_BACKWARD_FLOPS_FACTOR
    kernels = backward_launches(s, ctx, weights) + _backward_aten_kernels(op, s, weights)
    return _rnn_cost(op, flops, s.gate_bytes(arg(op, "input").itemsize), kernels, s)


# -- fused cells (nn.LSTMCell / nn.GRUCell and the native RNN path on CUDA: ATen native/cuda/RNN.cu) -------

def _cell(op: OpRecord, hidden: TensorMeta, mode: int, kernels: int, backward: bool = False) -> Cost:
    flops = hidden.numel * CELL_FLOPS_PER_HIDDEN[mode] * (CELL_BACKWARD_FLOPS_FACTOR if backward else 1)
    return Cost(flops=float(flops), bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=kernels,
                dtype=hidden.dtype, kind="pointwise")


@register("aten._thnn_fused_lstm_cell")
def fused_lstm_cell(op: OpRecord, ctx: CostContext) -> Cost:
    """One kernel: gates, bias adds, the new c and h (lstm_cell_forward)."""
    return _cell(op, arg(op, "cx"), LSTM, 1)


@register("aten._thnn_fused_lstm_cell_backward_impl")
def fused_lstm_cell_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """One kernel, then grad_gates.sum(0) for the bias gradient (lstmcell_loop_train: 2 per call)."""
    return _cell(op, arg(op, "cx"), LSTM, 1 + bool(op.args.get("has_bias")), backward=True)


@register("aten._thnn_fused_gru_cell")
def fused_gru_cell(op: OpRecord, ctx: CostContext) -> Cost:
    return _cell(op, arg(op, "hx"), GRU, 1)


@register("aten._thnn_fused_gru_cell_backward")
def fused_gru_cell_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """One kernel, then a sum per bias gradient, input and hidden (grucell_loop_train: 3 per call)."""
    return _cell(op, arg(op, "grad_hy"), GRU, 1 + 2 * bool(op.args.get("has_bias")), backward=True)


@register("aten._pack_padded_sequence_backward")
def pack_padded_sequence_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """ATen native/PackedSequence.cpp: a zeroed gradient, then one copy per time step."""
    steps = arg(op, "batch_sizes").numel
    return Cost(bytes_read=bytes_read(op), bytes_written=2.0 * bytes_written(op), kernels=1 + steps,
                dtype=arg(op, "grad").dtype, kind="copy")
