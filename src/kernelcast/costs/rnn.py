"""Recurrent layers: cuDNN's RNN forward and backward, the fused LSTM/GRU cells, packed-sequence backward.

FLOPs are the gate GEMMs (2 FLOPs per multiply-add) plus the cell's pointwise math; bytes are every device
input read once and every output written once, plus the gate pre-activations cuDNN writes after each layer's
input GEMM and reads back step by step. Work items follow how CUDA launches them.

cuDNN (`_cudnn_rnn`, `_cudnn_rnn_backward`). PyTorch picks the algorithm per call (ATen native/cudnn/RNN.cpp
`get_algo`): PERSIST_STATIC_SMALL_H for small hidden sizes (forward: RNN_TANH/RELU <= 384, LSTM/GRU <= 192;
backward: 256 and 128) on unpacked, non-double input; PERSIST_STATIC for fp16 one-layer unidirectional RNNs
whose sizes are multiples of 128 on large GPUs; STANDARD otherwise, and always with projections or packed input.
cuDNN is closed source: what it launches is read off the H200 (torch 2.11, cuDNN 9.19) and stated here as
observed. Measured by scripts/device/probe_rnn.py (validation/probes/probe_rnn.json, 67 configurations: LSTM at
hidden 64-1024, 1-4 layers, 8-512 steps, batch 1-128, fp32/fp16/bf16, packed or not, dropout 0 or 0.2; GRU and
RNN_TANH at hidden 64-512 over 1-2 layers, both directions, packed or not), and by the zoo's rnn family
(validation/zoo_measured.json.gz). Outside those ranges the rules below extrapolate.

STANDARD forward, per layer and direction: the layer's input GEMM, then per step the recurrent GEMM and the
elementwise cell. A unidirectional stack of two or more layers runs as a wavefront and issues each layer's input
GEMM per chunk of steps: wavefront_chunks(). Measured at batch 32: 4 chunks (of T // 4 steps, one more for a
remainder: T=17 -> 5) for T = 8-100, 8 for T = 128 and 256, 16 for T = 512: the count is the power of two at or
below sqrt(T / 2), at least 4; at T = 128 it doubles with the batch above 32 (64: 16, 128: 32) and stays 8 below
(1-16). One layer, or both directions, take one input GEMM over the whole sequence. A packed bidirectional layer
copies 2 hidden-state slices at each batch-size change, whatever the mode (LSTM, GRU and RNN_TANH alike).
Dropout between layers (training): one mask kernel per call and one per chunk of each layer output that feeds
another (T=128, 2 layers: 1 + 8).
STANDARD backward, per layer and direction: per step the elementwise cell backward and the recurrent data GEMM
(GRU and RNN_TANH as LSTM); the input-gradient GEMM once, or for a unidirectional stack once per backward chunk:
backward_chunk_steps() (measured at batch 32: 4 steps for T = 8-100, 8 for T = 128-512; at T = 128: at least 128
rows a chunk for batch 1-16, at most 32 steps); then the weight gradients: the bias reduction, three GEMMs
(input weights, recurrent weights, the first step's) and two helpers (memsets or split-K reductions). fp32 data
GEMMs whose depth (gates x hidden) reaches 1024 are split-K kernels with a memset before each (LSTM at hidden
192 and GRU at 256, depth 768, take none; fp16/bf16 none; batch 1 runs a GEMV), and so are the chunked
input-gradient GEMMs of up to 128 rows (T = 8-100 at batch 32; at T >= 128 cuBLAS splits some and not others,
unmodelled: 0-32 items a call). Packed input: the weight
gradients of the recurrent weights run once per constant-batch segment (one GEMM more per batch-size change, two
for the reverse direction), and the hidden-state slices are copied at each change: per layer LSTM 2, GRU and
RNN_TANH 1 unidirectional; LSTM 5, GRU 3, RNN_TANH 1 bidirectional. Bidirectional: one gradient-accumulate kernel
per layer, and (STANDARD) a copy per hidden state (h, and c for LSTM). Dropout: one mask kernel per backward
chunk of each layer output that feeds another, and one more (T=128: 16 + 1).
Persistent algorithms, per layer and direction: forward the input GEMM and the persistent kernel (GRU: and a
bias kernel; gate width 4H or 3H above 512: and a memset); backward the cell backward, the persistent kernel and
the input-gradient GEMM, then the same six weight-gradient launches, and one accumulate kernel per layer when
bidirectional.
Not modelled (cuBLAS's kernel choices inside cuDNN, each a few launches a call or one kernel a step): a split-K
reduction after the forward recurrent GEMM at some sizes (LSTM hidden 384, RNN_TANH hidden 512, batch 32: one
more kernel a step), the memsets some forward input GEMMs take (0-4 a call), split-K memsets of GRU data GEMMs
at small batches (packed GRU at hidden 256: about one a step below batch 16), and a packed two-layer RNN_TANH's
extra input GEMMs.

Time (predict/calibrated.py, kind "cudnn_rnn"): each call's cost carries its launches as parts (RnnPart, in
Cost.key); the GEMMs are priced as GEMMs, the per-step kernels, the persistent kernels and the bias reduction by
the fit in the profile's `rnn` section (predict/rnn_time.py; scripts/fit/fit_rnn_times.py, from probe_rnn.json). On
the probe's own calls the whole pass is within 1.9% (forward) and 5.6% (backward) median, 18% and 26% worst; on
the zoo's cuDNN workloads, not used by the fit, within 0-6% (zoo lstm_train has the probe's base configuration).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from kernelcast.records import OpRecord, TensorMeta

from .common import arg, bytes_read, bytes_written, row_major
from .registry import Cost, CostContext, register

# cudnnRNNMode_t -> gates per hidden unit (ATen native/cudnn/RNN.cpp _num_linear_layers / 2).
RNN_TANH, RNN_RELU, LSTM, GRU = 1, 0, 2, 3
GATES = {RNN_RELU: 1, RNN_TANH: 1, LSTM: 4, GRU: 3}
MODE_NAMES = {RNN_RELU: "rnn_relu", RNN_TANH: "rnn_tanh", LSTM: "lstm", GRU: "gru"}
HIDDEN_STATES = {RNN_RELU: 1, RNN_TANH: 1, LSTM: 2, GRU: 1}  # h, and c for an LSTM
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

# Observed launch structure (see the module docstring for the measurements behind each).
MIN_WAVEFRONT_CHUNKS = 4  # forward chunks of a unidirectional stack: at least 4 ...
WAVEFRONT_CHUNK_STEPS_FACTOR = 2  # ... else the power of two at or below sqrt(T / 2)
WAVEFRONT_BATCH = 32  # ... times batch / 32 above a batch of 32
BACKWARD_CHUNK_STEPS_SHORT, BACKWARD_CHUNK_STEPS_LONG = 4, 8  # while the forward takes 4 chunks / more
BACKWARD_CHUNK_MIN_ROWS = 128  # steps x batch of a backward chunk, at least ...
BACKWARD_CHUNK_MAX_STEPS = 32  # ... within this many steps
STEP_LAUNCHES_FORWARD = 2  # recurrent GEMM + elementwise cell
STEP_LAUNCHES_BACKWARD = 2  # elementwise cell backward + recurrent data GEMM (+ SPLIT_K_MEMSET)
SPLIT_K_MIN_DEPTH = 1024  # fp32 data GEMMs at least this deep (gates x hidden) clear their output first ...
SPLIT_K_MAX_CHUNK_ROWS = 128  # ... and so do the input-gradient GEMMs of backward chunks up to this many rows
HALF_DTYPES = ("float16", "bfloat16")
WEIGHT_GRAD_GEMMS = 3  # input weights, recurrent weights, the first step's recurrent weights
WEIGHT_GRAD_HELPERS = 2  # memsets or split-K reductions
PACKED_FORWARD_COPIES_BIDIRECTIONAL = 2  # per batch-size change and layer, every mode
PACKED_BACKWARD_COPIES = {(LSTM, 1): 2, (GRU, 1): 1, (RNN_TANH, 1): 1, (RNN_RELU, 1): 1,
                          (LSTM, 2): 5, (GRU, 2): 3, (RNN_TANH, 2): 1, (RNN_RELU, 2): 1}
PERSIST_MEMSET_MIN_GATE_WIDTH = 513  # persistent forward: a memset when gates x hidden exceeds 512
DROPOUT_MASK_KERNELS = 1  # per call, forward and backward


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


def pow2_floor(x: float) -> int:
    return 1 << max(0, math.floor(math.log2(x))) if x >= 1 else 1


def wavefront_chunks(steps: int, batch: int) -> int:
    """Forward input GEMMs per layer of a unidirectional stack: chunks of steps // n steps (and a remainder),
    n = max(4, the power of two at or below sqrt(T / 2)) x max(1, batch / 32)."""
    n = max(MIN_WAVEFRONT_CHUNKS, pow2_floor(math.sqrt(steps / WAVEFRONT_CHUNK_STEPS_FACTOR)))
    n *= max(1.0, batch / WAVEFRONT_BATCH)
    chunk = max(1, int(steps // n))
    return math.ceil(steps / chunk)


def backward_chunk_steps(steps: int, batch: int) -> int:
    """Steps of a backward chunk of a unidirectional stack (one input-gradient GEMM each)."""
    short = max(MIN_WAVEFRONT_CHUNKS, pow2_floor(math.sqrt(steps / WAVEFRONT_CHUNK_STEPS_FACTOR))) == \
        MIN_WAVEFRONT_CHUNKS
    floor_steps = BACKWARD_CHUNK_STEPS_SHORT if short else BACKWARD_CHUNK_STEPS_LONG
    return min(BACKWARD_CHUNK_MAX_STEPS, max(floor_steps, math.ceil(BACKWARD_CHUNK_MIN_ROWS / max(batch, 1))))


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
        self.itemsize = x.itemsize
        self.dropout = float(a.get("dropout") or 0.0)
        self.train = bool(a.get("train"))
        self.has_bias = int(a.get("weight_stride0") or 4) - (1 if self.proj else 0) >= 4
        self.gates = GATES.get(self.mode, 1)

    @property
    def out_size(self) -> int:
        return self.proj or self.hidden

    @property
    def gate_width(self) -> int:
        return self.gates * self.hidden

    @property
    def layer_dirs(self) -> int:
        return self.layers * self.directions

    def layer_input(self, layer: int) -> int:
        return self.input_size if layer == 0 else self.out_size * self.directions

    @property
    def wavefront(self) -> bool:
        return self.layers > 1 and self.directions == 1

    def chunks(self) -> int:
        """Forward input GEMMs per layer and direction: one, or one per wavefront chunk."""
        return wavefront_chunks(self.steps, self.batch) if self.wavefront else 1

    def backward_chunks(self) -> int:
        """Input-gradient GEMMs per layer and direction: one, or one per backward chunk."""
        return math.ceil(self.steps / backward_chunk_steps(self.steps, self.batch)) if self.wavefront else 1

    def batch_shrinks(self) -> int:
        return sum(1 for a, b in zip(self.batch_sizes, self.batch_sizes[1:]) if b < a)

    def step_batches(self) -> Counter:
        """Steps per batch size (one size unless packed)."""
        return Counter(self.batch_sizes) if self.packed else Counter({self.batch: self.steps})

    def split_k_memset(self) -> bool:
        """Whether the backward data GEMMs clear their output first (fp32, depth gates x hidden >= 1024)."""
        return self.dtype not in HALF_DTYPES and self.gate_width >= SPLIT_K_MIN_DEPTH

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


# -- launches, as parts: what the work-item count sums and the time model prices --------------------------

@dataclass(frozen=True)
class RnnPart:
    """`count` runs of `kernels` identical GPU work items of one cuDNN RNN call; `shape` is what their time
    depends on: "gemm" (dtype, a_t, b_t, M, N, K); "step" (pass, mode, batch, hidden, dtype) for one step's
    kernels; "persist" (pass, mode, batch, hidden, steps, dtype) for one persistent kernel; "bias_grad" (mode,
    bytes read); "copy" and "pointwise" (bytes); "memset" ()."""

    what: str
    count: int
    kernels: int
    shape: tuple = ()

    @property
    def items(self) -> int:
        return self.count * self.kernels

    def as_key(self) -> tuple:
        return (self.what, self.count, self.kernels, *self.shape)


def part_from_key(key: tuple) -> RnnPart:
    return RnnPart(key[0], key[1], key[2], tuple(key[3:]))


def _gemm(count: int, dtype: str, a_t: bool, b_t: bool, m: int, n: int, k: int) -> RnnPart:
    return RnnPart("gemm", count, 1, (dtype, a_t, b_t, m, n, k))


def _steps(s: RnnShape, pass_: str, kernels: int) -> list[RnnPart]:
    """Per-step kernels of every layer and direction, grouped by batch size."""
    mode = MODE_NAMES.get(s.mode, "rnn_tanh")
    return [RnnPart("step", n * s.layer_dirs, kernels + (pass_ == "bwd" and batch > 1 and s.split_k_memset()),
                    (pass_, mode, batch, s.hidden, s.dtype))
            for batch, n in sorted(s.step_batches().items())]


def _dropout_parts(s: RnnShape, chunks: int) -> list[RnnPart]:
    if not (s.train and s.dropout > 0 and s.layers > 1):
        return []
    out_bytes = s.rows * s.out_size * s.directions * s.itemsize
    return [RnnPart("pointwise", DROPOUT_MASK_KERNELS, 1, (out_bytes,)),
            RnnPart("pointwise", (s.layers - 1) * s.directions * chunks, 1, (2 * out_bytes / max(chunks, 1),))]


def forward_parts(s: RnnShape, ctx: CostContext) -> list[RnnPart]:
    """cuDNN's launches for one forward call (see the module docstring)."""
    parts: list[RnnPart] = []
    algo = s.algo(True, ctx)
    chunks = 1 if algo != "standard" else s.chunks()
    chunk_rows = math.ceil(s.rows / chunks)
    for layer in range(s.layers):
        parts.append(_gemm(chunks * s.directions, s.dtype, False, True, chunk_rows, s.gate_width,
                           s.layer_input(layer)))
    mode = MODE_NAMES.get(s.mode, "rnn_tanh")
    if algo != "standard":
        parts.append(RnnPart("persist", s.layer_dirs, 1, ("fwd", mode, s.batch, s.hidden, s.steps, s.dtype)))
        if s.mode == GRU:  # persistRNN_addBias
            parts.append(RnnPart("pointwise", s.layer_dirs, 1, (s.rows * s.gate_width * s.itemsize,)))
        if s.gate_width >= PERSIST_MEMSET_MIN_GATE_WIDTH:
            parts.append(RnnPart("memset", s.layer_dirs, 1))
        return parts
    parts += _steps(s, "fwd", STEP_LAUNCHES_FORWARD)
    if s.packed and s.directions == 2:
        state_bytes = s.batch * s.hidden * s.itemsize
        parts.append(RnnPart("copy", s.batch_shrinks() * PACKED_FORWARD_COPIES_BIDIRECTIONAL * s.layers, 1,
                             (state_bytes,)))
    return parts + _dropout_parts(s, chunks)


