"""Device memory of a captured step: peak, resident and reserved bytes, where they go, and whether it fits.

The capture's MemoryTrace (records/memory.py) lists every CUDA storage the workload made and freed, in order,
from build() on: the build, the unrecorded warm-up step and the recorded step. Replaying them through the
caching allocator's model (allocator.py) gives what torch.cuda reports on a GPU:
- resident_memory_bytes: memory_allocated() when the recorded (steady-state) step starts;
- peak_memory_bytes: max_memory_allocated() over the step after reset_peak_memory_stats() at its start;
- reserved_memory_bytes: memory_reserved() after it.
Besides the tensors' own storages, the replay holds the workspaces CUDA libraries take from PyTorch's
allocator and keep (cublas_workspaces below). The verdict (`fits`) replays the same history against the
GPU's memory less the CUDA context's own share, which torch.cuda's counters never see.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections import defaultdict
from dataclasses import dataclass, field

from kernelcast.costs.elementwise import PREFIX_SUM_BYTES
from kernelcast.costs.losses import REDUCTION_MEAN, REDUCTION_NONE
from kernelcast.costs.pooling import LAYOUT_OPERANDS, layout_copied
from kernelcast.costs.reduce_config import global_reduce_temporaries, reduced_dims, reduces_fastest_dim
from kernelcast.costs.registry import DEFAULT_CONTEXT
from kernelcast.costs.tensor_iterator import index32_parts
from kernelcast.costs.rnn import GATES, LSTM
from kernelcast.devices import GPU
from kernelcast.records.memory import (ACTIVATION, BUFFER, CATEGORIES, STEP, TEMPORARY, WARMUP, WORKSPACE, Allocation,
                                     MemoryTrace, human_bytes)
from kernelcast.records import Capture, OpRecord, TensorMeta

from .allocator import CachingAllocator, OutOfMemory
from .conv_workspace import BACKWARD_OPS as CONV_BACKWARD_OPS, FORWARD_OPS as CONV_FORWARD_OPS, conv_workspace

# cuBLAS workspace per (cuBLAS handle, stream), allocated from the caching allocator the first time a thread
# runs a cuBLAS call on a stream and kept (cublas_handle_stream_to_workspace; freed only by
# torch._C._cuda_clearCublasWorkspaces). parseChosenWorkspaceSize (aten/src/ATen/cuda/CublasHandlePool.cpp):
# CUBLAS_WORKSPACE_CONFIG's default ":4096:8" = 32 MiB on Hopper and Blackwell (compute capability 9, 10, 12),
# else ":4096:2:16:8" = 2 x 4 MiB + 8 x 16 KiB.
CUBLAS_WORKSPACE_32MIB_MAJORS = (9, 10, 11, 12)
CUBLAS_WORKSPACE_LARGE = 4096 * 8 * 1024
CUBLAS_WORKSPACE_SMALL = 4096 * 1024 * 2 + 16 * 1024 * 8
# cuBLASLt's own workspace per (handle, stream) (cublaslt_handle_stream_to_workspace, getCUDABlasLtWorkspace):
# CUBLASLT_WORKSPACE_SIZE's default 1024 KiB, separate from cuBLAS's unless TORCH_CUBLASLT_UNIFIED_WORKSPACE=1.
CUBLASLT_WORKSPACE = 1024 * 1024
# Ops that call cuBLAS through a handle: matrix products (aten/src/ATen/native/cuda/Blas.cpp).
CUBLAS_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "addr", "_addmm_activation",
              "_scaled_mm", "_scaled_mm_v2", "_int_mm", "_grouped_mm", "linear"}
# Ops that take cuBLASLt's path: addmm with a 1-D bias and beta 1 (the bias and activation epilogue,
# gemm_and_bias in addmm_out_cuda_impl), _addmm_activation, and the scaled (fp8) matmuls.
CUBLASLT_OPS = {"_addmm_activation", "_scaled_mm", "_scaled_mm_v2"}

# The CUDA context's own device memory (the driver's context, PyTorch's kernels as they are loaded lazily, the
# cuBLAS/cuDNN handles' internal buffers), outside torch.cuda's counters. ASSUMPTION, not measured here: about
# 500 MB on H100/H200 class GPUs with lazy module loading (PyTorch PR #86509 measured 287 MB for a bare context
# with CUDA_MODULE_LOADING=LAZY, 667 MB without). scripts/device/fit_check.py measures it on a device.
CUDA_CONTEXT_BYTES = 512 * 1024 * 1024
CONTEXT_NOTE = ("the CUDA context's own memory (not in torch.cuda's counters) is taken as {mib:.0f} MiB "
                "(an assumption, not measured)")
CAPACITY_NOTE = ("capacity: the datasheet's {gb:.0f} GB (gpus.toml), at or below what the driver reports "
                 "as total on these parts")


@dataclass(frozen=True)
class Workspace:
    """A library workspace the step's ops keep in PyTorch's allocator."""

    kind: str  # "cuBLAS" or "cuBLASLt"
    thread: str  # "main" or "autograd" (backward runs on autograd's device thread: its own cuBLAS handle)
    stream: int
    nbytes: int
    first_op: int  # index of the recorded op that needs it first


@dataclass(frozen=True)
class PeakOp:
    index: int
    op: str
    phase: str
    module: str
    source: str


@dataclass(frozen=True)
class OutOfMemoryAt:
    """Where the replay against the GPU's capacity ran out of memory."""

    stage: str  # build / warmup / step
    op: PeakOp | None  # the op that asked (in the recorded step), else None
    requested_bytes: int
    segment_bytes: int  # the cudaMalloc that failed
    allocated_bytes: int
    reserved_bytes: int


