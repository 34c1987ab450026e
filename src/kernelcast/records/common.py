"""What every record shares: dtype sizes, the step's phases, the host-side markers a capture records beside aten
ops, and the stream ids."""

from __future__ import annotations

US_PER_MS = 1e3
US_PER_S = 1e6


def time_text(us: float) -> str:
    """812.3 µs, 31.36 ms, 31.36 s: the unit grows with the time (a signed time keeps its sign). Every stage's
    text (the report's tables, the prediction's notes) says times this way."""
    size = abs(us)
    if size >= US_PER_S:
        return f"{us / US_PER_S:.2f} s"
    if size >= US_PER_MS:
        return f"{us / US_PER_MS:.2f} ms"
    return f"{us:.1f} µs"


# Bytes per element of each dtype torch can put on a GPU (torch's names, without the "torch." prefix).
DTYPE_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "bool": 1, "complex64": 8, "complex128": 16, "complex32": 4,
}

# Ops after a backward pass that are neither autograd's nor the optimizer's nor a new forward's (gradient
# clipping, the loss's .item(), an lr scheduler's step): "post-backward", as FSDP names its hooks there.
POST_BACKWARD = "post-backward"
PHASES = ("forward", "backward", POST_BACKWARD, "optimizer")


def host_phase(phase: str) -> str:
    """The phase whose host costs an op's take: a post-backward op runs eager Python as a forward one does."""
    return "forward" if phase == POST_BACKWARD else phase

# Host-side markers the capture records beside aten ops ("host." + what): syncs outside aten (host.synchronize,
# host.tolist), event records and waits that order streams, and the autograd nodes a backward ran without an op.
HOST_OP_PREFIX = "host."
RECORD_EVENT_OP = HOST_OP_PREFIX + "record_event"
WAIT_EVENT_OP = HOST_OP_PREFIX + "wait_event"
ENGINE_NODES_OP = HOST_OP_PREFIX + "autograd_nodes"
# Where a profiler range (torch.profiler.record_function) that the predict stage models begins and ends, e.g.
# FSDP2's "FSDP::pre_forward (layers.0)" (args: {"name": ...}). Markers only: no CPU or GPU work of their own.
RANGE_BEGIN_OP = HOST_OP_PREFIX + "range_begin"
# TorchScript's fusion of elementwise chains (capture/torchscript_fusion.py): an op a script module's graph ran, a
# member of a fusion group (no kernel of its own), the group's last member (its one kernel, costs/fused.py) and that
# member's args naming what the group reads and writes and how many ops it joined.
TORCHSCRIPT_TAG = "torchscript"
TORCHSCRIPT_CALL_TAG = "torchscript_call"  # the first op of one call of a script module
FUSED_MEMBER_TAG = "nnc_fused"
FUSION_GROUP_TAG = "nnc_group"
FUSION_READS, FUSION_WRITES, FUSION_OPS = "fusion_reads", "fusion_writes", "fusion_ops"
FUSION_GROUP_OP = "kernelcast.nnc_fusion_group.default"  # what the group's last member is recorded as (its kernel)
# torch.save's serialization on the host after its device-to-host copies (capture/checkpoints.py; args: {"bytes":
# storage bytes written, "storages": storages written}), priced by predict/host.py.
TORCH_SAVE_OP = HOST_OP_PREFIX + "torch_save"
TORCH_SAVE_SYNC = "torch.save"  # the label of its copies' sync points (predict.SYNC_ADVICE)
RANGE_END_OP = HOST_OP_PREFIX + "range_end"
# The step's Python after its last op (an optimizer's zero_grad, a compiled frame's exit and its resume functions,
# logging): a marker at the step's return carries it, as every op carries the Python before it.
STEP_END_OP = HOST_OP_PREFIX + "step_end"
# tensor.record_stream(stream): the storage's block is not reused until that stream's work queued so far is done
# (args: storage, stream); predict/hazards.py reads it.
RECORD_STREAM_OP = HOST_OP_PREFIX + "record_stream"

# The tag of an op that CUDA runs by calling other ops (recorded after it, their `parent` its index).
DECOMPOSED_TAG = "decomposed"
# The tag of an op whose Python before it ran inside a torch.compile'd function's wrapper, Dynamo's frame callback
# set (capture/host_clock.py _compiled_function_wrapper): read as timed, not priced by its counted lines.
INSIDE_COMPILED_TAG = "inside_compiled"
# The tag of a backward op that Python called on autograd's thread (a custom Function's backward, a hook,
# activation checkpointing's recomputed forward), not the engine's C++ formula: it went through the Python
# bindings, as a forward op does (predict/host.py prices it so).
FROM_PYTHON_TAG = "from_python"
# The tag of a cuDNN attention call at a shape no earlier step of the capture ran: PyTorch builds and caches a
# cuDNN graph per shape (aten/src/ATen/native/cudnn/MHA.cpp), a host cost of milliseconds paid at each new one
# (predict/host.py CUDNN_GRAPH_BUILD_US). A step whose attention shapes change every call (a KV cache that grows
# by a token a step) pays it every step; one whose shapes repeat (a generate() loop over the same lengths) never.
NEW_CUDNN_GRAPH_TAG = "new_cudnn_graph"


def stream_name(stream: int) -> str:
    """A CUDA stream as the report names it: the default stream (0) or a side stream by its capture id."""
    return "default stream" if stream == 0 else f"side stream {stream}"


def root_indices(ops) -> list[int]:
    """For each op, the index of the op the step itself called that launched it (its own for most ops)."""
    roots: list[int] = []
    for i, op in enumerate(ops):
        roots.append(roots[op.parent] if 0 <= op.parent < i else i)
    return roots


# The stream id collectives are recorded on. NCCL runs them on a stream of its own (ProcessGroupNCCL keeps one
# per device and process group), so they can overlap compute on stream 0; a number well above the ids a capture
# gives user-created streams keeps the two apart.
COMM_STREAM = 1000