def backward_parts(s: RnnShape, ctx: CostContext, weights: bool) -> list[RnnPart]:
    """cuDNN's launches for one backward call: data gradients, and the weight gradients when asked."""
    parts: list[RnnPart] = []
    algo = s.algo(False, ctx)
    mode = MODE_NAMES.get(s.mode, "rnn_tanh")
    chunks = 1 if algo != "standard" else s.backward_chunks()
    chunk_rows = math.ceil(s.rows / chunks)
    memset = algo == "standard" and s.split_k_memset() and chunk_rows <= SPLIT_K_MAX_CHUNK_ROWS
    for layer in range(s.layers):  # the input-gradient GEMMs (and their split-K memsets)
        parts.append(_gemm(chunks * s.directions, s.dtype, False, False, chunk_rows, s.layer_input(layer),
                           s.gate_width))
    if memset:
        parts.append(RnnPart("memset", chunks * s.layer_dirs, 1))
    if algo != "standard":
        parts.append(RnnPart("pointwise", s.layer_dirs, 1, (s.rows * s.gate_width * s.itemsize,)))  # cell bp1
        parts.append(RnnPart("persist", s.layer_dirs, 1, ("bwd", mode, s.batch, s.hidden, s.steps, s.dtype)))
    else:
        parts += _steps(s, "bwd", STEP_LAUNCHES_BACKWARD)
    if s.directions == 2:
        parts.append(RnnPart("pointwise", s.layers, 1, (s.rows * s.out_size * s.itemsize,)))  # accumulate
        if algo == "standard":
            parts.append(RnnPart("copy", s.layers * HIDDEN_STATES.get(s.mode, 1), 1,
                                 (s.batch * s.hidden * s.itemsize,)))
    if s.packed:
        state_bytes = s.batch * s.hidden * s.itemsize
        parts.append(RnnPart("copy", s.batch_shrinks() * s.layers
                             * PACKED_BACKWARD_COPIES.get((s.mode, s.directions), 1), 1, (state_bytes,)))
    if algo == "standard":
        parts += _dropout_parts(s, chunks)[1:]
        if s.train and s.dropout > 0 and s.layers > 1:
            parts.append(RnnPart("pointwise", DROPOUT_MASK_KERNELS, 1, (s.rows * s.out_size * s.itemsize,)))
    if weights:
        parts += _weight_grad_parts(s)
    return parts