@dataclass(frozen=True)
class Fit:
    """The out-of-memory verdict on one GPU."""

    fits: bool
    gpu: str
    capacity_bytes: int  # the GPU's memory
    context_bytes: int  # of it, the CUDA context's (assumed)
    usable_bytes: int  # capacity less context: what the caching allocator may reserve
    peak_reserved_bytes: int  # the allocator's high-water mark over build, warm-up and step
    oom: OutOfMemoryAt | None = None
    notes: tuple[str, ...] = ()

    @property
    def headroom_bytes(self) -> int:
        return self.usable_bytes - self.peak_reserved_bytes


@dataclass(frozen=True)
class MemoryFix:
    """A change that might make the step fit, with the memory re-predicted by capturing the step again with it
    (peak_bytes None: it could not be re-predicted, and note says why)."""

    name: str
    peak_bytes: int | None
    reserved_bytes: int | None  # the allocator's high-water mark on the GPU (cache released as it runs short)
    fits: bool | None
    step_time_us: float | None = None
    note: str = ""


@dataclass(frozen=True)
class MemoryPrediction:
    peak_bytes: int  # max_memory_allocated() over the steady-state step
    resident_bytes: int  # memory_allocated() before it
    reserved_bytes: int  # memory_reserved() after it
    peak_reserved_bytes: int  # memory_reserved()'s high-water mark (build, warm-up and step)
    end_bytes: int  # memory_allocated() after the step
    by_category: dict[str, int]  # bytes by category, live at the peak (allocator block sizes)
    by_module: tuple[tuple[str, int], ...]  # the modules that made what is live at the peak, largest first
    peak_op: PeakOp | None
    fit: Fit | None
    workspaces: tuple[Workspace, ...] = ()
    timeline: tuple[tuple[int, int, int], ...] = ()  # (op index, allocated, reserved) after each op that moved them
    expandable_segments: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    fixes: tuple[MemoryFix, ...] = ()  # when it does not fit: what would, each re-predicted (whatif/memory_fixes.py)
    fixes_skipped: str = ""  # why no fix was re-predicted where the step does not fit (the CLI's --no-fixes)


def cublas_workspace_bytes(gpu: GPU) -> int:
    major = gpu.capability[0]
    return CUBLAS_WORKSPACE_LARGE if major in CUBLAS_WORKSPACE_32MIB_MAJORS else CUBLAS_WORKSPACE_SMALL


def _uses_cublaslt(op: OpRecord) -> bool:
    if op.name in CUBLASLT_OPS:
        return True
    if op.name != "addmm":
        return False
    bias = op.args.get("self")
    beta = op.args.get("beta", 1)
    return getattr(bias, "shape", None) is not None and len(bias.shape) == 1 and beta in (1, 1.0, None)


def thread_of(op: OpRecord) -> str:
    """Backward ops of CUDA tensors run on autograd's device thread, with a cuBLAS handle of its own."""
    return "autograd" if op.phase == "backward" else "main"


def cublas_workspaces(ops: tuple[OpRecord, ...], gpu: GPU,
                      build_ops: tuple[OpRecord, ...] = ()) -> tuple[Workspace, ...]:
    """The workspaces the step's matrix products keep, one per (kind, thread, stream), at their first use; those
    of build()'s side-stream ops (Capture.build_ops, index -1) from before the step."""
    ops = (*build_ops, *ops)
    if gpu.vendor != "nvidia":
        return ()
    found: dict[tuple, Workspace] = {}
    cublas = cublas_workspace_bytes(gpu)
    for op in ops:
        if op.name not in CUBLAS_OPS or "host" in op.tags or op.decomposed:
            continue
        thread = thread_of(op)
        # a user's CUDA graph took its workspaces on the stream it was captured on
        stream = op.captured_stream if op.captured_stream >= 0 else op.stream
        key = ("cuBLAS", thread, stream)
        if key not in found:
            found[key] = Workspace("cuBLAS", thread, stream, cublas, op.index)
        if _uses_cublaslt(op):
            key = ("cuBLASLt", thread, stream)
            if key not in found:
                found[key] = Workspace("cuBLASLt", thread, stream, CUBLASLT_WORKSPACE, op.index)
    return tuple(found.values())


# -- temporaries inside an op ----------------------------------------------------------------------------
def _softmax_backward_tmp(op: OpRecord) -> list[int]:
    """softmax_backward_cuda_out (aten/src/ATen/native/cuda/SoftMax.cu): `Tensor tmp = grad * output;` before
    the backward kernel, freed when it returns (log_softmax's backward has none)."""
    grad, output = op.args.get("grad_output"), op.args.get("output")
    if grad is None or output is None:
        return []
    return [grad.numel * max(grad.itemsize, output.itemsize)]


# cuDNN's RNN workspace (cudnnGetRNNTempSpaceSizes; _cudnn_rnn and _cudnn_rnn_backward take one from the caching
# allocator per call and free it as they return; the backward's was the forward's size in 105 of 108 training
# calls): coefficients of cudnn_rnn_workspace_terms, fitted by scripts/fit/fit_rnn_memory.py on the allocator
# events of the H200's probe (1-3 layers) and an H100's of 4-8 layers (cuDNN 9.19 on both, sm_90;
# validation/probes/rnn_memory_fit.json: 186 calls, 10-fold median error 9.0%, 90th percentile 48%). Without the
# per-layer term, fitted on 1-3 layers, the deep stacks came out 58% short at the median (10.6% with it), and the
# 10-fold median over all was 30%; other GPUs and cuDNN versions are assumed to ask the same.
CUDNN_RNN_WORKSPACE_TERMS = (5.797e5, 1.116, 0.04414, 16.26, 1.794, 1.840, 8.799e6)


def cudnn_rnn_workspace_terms(mode: int, hidden: int, layers: int, bidirectional: bool, rows: int, batch: int,
                              input_size: int, itemsize: int) -> list[float]:
    """The sizes (bytes) the workspace is fitted over: a constant; one layer's input projections for every step;
    every layer's outputs; per-layer states; the recurrent weights; the input; and a count of layers x
    directions, whose coefficient is a fixed buffer per layer and direction (about 8.8 MB at any size: a 6-layer
    bidirectional tanh RNN of hidden 64 over 32 steps took 99 MiB)."""
    d = 2 if bidirectional else 1
    g = GATES.get(mode, GATES[LSTM])
    return [1.0, d * rows * g * hidden * itemsize, layers * d * rows * hidden * itemsize,
            layers * d * batch * hidden * itemsize, layers * d * g * hidden * hidden * itemsize,
            d * rows * input_size * itemsize, float(layers * d)]


def _cudnn_rnn_workspace(op: OpRecord) -> list[int]:
    """The workspace of one _cudnn_rnn or _cudnn_rnn_backward call (CUDNN_RNN_WORKSPACE_TERMS)."""
    from kernelcast.capture.rnn import cudnn_rnn_rows

    x = op.args.get("input")
    if x is None or not getattr(x, "shape", None):
        return []
    _, batch, rows = cudnn_rnn_rows(tuple(x.shape), bool(op.args.get("batch_first")), op.args.get("batch_sizes"))
    terms = cudnn_rnn_workspace_terms(int(op.args.get("mode", 2)), int(op.args.get("hidden_size", 0)),
                                      int(op.args.get("num_layers", 1)), bool(op.args.get("bidirectional")), rows,
                                      batch, x.shape[-1], x.itemsize)
    return [int(sum(c * t for c, t in zip(CUDNN_RNN_WORKSPACE_TERMS, terms)))]


def _loss_tmp(op: OpRecord, gpu: GPU) -> list[int]:
    """A reduced loss's temporaries (INTERNALLY_REDUCED_LOSSES): the elementwise loss mse / smooth-L1 / Huber compute
    into a tensor of their own before reducing it (Loss.cpp: TORCH_IMPL_FUNC(mse_loss_out) and (smooth_l1_loss_out)
    `Tensor loss; borrowing_binary_op(loss, input, target)`; huber_loss `at::empty_like(input)`), then the
    reduction's own (_loss_reduce_tmp); freed as the op returns."""
    if not _reduced(op):
        return []
    elementwise = [_loss_elements_bytes(op)] if op.name in ELEMENTWISE_TMP_LOSSES else []
    return elementwise + _loss_reduce_tmp(op, gpu)


def _reduced(op: OpRecord) -> bool:
    """A loss called with reduction 'mean' (the default) or 'sum', not 'none'."""
    return int(op.args.get("reduction", REDUCTION_MEAN)) != REDUCTION_NONE


def _loss_elements_bytes(op: OpRecord) -> int:
    """Bytes of a loss's elementwise values: the broadcast shape of input and target, in the input's dtype."""
    x, y = op.args.get("self", op.args.get("input")), op.args.get("target")
    if not isinstance(x, TensorMeta):
        return 0
    numel = max(x.numel, y.numel if isinstance(y, TensorMeta) else 0)
    return numel * x.itemsize


# Reduced losses that compute their elementwise values into the output tensor and then resize it to the 0-d
# result; resize_ never shrinks a storage, so the 0-d loss holds a storage of every element's value for as long
# as it lives, typically to the end of the step. Loss.cpp: TORCH_META_FUNC(mse_loss) and (smooth_l1_loss) build
# the output at the broadcast shape, then `maybe_get_output().resize_({})`; soft_margin_loss_out
# `output.resize_({})`; cuda/Loss.cu binary_cross_entropy_out_cuda `loss.resize_as_(loss_reduced)`. On the CPU
# build (torch 2.13) F.mse_loss, F.smooth_l1_loss, F.soft_margin_loss and F.binary_cross_entropy of two 128 x 4096
# fp32 tensors return a 0-d tensor over a 2 MiB storage (F.huber_loss and F.l1_loss: 4 bytes). The capture's
# fake tensors give the 0-d output 4 bytes. Measured on the H200 (KernelBench L1 #96, smooth_l1_loss over 128 x
# 4096 fp32): the call's peak rose by 4 MiB + 1 KiB, this storage and the loss's own elementwise temporary.
FULL_STORAGE_LOSSES = frozenset({"mse_loss", "smooth_l1_loss", "soft_margin_loss", "binary_cross_entropy"})