def _weight_grad_parts(s: RnnShape) -> list[RnnPart]:
    """Per layer and direction: the bias reduction (when there is a bias), the input-weight GEMM, the
    recurrent-weight GEMM over steps 1.. (one per constant-batch segment when packed; the reverse direction of
    a packed layer two), the first step's, and two helpers."""
    parts = []
    segments = s.batch_shrinks() if s.packed else 0
    for layer in range(s.layers):
        for direction in range(s.directions):
            extra = segments * (direction + 1)
            parts.append(_gemm(1, s.dtype, True, False, s.gate_width, s.layer_input(layer), s.rows))
            parts.append(_gemm(1 + extra, s.dtype, True, False, s.gate_width, s.out_size,
                               max(1, (s.rows - s.batch) // (1 + extra))))
            parts.append(_gemm(WEIGHT_GRAD_GEMMS - 2, s.dtype, True, False, s.gate_width, s.out_size, s.batch))
    if s.has_bias:
        parts.append(RnnPart("bias_grad", s.layer_dirs, 1,
                             (MODE_NAMES.get(s.mode, "rnn_tanh"), s.rows * s.gate_width * s.itemsize)))
    parts.append(RnnPart("memset", WEIGHT_GRAD_HELPERS * s.layer_dirs, 1))
    return parts


def parts_items(parts: list[RnnPart]) -> int:
    return sum(p.items for p in parts)


def forward_launches(s: RnnShape, ctx: CostContext) -> int:
    return parts_items(forward_parts(s, ctx))


def backward_launches(s: RnnShape, ctx: CostContext, weights: bool) -> int:
    return parts_items(backward_parts(s, ctx, weights))


def _rnn_cost(op: OpRecord, flops: float, extra_bytes: float, parts: list[RnnPart], aten: list[RnnPart],
              shape: RnnShape) -> Cost:
    # cuDNN's tensor-core switch for RNNs is torch.backends.cudnn.allow_tf32, as for convolutions: "conv" math.
    everything = parts + aten
    return Cost(flops=flops, bytes_read=bytes_read(op) + extra_bytes, bytes_written=bytes_written(op) + extra_bytes,
                kernels=parts_items(everything), math="conv", dtype=shape.dtype, kind="cudnn_rnn",
                key=tuple(p.as_key() for p in everything if p.items))


@register("aten._cudnn_rnn")
def cudnn_rnn(op: OpRecord, ctx: CostContext) -> Cost:
    s = RnnShape(op)
    x = arg(op, "input")
    weights = op.args.get("weight") or ()
    # _cudnn_rnn copies a non-contiguous input; without a flat weight buffer it zeroes one and copies each in.
    aten = [RnnPart("copy", _copies_to_contiguous(x, s.batch_first, s.packed), 1, (2 * x.nbytes,))]
    if op.args.get("weight_buf") is None:
        weight_bytes = sum(w.nbytes for w in weights if isinstance(w, TensorMeta))
        aten += [RnnPart("memset", 1, 1), RnnPart("copy", len(weights), 1, (2 * weight_bytes / max(len(weights), 1),))]
    return _rnn_cost(op, s.gemm_flops() + s.cell_flops(), s.gate_bytes(x.itemsize), forward_parts(s, ctx), aten, s)


def _backward_aten_parts(op: OpRecord, s: RnnShape, weights: bool) -> list[RnnPart]:
    """What ATen's _cudnn_rnn_backward runs around cuDNN: zeros for each missing output gradient, .contiguous()
    copies of the input (twice: data and weight passes) and output gradient, and the zeroed dw buffer."""
    a = op.args
    x = arg(op, "input")
    zeros = (a.get("grad_output") is None) + (a.get("grad_hy") is None)
    zeros += a.get("cx") is not None and a.get("grad_cy") is None
    copies = _copies_to_contiguous(x, s.batch_first, s.packed) * (2 if weights else 1)
    grad_output = a.get("grad_output")
    if isinstance(grad_output, TensorMeta):
        copies += _copies_to_contiguous(grad_output, s.batch_first, s.packed)
    else:  # zeros_like(output) is row-major (B, T, F): batch-first, its time-major view is copied too
        copies += s.batch_first and not s.packed and s.steps > 1 and s.batch > 1
    for name in ("grad_hy", "grad_cy"):
        g = a.get(name)
        if isinstance(g, TensorMeta) and g.numel > 1 and not row_major(g):
            copies += 1
    weight_buf = a.get("weight_buf")
    dw_bytes = weight_buf.nbytes if isinstance(weight_buf, TensorMeta) else 0
    return [RnnPart("memset", int(zeros), 1), RnnPart("copy", int(copies), 1, (2 * x.nbytes,)),
            RnnPart("pointwise", 1 if weights else 0, 1, (dw_bytes,))]


@register("aten._cudnn_rnn_backward")
def cudnn_rnn_backward(op: OpRecord, ctx: CostContext) -> Cost:
    s = RnnShape(op)
    mask = tuple(op.args.get("output_mask") or (True, True, True, True))
    weights = bool(mask[3])
    gemm = s.gemm_flops()  # data gradients: the same GEMM volume as forward
    flops = gemm * (2 if weights else 1) + s.cell_flops() * CELL_BACKWARD_FLOPS_FACTOR
    return _rnn_cost(op, flops, s.gate_bytes(arg(op, "input").itemsize), backward_parts(s, ctx, weights),
                     _backward_aten_parts(op, s, weights), s)


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