def with_loss_storages(trace: MemoryTrace, ops: tuple[OpRecord, ...]) -> MemoryTrace:
    """The trace with each reduced FULL_STORAGE_LOSSES output's storage at the size the CUDA op leaves it."""
    sizes = {}
    for op in ops:
        if op.name in FULL_STORAGE_LOSSES and _reduced(op) and "host" not in op.tags:
            for out in op.tensors_out():
                if out.storage and out.on_gpu:
                    sizes[(op.index, out.storage)] = max(_loss_elements_bytes(op), out.nbytes)
    if not sizes:
        return trace
    allocations = tuple(dataclasses.replace(a, nbytes=sizes.get((a.op, a.storage), a.nbytes))
                        for a in trace.allocations)
    return dataclasses.replace(trace, allocations=allocations)


def _masked_scatter_tmp(op: OpRecord) -> list[int]:
    """masked_scatter_'s int64 prefix sum of the mask (costs/elementwise.py masked_scatter_), freed as it returns."""
    self_t = op.args.get("self")
    return [self_t.numel * PREFIX_SUM_BYTES] if isinstance(self_t, TensorMeta) else []


def _layout_copies_tmp(op: OpRecord) -> list[int]:
    """The contiguous copies a pool makes of its operands that are not laid out as it reads them (costs/pooling.py
    LAYOUT_OPERANDS), held while its kernel runs."""
    return [t.numel * t.itemsize for t in layout_copied(op)]


# The accumulator a reduce kernel carries per output (Reduce.cuh's arg_t): a (value, int64 index) pair for the
# reductions that keep an index (SharedReduceOps.h MaxOps / ArgMaxOps), WelfordData<float, int32> for variance
# and standard deviation (ReduceMomentKernel.cu), else the input's type, at least float (half and bfloat16 sum
# in float).
INDEX_ACCUMULATOR_BYTES = 16
WELFORD_ACCUMULATOR_BYTES = 16
INDEX_REDUCTIONS = frozenset({"max", "min", "argmax", "argmin"})
WELFORD_REDUCTIONS = frozenset({"var", "std", "var_mean", "std_mean"})
FLOAT_BYTES = 4


def _reduce_staging_tmp(op: OpRecord, gpu: GPU) -> list[int]:
    """The staging buffer and semaphores of a reduction whose outputs are split across thread blocks
    (costs/reduce_config.py global_reduce_temporaries), for one 32-bit part of it where the op is split
    (costs/tensor_iterator.py: the parts halve its largest dim, reduced or kept)."""
    ins, outs = op.tensors_in(), op.tensors_out()
    if not ins or not outs or not ins[0].numel or not ins[0].on_gpu:
        return []
    x, num_outputs = ins[0], max(outs[0].numel, 1)
    dims = reduced_dims(len(x.shape), op.args.get("dim"))
    inputs_per_output = x.numel // num_outputs
    parts = index32_parts([x, *outs])
    if parts > 1 and x.shape:
        largest = max(range(len(x.shape)), key=lambda d: x.shape[d])
        if largest in dims:
            inputs_per_output = max(inputs_per_output // parts, 1)
        else:
            num_outputs = max(num_outputs // parts, 1)
    accumulator = (INDEX_ACCUMULATOR_BYTES if op.name in INDEX_REDUCTIONS and outs[-1].dtype == "int64" else
                   WELFORD_ACCUMULATOR_BYTES if op.name in WELFORD_REDUCTIONS else max(FLOAT_BYTES, x.itemsize))
    return list(global_reduce_temporaries(num_outputs, inputs_per_output, reduces_fastest_dim(x.shape, x.stride, dims),
                                          gpu.sm_count, DEFAULT_CONTEXT.max_threads_per_sm, accumulator))


# Losses whose CUDA op reduces its elementwise values itself, with `.mean()` / `.sum()` over every element
# (Loss.cpp apply_loss_reduction; cuda/Loss.cu binary_cross_entropy_out_cuda; soft_margin_loss_out): that
# reduction's staging buffer and semaphores are the op's temporaries too. Measured on the H200 (KernelBench L1 #96,
# smooth_l1_loss over 128 x 4096 fp32): the peak rose by 4 MiB + 1 KiB, the elementwise storage and temporary and
# two 512-byte blocks.
INTERNALLY_REDUCED_LOSSES = frozenset({"mse_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss",
                                       "binary_cross_entropy"})
ELEMENTWISE_TMP_LOSSES = frozenset({"mse_loss", "smooth_l1_loss", "huber_loss"})
# ... of which binary_cross_entropy_out_cuda reduces into a tensor of its own, `loss_reduced = at::mean(loss)` /
# `at::sum(loss)`, then copies it into the output: a 0-d temporary (one 512-byte block; on an H100 the call's
# peak was that block above mse's, validation/probes/size_rules/size_rules_run1.json).
REDUCED_INTO_OWN_TENSOR = frozenset({"binary_cross_entropy"})


def _loss_reduce_tmp(op: OpRecord, gpu: GPU) -> list[int]:
    """The staging buffer and semaphores of a reduced loss's reduction over all its elements."""
    x = op.args.get("self", op.args.get("input"))
    if not isinstance(x, TensorMeta) or not x.itemsize:
        return []
    numel = _loss_elements_bytes(op) // x.itemsize
    own = [x.itemsize] if op.name in REDUCED_INTO_OWN_TENSOR else []
    return own + list(global_reduce_temporaries(1, numel, True, gpu.sm_count, DEFAULT_CONTEXT.max_threads_per_sm,
                                                max(FLOAT_BYTES, x.itemsize)))


# Temporaries an op's CUDA implementation takes from the caching allocator and frees before it returns: not
# outputs, so the capture does not see them. Op name -> bytes of each, from the op's record. Held after the op's
# own outputs are allocated (structured kernels allocate outputs first), freed as it returns. An op without an
# entry that torch tags a reduction may hold a split reduction's staging buffer (_reduce_staging_tmp).
INTERNAL_TEMPORARIES = {"_softmax_backward_data": _softmax_backward_tmp, "_cudnn_rnn": _cudnn_rnn_workspace,
                        "_cudnn_rnn_backward": _cudnn_rnn_workspace,
                        **{name: conv_workspace for name in (*CONV_FORWARD_OPS, *CONV_BACKWARD_OPS)},
                        "masked_scatter_": _masked_scatter_tmp,
                        **{name: _layout_copies_tmp for name in LAYOUT_OPERANDS}}
# ... and those whose sizes depend on the GPU (its SM count sets how a reduction splits): name -> rule(op, gpu).
GPU_TEMPORARIES = {name: _loss_tmp for name in INTERNALLY_REDUCED_LOSSES}
# Library workspaces taken per call whose size the library chooses at run time and the capture cannot know:
# not in the prediction; a note says so where the step has such ops.
UNMODELLED_WORKSPACES = {
    "_fft_r2c": "cuFFT plan workspaces", "_fft_c2r": "cuFFT plan workspaces", "_fft_c2c": "cuFFT plan workspaces",
}
UNMODELLED_NOTE = "not in the predicted peak (sizes chosen at run time by the library): {what}"
# cuDNN convolution workspaces are in the peak, by the engine class cuDNN likely picks (conv_workspace.py); the
# note says how sure that is.
CONV_WORKSPACE_NOTE = ("cuDNN convolution workspaces are in the peak: up to {largest} for one convolution, the "
                       "NCHW <-> NHWC copies of its operands where cuDNN likely runs an NHWC engine, held only while "
                       "it runs (the breakdown at the peak counts those running then). That guess of "
                       "engine was right for 81% of the H200's measured convolutions (other GPUs assumed alike). "
                       "torch.backends.cudnn.benchmark = True may pick engines that take more.")
CONV_NO_WORKSPACE_NOTE = ("cuDNN convolution workspaces: none in the peak, since each convolution here likely runs "
                          "an engine that needs none. That guess of engine was right for 81% of the H200's measured "
                          "convolutions (other GPUs assumed alike). torch.backends.cudnn.benchmark = True may pick "
                          "engines that take workspace.")


def internal_temporaries(ops: tuple[OpRecord, ...], gpu: GPU) -> dict[int, list[int]]:
    """Op index -> bytes of each temporary its CUDA implementation holds while it runs on `gpu`."""
    out = {}
    for op in ops:
        if "host" in op.tags or op.decomposed:
            continue
        if op.name in INTERNAL_TEMPORARIES:
            sizes = INTERNAL_TEMPORARIES[op.name](op)
        elif op.name in GPU_TEMPORARIES or "reduction" in op.tags:
            sizes = GPU_TEMPORARIES.get(op.name, _reduce_staging_tmp)(op, gpu)
        else:
            continue
        sizes = [n for n in sizes if n > 0]
        if sizes:
            out[op.index] = sizes
    return out


def unmodelled_notes(ops: tuple[OpRecord, ...], temporaries: dict[int, list[int]]) -> tuple[str, ...]:
    """The memory notes on library workspaces; temporaries: internal_temporaries(ops), where the convolutions'
    workspaces already are."""
    device_ops = [op for op in ops if "host" not in op.tags]
    what = sorted({UNMODELLED_WORKSPACES[op.name] for op in device_ops if op.name in UNMODELLED_WORKSPACES})
    convs = [op for op in device_ops if op.name in CONV_FORWARD_OPS or op.name in CONV_BACKWARD_OPS]
    largest = max((n for op in convs for n in temporaries.get(op.index, ())), default=0)
    return (((UNMODELLED_NOTE.format(what="; ".join(what)),) if what else ()) +
            ((CONV_WORKSPACE_NOTE.format(largest=human_bytes(largest)) if largest else CONV_NO_WORKSPACE_NOTE,)
             if convs else ()))


# -- replay ---------------------------------------------------------------------------------------------
@dataclass
class _Replay:
    """One pass over the history: the allocator's state at the step's start, its peak, and its end."""

    allocator: CachingAllocator
    resident: int = 0
    peak: int = 0
    peak_event: int = -1  # index into the step's events where the peak was reached (-1: at the step's start)
    end: int = 0
    peak_reserved: int = 0  # over the whole history (build, warm-up, step)
    timeline: list = field(default_factory=list)
    failed_at: tuple[str, int] | None = None  # (stage, op position) of an allocation that ran out of memory


def _stream_of(a: Allocation, ops: tuple[OpRecord, ...]) -> int:
    if a.stage == STEP and 0 <= a.op < len(ops):
        return ops[a.op].stream
    return a.stream


@dataclass(frozen=True)
class _Step:
    """What a replay needs: the trace, the ops, and what the predict stage adds to the trace."""

    trace: MemoryTrace
    ops: tuple[OpRecord, ...]
    workspaces: tuple[Workspace, ...]
    temporaries: dict[int, list[int]]  # op index -> bytes of each temporary inside it
    kept: frozenset[int] = frozenset()  # workspaces a process running earlier work already holds (not made again)


def _history(step: _Step) -> tuple[list, int]:
    """The events to replay: (allocation id or workspace/temporary key, position), each workspace allocated in
    the warm-up step where it reached the op that first needs it (it is kept from then on), each op's
    internal temporaries held after its outputs are made and freed before the next op; and where the
    recorded step starts in them."""
    trace = step.trace
    events = list(trace.events[:trace.step_end])
    by_id = trace.by_id()
    warmup = next((i for i, (aid, _) in enumerate(events) if aid > 0 and by_id[aid].stage == WARMUP),
                  trace.step_start)
    before = events[:warmup]
    in_warmup = events[warmup:trace.step_start]
    ordinals = dict(trace.op_ordinals)
    # each workspace where the warm-up step reached the op that first needs it in the recorded step
    made = sorted((ordinals.get(w.first_op, 0), i) for i, w in enumerate(step.workspaces) if i not in step.kept)
    for ordinal, i in reversed(made):
        at = next((j for j, (_, position) in enumerate(in_warmup) if position >= ordinal), len(in_warmup))
        in_warmup[at:at] = [(("ws", i), -1)]
    in_step = events[trace.step_start:]
    positions = [position for _, position in in_step]
    for index, sizes in sorted(step.temporaries.items(), reverse=True):  # from the back: indexes stay put
        at = bisect.bisect_right(positions, index)
        held = [(("tmp", index, j, n), index) for j, n in enumerate(sizes)]
        freed = [(("free", index, j, n), index) for j, n in enumerate(sizes)]
        in_step[at:at] = held + freed
    return before + in_warmup + in_step, len(before) + len(in_warmup)


def _apply(step: _Step, allocator: CachingAllocator, key, live: dict, by_id: dict) -> None:
    """One event: an allocation (a storage, a workspace, a temporary) or a free."""
    if isinstance(key, tuple):
        if key[0] == "ws":
            ws = step.workspaces[key[1]]
            live[key] = allocator.malloc(ws.nbytes, ws.stream)
        elif key[0] == "tmp":
            live[key] = allocator.malloc(key[3], step.ops[key[1]].stream)
        else:
            allocator.free(live.pop(("tmp", *key[1:])))
    elif key > 0:
        a = by_id[key]
        live[key] = allocator.malloc(a.nbytes, _stream_of(a, step.ops))
    else:
        block = live.pop(-key, None)
        if block is not None:
            allocator.free(block)


def _replay(step: _Step, allocator: CachingAllocator, stop_at: int | None = None) -> tuple[_Replay, dict]:
    """Replay the history; returns the replay and the blocks live when it stopped: after step event `stop_at`
    (-1: as the step starts), or at the end. An allocation that runs out of memory ends the replay, with
    failed_at set."""
    by_id = step.trace.by_id()
    history, step_start = _history(step)
    live: dict = {}
    state = _Replay(allocator)
    for i, (key, position) in enumerate(history):
        if i == step_start:
            state.peak_reserved = allocator.peak_reserved
            allocator.reset_peak()
            state.resident = state.peak = allocator.allocated
            if stop_at == -1:
                return state, live
        try:
            _apply(step, allocator, key, live, by_id)
        except OutOfMemory:
            stage = STEP if i >= step_start else (by_id[key].stage if isinstance(key, int) else WARMUP)
            state.failed_at = (stage, position)
            state.peak_reserved = max(state.peak_reserved, allocator.peak_reserved)
            return state, live
        if i >= step_start:
            step_i = i - step_start
            if allocator.allocated > state.peak:
                state.peak, state.peak_event = allocator.allocated, step_i
            if position >= 0:
                state.timeline.append((position, allocator.allocated, allocator.reserved))
            if stop_at is not None and step_i == stop_at:
                return state, live
    if step_start >= len(history):  # nothing happened in the step
        state.peak_reserved = allocator.peak_reserved
        allocator.reset_peak()
        state.resident = state.peak = allocator.allocated
    state.peak_reserved = max(state.peak_reserved, allocator.peak_reserved)
    state.end = allocator.allocated
    return state, live


def _compact_timeline(points: list) -> tuple[tuple[int, int, int], ...]:
    """Per op position, where it changed: the op's high-water mark while it ran, where that passed what it left
    (temporaries and workspaces it frees before it returns), then the (allocated, reserved) it left."""
    out: list[tuple[int, int, int]] = []
    for position, group in itertools.groupby(points, key=lambda p: p[0]):
        group = list(group)
        high, end = max(group, key=lambda p: p[1]), group[-1]
        for point in ((high, end) if high[1] > end[1] else (end,)):
            if not out or out[-1][1:] != point[1:]:
                out.append(tuple(point))
    return tuple(out)


# -- where it goes ----------------------------------------------------------------------------------------
def _free_positions(trace: MemoryTrace) -> dict[int, int]:
    out = {}
    for aid, position in trace.events[trace.step_start:trace.step_end]:
        if aid < 0:
            out[-aid] = position
    return out


def category_of(a: Allocation, ops: tuple[OpRecord, ...], first_backward: int | None, freed_at: dict[int, int]) -> str:
    """PARAMETER / GRADIENT / OPTIMIZER_STATE / BUFFER where the capture labelled its owner; anything else
    alive before the step is a buffer or input kept between steps. Of what the step makes: made in forward and
    still alive when backward starts, an activation saved for backward; the rest, temporaries."""
    if a.label:
        return a.label
    if a.stage != STEP:
        return BUFFER
    made_in = ops[a.op].phase if 0 <= a.op < len(ops) else ""
    if made_in == "forward" and first_backward is not None and a.op < first_backward:
        freed = freed_at.get(a.id)
        if freed is None or freed > first_backward:
            return ACTIVATION
    return TEMPORARY


def _module_of(a: Allocation, ops: tuple[OpRecord, ...]) -> str:
    if a.stage == STEP and 0 <= a.op < len(ops):
        return ops[a.op].module or "(step)"
    if a.name and "." in a.name:
        return a.name.rsplit(".", 1)[0]
    return "(kept between steps)"


def _peak_op(ops: tuple[OpRecord, ...], position: int) -> PeakOp | None:
    if not 0 <= position < len(ops):
        return None
    op = ops[position]
    while op.parent >= 0:  # the op the step called (a decomposed op's children carry its line)
        op = ops[op.parent]
    return PeakOp(op.index, op.op, op.phase, op.module, op.source)


def _breakdown(trace: MemoryTrace, ops: tuple[OpRecord, ...], live: dict) -> tuple[dict[str, int], list]:
    """Bytes live (as allocator blocks) by category and by the module that made them."""
    by_id = trace.by_id()
    backward = [op.index for op in ops if op.phase == "backward" and "host" not in op.tags]
    first_backward = backward[0] if backward else None
    freed_at = _free_positions(trace)
    categories: dict[str, int] = {c: 0 for c in CATEGORIES}
    modules: dict[str, int] = defaultdict(int)
    for key, block in live.items():
        if isinstance(key, tuple):  # a library workspace, or an op's temporary
            categories[WORKSPACE if key[0] == "ws" else TEMPORARY] += block.size
            continue
        a = by_id[key]
        categories[category_of(a, ops, first_backward, freed_at)] += block.size
        modules[_module_of(a, ops)] += block.size
    return categories, sorted(modules.items(), key=lambda kv: -kv[1])


# -- the verdict -----------------------------------------------------------------------------------------
LIMIT_NOTE = ("capacity: {gb:.2f} GB for the caching allocator, as torch.cuda.set_per_process_memory_fraction "
              "limits it (the CUDA context is outside that limit)")


def _fit(step: _Step, gpu: GPU, expandable: bool, context_bytes: int,
         limit_bytes: int | None = None) -> tuple[Fit, _Replay]:
    """Replay the history against the GPU's memory less the context (or against `limit_bytes` for the allocator,
    as set_per_process_memory_fraction sets it): the allocator releases its cached segments and retries before it
    gives up, as on the GPU. Also returns the replay (its reserved memory is what the GPU would report: cache
    released where memory ran short)."""
    capacity = int(gpu.memory_bytes)
    usable = max(capacity - context_bytes, 0)
    notes = (CONTEXT_NOTE.format(mib=context_bytes / 2**20), CAPACITY_NOTE.format(gb=capacity / 1e9))
    if limit_bytes is not None:
        capacity, context_bytes, usable = limit_bytes, 0, limit_bytes
        notes = (LIMIT_NOTE.format(gb=limit_bytes / 1e9),)
    allocator = CachingAllocator(capacity_bytes=usable, expandable_segments=expandable)
    state, _ = _replay(step, allocator)
    oom = None
    if state.failed_at is not None and allocator.failed is not None:
        stage, position = state.failed_at
        failed = allocator.failed
        oom = OutOfMemoryAt(stage, _peak_op(step.ops, position) if stage == STEP else None, failed.requested,
                            failed.segment, failed.allocated, failed.reserved)
    return Fit(oom is None, gpu.id, capacity, context_bytes, usable, state.peak_reserved, oom, notes), state


@dataclass
class Process:
    """One process running workloads one after another, as scripts/device/zoo_measure.py does: the allocator's state
    and the library workspaces it keeps (keyed by kind, thread and stream) carry from one to the next."""

    allocator: CachingAllocator = field(default_factory=CachingAllocator)
    workspaces: dict = field(default_factory=dict)


def run_in_process(capture: Capture, gpu: GPU, process: Process, stream_key) -> tuple[int, int, int]:
    """(resident, peak, reserved after the step) of a workload run in `process` after what ran there before;
    then, as the zoo's loop does, its tensors are freed (gc.collect()) and the cached segments released
    (torch.cuda.empty_cache()). stream_key(stream) names a stream across workloads (a side stream is a new CUDA
    stream in each)."""
    ops, trace = capture.ops, capture.memory
    workspaces = cublas_workspaces(ops, gpu, capture.build_ops)
    keys = [(w.kind, w.thread, stream_key(w.stream)) for w in workspaces]
    kept = frozenset(i for i, key in enumerate(keys) if key in process.workspaces)
    step = _Step(with_loss_storages(trace, ops), ops, workspaces, internal_temporaries(ops, gpu), kept)
    state, live = _replay(step, process.allocator)
    reserved = process.allocator.reserved
    for key, block in live.items():
        if isinstance(key, tuple) and key[0] == "ws":
            process.workspaces[keys[key[1]]] = block
        else:
            process.allocator.free(block)
    process.allocator.release_cached()
    return state.resident, state.peak, reserved


def predict_memory(capture: Capture, gpu: GPU, expandable_segments: bool = False,
                   context_bytes: int = CUDA_CONTEXT_BYTES, limit_bytes: int | None = None) -> MemoryPrediction | None:
    """The step's memory on `gpu` (None for a capture saved without a memory trace). limit_bytes: judge the fit
    against that many bytes for the allocator instead of the GPU's memory less the context (what
    torch.cuda.set_per_process_memory_fraction allows; scripts/device/fit_check.py checks the verdict so)."""
    trace = capture.memory
    if trace is None:
        return None
    ops = capture.ops
    step = _Step(with_loss_storages(trace, ops), ops, cublas_workspaces(ops, gpu, capture.build_ops),
                 internal_temporaries(ops, gpu))
    state, _ = _replay(step, CachingAllocator(expandable_segments=expandable_segments))
    # again, up to the peak (-1: the step never rose above what it started with), for what is live there
    _, peak_live = _replay(step, CachingAllocator(expandable_segments=expandable_segments), stop_at=state.peak_event)
    history, step_start = _history(step)
    peak_position = history[step_start + state.peak_event][1] if state.peak_event >= 0 else -1
    categories, modules = _breakdown(trace, ops, peak_live)
    fit, on_gpu = _fit(step, gpu, expandable_segments, context_bytes, limit_bytes)
    # reserved memory as the GPU reports it: where memory ran short the allocator released its cache (the
    # unlimited replay keeps every segment the build and warm-up ever cached); unlimited where it does not fit
    reserved = on_gpu if fit.fits else state
    return MemoryPrediction(
        peak_bytes=state.peak, resident_bytes=state.resident, reserved_bytes=reserved.allocator.reserved,
        peak_reserved_bytes=reserved.peak_reserved, end_bytes=state.end, by_category=categories,
        by_module=tuple(modules[:10]), peak_op=_peak_op(ops, peak_position),
        fit=fit, workspaces=step.workspaces,
        timeline=_compact_timeline(state.timeline), expandable_segments=expandable_segments,
        notes=trace.notes + unmodelled_notes(ops, step.temporaries),
    )


# -- the prediction record's memory keys (report/ reads only these) ---------------------------------------------
def _fix_json(fix: MemoryFix) -> dict:
    return {"name": fix.name, "peak_memory_bytes": fix.peak_bytes, "reserved_memory_bytes": fix.reserved_bytes,
            "fits": fix.fits, "step_time_us": fix.step_time_us, "note": fix.note}


def memory_json(pred) -> dict:
    """The --json memory keys (peak_memory_bytes, resident_memory_bytes, reserved_memory_bytes,
    memory_by_category, peak_op, fits and details); all None for a capture without a memory trace."""
    mem = pred.memory
    if mem is None:
        return {"peak_memory_bytes": None, "resident_memory_bytes": None, "reserved_memory_bytes": None,
                "memory_by_category": None, "peak_op": None, "fits": None}
    fit = mem.fit
    return {
        "peak_memory_bytes": mem.peak_bytes, "resident_memory_bytes": mem.resident_bytes,
        "reserved_memory_bytes": mem.reserved_bytes, "peak_reserved_memory_bytes": mem.peak_reserved_bytes,
        "memory_by_category": dict(mem.by_category),
        "memory_by_module": [{"module": m, "bytes": n} for m, n in mem.by_module],
        "peak_op": None if mem.peak_op is None else {
            "index": mem.peak_op.index, "op": mem.peak_op.op, "phase": mem.peak_op.phase,
            "module": mem.peak_op.module, "source": mem.peak_op.source},
        "fits": None if fit is None else {
            "fits": fit.fits, "gpu": fit.gpu, "capacity_bytes": fit.capacity_bytes,
            "cuda_context_bytes": fit.context_bytes, "usable_bytes": fit.usable_bytes,
            "peak_reserved_bytes": fit.peak_reserved_bytes, "headroom_bytes": fit.headroom_bytes,
            "oom": None if fit.oom is None else {
                "stage": fit.oom.stage, "op": None if fit.oom.op is None else fit.oom.op.op,
                "source": None if fit.oom.op is None else fit.oom.op.source,
                "requested_bytes": fit.oom.requested_bytes, "segment_bytes": fit.oom.segment_bytes,
                "allocated_bytes": fit.oom.allocated_bytes, "reserved_bytes": fit.oom.reserved_bytes},
            "notes": list(fit.notes), "fixes": [_fix_json(f) for f in mem.fixes],
            **({"fixes_skipped": mem.fixes_skipped} if mem.fixes_skipped else {})},
        "memory_workspaces": [{"kind": w.kind, "thread": w.thread, "stream": w.stream, "bytes": w.nbytes}
                              for w in mem.workspaces],
        "memory_notes": list(mem.notes), "expandable_segments": mem.expandable_segments,
    }




def memory_timeline_rows(pred) -> list[dict] | None:
    """memory_allocated() and memory_reserved() after each op the host issues, an op that frees temporaries before
    it returns first at its high-water mark (two rows of one op_index): [{op_index, allocated_bytes,
    reserved_bytes}] (report/memory.py draws it; report/memory_text.py makes the trace's counter track)."""
    mem = pred.memory
    if mem is None or not mem.timeline:
        return None
    return [{"op_index": index, "allocated_bytes": allocated, "reserved_bytes": reserved}
            for index, allocated, reserved in mem.timeline]
