"""Host (CPU) time per op in eager PyTorch: dispatch and launch, module calls, and the model's own Python.

Per-event costs come from a device profile's `host` section, measured by `kernelcast calibrate` on the GPU's
own host (calibrate/host.py): loops of tiny ops whose kernels finish before the next launch, so the loop time
is the CPU's. The model's Python between ops is priced by the lines it ran (OpRecord.python_lines, counted by
the capture) at the profile's fitted µs per line (`host.model python`, calibrate/python_lines.py: fitted to the
zoo's host-bound steps measured on the H200's host), with the fit's held-out spread as its range; a stretch whose
reading is far beyond its lines' price (C work in a few lines) is priced as read. A capture that did not count
lines (before 2026-12-05), or a profile without the fit, prices it from the capture's reading (OpRecord.python_us,
the CPU time the capture machine spent in it) carried to the target host by the ratio of the two machines' Python
benchmark (capture/cpu_speed.py). The capture machine and the target host each ran three CPU-bound benchmarks
(Python, dispatch, module calls); the spread of their three ratios is how uncertain that carrying is, and the
model gives the timed model Python as a range over it (python_scale_range).

A target host measured apart from the calibration (`target`: its three benchmarks, e.g. the device host
during a validation run, whose speed swung 2x between runs) scales every per-op cost by how much slower it
ran the benchmarks the calibration also ran (cpu_scale).

Without a profile, the costs below are the medians of the first two microbenchmark runs on the workplace's
H200 host (validation/host_microbench*.json, 2026-11-29), and the model says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import math
import statistics

from kernelcast.capture.cpu_speed import CpuBench
from kernelcast.costs import Cost, cost_of
from kernelcast.costs.foreach import tensor_lists
from kernelcast.records import (ENGINE_NODES_OP, FROM_PYTHON_TAG, HOST_OP_PREFIX, INSIDE_COMPILED_TAG,
                                NEW_CUDNN_GRAPH_TAG, POST_BACKWARD, RANGE_BEGIN_OP, RANGE_END_OP, TORCH_SAVE_OP, OpRecord,
                                host_phase, root_indices)

# One more cudaLaunchKernel from an op that already launched one. Not isolated by a microbenchmark: a few µs
# is CUDA's documented order; foreach ops, the main multi-launch ops, have a measured cost of their own.
EXTRA_KERNEL_LAUNCH_US = 3.0
FOREACH_PREFIX = "_foreach_"
# The aten ops that call cuDNN or cuSOLVER, and the calibration case (calibrate/host.py library_cases) that
# times the smallest such call on the host: the op costs the case's time instead of one launch. Profiles
# without the case (the shipped H200 profile) price them as launches, which the zoo found two to six times
# short (docs/validation.md).
LIBRARY_CASES = {
    "convolution": "conv2d 3x3 (cuDNN)",
    "convolution_backward": "conv2d backward (cuDNN)",
    "cudnn_batch_norm": "batch_norm training (cuDNN)",
    "_cudnn_rnn": "rnn tanh 4 steps (cuDNN)",
    "_cudnn_rnn_backward": "rnn tanh 4 steps (cuDNN)",  # its fixed part taken as the forward call's (not probed)
    "_linalg_solve_ex": "linalg.solve 8x8 (cuSOLVER)",
}
# A cuDNN RNN call launches its kernels from inside the library, one GEMM and pointwise kernels per time step,
# layer and direction unless a persistent kernel runs the steps: its host time grows with them. Host µs per work
# item beyond the RNN case's own (LIBRARY_CASE_ITEMS, as costs/rnn.py counts that case): the profile's "library
# launch" (scripts/fit/fit_library_launches.py from the device probe scripts/device/probe_library_launches.py: 12 RNN calls
# of 3 to 1609 items, 5.8-8.8 µs per item past the first few). The zoo's bidirectional GRU forward launches 1607
# items and measured 16.7 ms per step for 3.8 ms of kernels. A convolution's extra cuDNN work items (layout
# transforms, memsets, a split-K reduction) cost the same kind of launch from inside the library:
# scripts/device/probe_conv_host.py, three runs on two H100 hosts (validation/probes/h100_conv_host*/), one call
# per kind of convolution against its work items, 8.0-11.4 µs per item past the first (forward) and 8.1-9.6 µs
# (backward) by least squares, where the hosts' own Python benchmarks spread 9.5-17.1 ms. The convolution cases'
# own items are the launch model's count of them (1 forward, 2 backward: a 16-channel 8x8 fp32 3x3 convolution).
LIBRARY_LAUNCH_OPS = {"_cudnn_rnn", "_cudnn_rnn_backward", "convolution", "convolution_backward"}
# Library calls without a calibration case, and their host µs beyond an op's launches: cuSPARSE's SpMM
# (kernelcast::cusparse_spmm_, capture/sparse.py) makes its matrix descriptors, asks for and takes its workspace and
# calls cusparseSpMM on every call. torch.sparse.mm of a 2708-node graph ran 109, 159 and 174 µs a call (CUDA
# events over repeated calls, three H100 processes: host-bound) and 157 µs to issue (host timer, no GPU wait;
# validation/h100/user_kinds_dec08 and _dec08b, scripts/device/probe_user_kinds.py), where the call's other ops
# are priced 47 µs: the median's difference.
LIBRARY_CALL_EXTRA_US = {"cusparse_spmm_": 110.0}
# A cuDNN attention call at a shape the process has not run (the capture's NEW_CUDNN_GRAPH_TAG): PyTorch builds a
# cuDNN graph for it and caches it by shape (aten/src/ATen/native/cudnn/MHA.cpp). Building a cuDNN SDPA plan for a
# new shape measured 55-70 ms of host time (its `build_plans` finalize; about 1 s where a kernel variant had to be
# compiled), 0.16 ms for a shape already seen (FlashInfer PR #5245, cuDNN 9.27 on an SM100 board, 2026-09): the
# range's middle, carried by the host's CPU speed. Not yet measured on the device
# (scripts/device/probe_cudnn_graphs.py is written for it).
CUDNN_GRAPH_BUILD_US = 62_500.0


def library_extras_us(ops) -> dict[int, float]:
    """Per op the step called, the LIBRARY_CALL_EXTRA_US of the library calls it makes (itself or the ops its CUDA
    code calls, which a decomposed op's host side pays), µs on the calibrated host."""
    out: dict[int, float] = {}
    for op, root in zip(ops, root_indices(ops)):
        extra = LIBRARY_CALL_EXTRA_US.get(op.name, 0.0)
        if extra:
            out[root] = out.get(root, 0.0) + extra
    return out
LIBRARY_CASE_ITEMS = {"_cudnn_rnn": 2, "_cudnn_rnn_backward": 2, "convolution": 1, "convolution_backward": 2}
LIBRARY_LAUNCH_CASE = "library launch"
RANGE_MARKERS = (RANGE_BEGIN_OP, RANGE_END_OP)
# torch.save's serialization on the host after its device-to-host copies (TORCH_SAVE_OP): pickling, and each
# storage written as a zip record with its CRC32 (torch/serialization.py _save, PyTorchFileWriter). Measured on an
# H100 machine's host (torch 2.11; scripts/device/probe_user_kinds.py, validation/h100/user_kinds_dec08: 8
# storages of 1.05 MB in all, 1.10 ms a call; 24 storages of 50.4 MB, 52.1 ms; the copies 0.4 and 4.2 ms of that
# as kernelcast prices them): about 1 ms per MB; two cases cannot part a cost per storage from it (0 here).
TORCH_SAVE_CALL_US = 0.0
TORCH_SAVE_US_PER_STORAGE = 0.0
TORCH_SAVE_US_PER_BYTE = 9.06e-4


def torch_save_us(args: dict) -> float:
    """Host µs of torch.save's serialization of args["storages"] storages of args["bytes"] bytes (TORCH_SAVE_OP)."""
    return (TORCH_SAVE_CALL_US + TORCH_SAVE_US_PER_STORAGE * args.get("storages", 0)
            + TORCH_SAVE_US_PER_BYTE * args.get("bytes", 0))
# torch.compile'd code (capture/inductor.py). A compiled graph's call is priced by units, not by the Python
# timed at capture (Dynamo's guards, AOTAutograd's wrapper and Inductor's generated wrapper on fake tensors:
# 2-4x the H200 host's time on scripts/device/probe_compiled_host.py's cases): a fixed cost (the way in and out)
# and one per tensor input; a CUDA graph replay likewise; a Triton launch and an allocation or reinterpretation
# in the wrapper a unit cost each, its Python included. The defaults below are stand-ins for a profile without
# its `host.compiled` fit (scripts/fit/fit_compiled_host.py).
GENERATED_LAUNCH_US = 6.0
CUDAGRAPH_REPLAY_US = 25.0
COMPILED_GRAPH_US = 20.0
COMPILED_INPUT_US = 2.0
COMPILED_VIEW_US = 1.0
COMPILED_MODULE_US = 0.0
REPLAY_INPUT_US = 2.0
TRITON_OP_PREFIX = "triton."
CUDAGRAPH_REPLAY_OP = HOST_OP_PREFIX + "cudagraph_replay"
# A user's own torch.cuda.CUDAGraph.replay() (capture/cuda_facade.py): one cudaGraphLaunch from Python, a fixed
# part and a part per kernel node. Measured on the H200's host (scripts/device/probe_graph_launch.py, three processes,
# graphs of 1-1024 adds, median of 200 replays each: validation/probes/graph_launch_run*.json): 4.8 µs + 0.0115
# µs per kernel (4.7-5.3 µs at 1-4 kernels, 8.6-27.5 at 1024), beside 11.7 µs for one eager add.
USER_GRAPH_REPLAY_OP = HOST_OP_PREFIX + "user_graph_replay"
USER_GRAPH_LAUNCH_US = 4.78
USER_GRAPH_PER_KERNEL_US = 0.0115
COMPILED_CALL_OP = HOST_OP_PREFIX + "compiled_call"
COMPILED_GRAPH_OP = HOST_OP_PREFIX + "compiled_graph"
COMPILED_GRAPH_END_OP = HOST_OP_PREFIX + "compiled_graph_end"
GRAPHED_TAG = "graphed"
COMPILED_TAG = "compiled"
MODEL_PYTHON = "model python"  # the profile's host-section fit of the model's Python per counted line
HEAVY_STRETCH_FACTOR = 4.0  # a stretch read at more than this x its lines' price, plus HEAVY_STRETCH_MIN_US,
HEAVY_STRETCH_MIN_US = 1000.0  # is priced partly as read, and wholly as read from HEAVY_STRETCH_RAMP x that on
# (HostModel.read_share). A ramp, not a switch: a switch flipped a held-out GCN training step between 2.22 and 3.96
# ms from one capture to the next (Adam's 496 lines read 0.92-1.37 ms around the switch; measured 2.08-2.36 ms).
HEAVY_STRETCH_RAMP = 2.0
# The HostModel fields a profile's `host.compiled` fit sets (scripts/fit/fit_compiled_host.py).
COMPILED_HOST_FIELDS = ("generated_launch_us", "cudagraph_replay_us", "replay_input_us", "compiled_graph_us",
                        "compiled_input_us", "compiled_view_us", "compiled_module_us", "replay_module_us",
                        "compiled_call_us", "compiled_backward_us", "replay_backward_us")


def is_compiled_view(op: OpRecord, cost: Cost | None) -> bool:
    """An allocation or reinterpretation Inductor's wrapper makes (no kernel): one compiled_view_us unit."""
    return COMPILED_TAG in op.tags and "host" not in op.tags and (cost is None or cost.kernels == 0)


def compiled_units(op: OpRecord, cost: Cost | None) -> dict[str, float]:
    """How many of each compiled host unit (COMPILED_HOST_FIELDS) one captured op stands for; {} for eager work
    and for work a CUDA graph replays. HostModel prices them at its fields' µs; calibrate/compiled_host.py fits
    those µs from the same counts."""
    if GRAPHED_TAG in op.tags:
        return {}
    if op.op == CUDAGRAPH_REPLAY_OP:
        return {"cudagraph_replay_us": 1, "replay_input_us": op.args.get("inputs", 0),
                "replay_module_us": 1 if op.args.get("modules") else 0,
                "replay_backward_us": 1 if op.phase == "backward" else 0}
    if op.op == COMPILED_CALL_OP:
        return {"compiled_call_us": 1}
    if op.op == COMPILED_GRAPH_OP:
        return {"compiled_graph_us": 1, "compiled_input_us": op.args.get("inputs", 0),
                "compiled_module_us": 1 if op.args.get("modules") else 0,
                "compiled_backward_us": 1 if op.phase == "backward" else 0}
    if op.op.startswith(TRITON_OP_PREFIX):
        return {"generated_launch_us": 1}
    if is_compiled_view(op, cost):
        return {"compiled_view_us": 1}
    return {}


@dataclass(frozen=True)
class HostModel:
    """µs of CPU per eager event on one host."""

    kernel_op_us: float = 8.6  # an op launching one kernel ("add": 7.8 and 9.4 µs in the first two runs)
    grad_extra_us: float = 0.0  # more when autograd records a node for it
    gemm_extra_us: float = 4.8  # a cuBLAS call costs more than a pointwise launch ("mm 16x16": 11.0 and 15.9)
    view_op_us: float = 1.5  # a view or metadata op ("view": 1.37 and 1.58 µs)
    host_only_op_us: float = 6.1  # an op on CPU tensors ("cpu add": 5.2 and 7.1 µs)
    sync_return_us: float = 1.0  # after the GPU drained: the value's copy back and Python resuming
    module_call_us: float = 0.0  # nn.Module.__call__ around a forward
    backward_node_us: float = 0.0  # the autograd engine's extra cost per node, beyond its ops' launches
    foreach_op_us: float = 8.6  # a foreach op, fixed part
    foreach_per_tensor_us: float = 0.0  # and per tensor in its lists
    extra_kernel_launch_us: float = EXTRA_KERNEL_LAUNCH_US
    generated_launch_us: float = GENERATED_LAUNCH_US  # one Inductor Triton kernel launch
    cudagraph_replay_us: float = CUDAGRAPH_REPLAY_US  # one CUDA graph replay of a compiled graph, fixed part
    user_graph_launch_us: float = USER_GRAPH_LAUNCH_US  # a user's CUDAGraph.replay(), fixed part
    user_graph_per_kernel_us: float = USER_GRAPH_PER_KERNEL_US  # and per kernel node
    replay_input_us: float = REPLAY_INPUT_US  # and per tensor input
    replay_module_us: float = COMPILED_MODULE_US  # and more for a graph Dynamo traced through nn.Modules
    replay_backward_us: float = 0.0  # more for a replayed backward graph (AOTAutograd's backward, from autograd)
    compiled_graph_us: float = COMPILED_GRAPH_US  # one call of a compiled graph (guards, AOTAutograd), fixed
    compiled_input_us: float = COMPILED_INPUT_US  # and per tensor input
    compiled_view_us: float = COMPILED_VIEW_US  # an allocation or reinterpretation in Inductor's wrapper
    compiled_module_us: float = COMPILED_MODULE_US  # more for a graph Dynamo traced through nn.Modules
    compiled_backward_us: float = 0.0  # more for a compiled backward graph (AOTAutograd's backward, from autograd)
    compiled_call_us: float = 0.0  # one call of a torch.compile'd function (its frame's way in and out)
    # The model's Python priced by its counted lines (OpRecord.python_lines): µs per line on the target host, fitted
    # to the device's measured steps (the profile's `host.model python`, calibrate/python_lines.py; 0: not fitted),
    # and the fit's held-out spread as factors on it. price_lines: the capture counted them (older ones did not).
    python_line_us: float = 0.0
    python_line_range: tuple[float, float] = (1.0, 1.0)
    price_lines: bool = False
    # The ops recorded right after a compiled graph returned (for_step): the Python the capture read before them
    # is AOTAutograd's and Dynamo's return path on fake tensors, priced in compiled_graph_us.
    compiled_tails: frozenset[int] = frozenset()
    heavy_stretch_min_us: float = HEAVY_STRETCH_MIN_US  # (priced_by_lines; inf: every stretch by its lines)
    python_scale: float = 1.0  # target host's Python time / capture machine's (1: same speed or unknown)
    # The lowest and highest target/capture ratio over the benchmarks both machines ran: the model Python's
    # range on the target. One benchmark only: SINGLE_BENCHMARK_SPREAD either side of it.
    python_scale_range: tuple[float, float] = (1.0, 1.0)
    # this host's speed over its own calibration runs (run_speed_range): every CPU cost x these at the ends
    run_speed_range: tuple[float, float] = (1.0, 1.0)
    cpu_scale: float = 1.0  # every per-op cost on the target host over the calibration's (1: the calibrated host)
    # µs of host time per call of each LIBRARY_CASES op that the profile calibrated (by op name)
    library_call_us: tuple[tuple[str, float], ...] = ()
    library_launch_us: float = 0.0  # per work item such a call launches beyond its case's (0: not calibrated)
    capture_cpu: str = ""  # the CPU the capture ran on, and the target host's ("" where not recorded)
    target_cpu: str = ""
    # The per-op costs come from tight loops of one op; a chain of varied ops (calibrate/host.py, mixed_chain)
    # takes longer per op. Its measured time over what the per-op costs predict for it, forward and backward.
    forward_factor: float = 1.0  # ops that record autograd nodes (and the optimizer's)
    backward_factor: float = 1.0
    no_grad_factor: float = 1.0  # forward ops with autograd off, as in inference
    # How varied the chain was (distinct ops per pass): a step cycling through fewer kinds of op keeps more of
    # them in cache, so its factor is interpolated between 1 (one op, the tight loops) and the chain's.
    forward_chain_kinds: int = 1
    backward_chain_kinds: int = 1
    host: str = "H200 host (workplace device machine), fixed costs from two early runs: unvalidated"

    @staticmethod
    def from_profile(section: dict, host: str, capture: CpuBench | None = None,
                     target: CpuBench | None = None) -> "HostModel":
        """From a profile's `host` section (calibrate/host.py names); missing cases keep the defaults.
        capture: the capture machine's benchmarks (Capture.settings); target: the target host's, measured apart
        from the calibration (None: the host as it calibrated)."""
        def us(name: str) -> float | None:
            case = section.get(name)
            return float(case["median_us"]) if isinstance(case, dict) and "median_us" in case else None

        add, view = us("add (1 kernel)"), us("view (no kernel)")
        if add is None or view is None:
            return HostModel()
        values: dict = {"kernel_op_us": add, "view_op_us": view}
        if (v := us("add, input requires grad (1 kernel)")) is not None:
            values["grad_extra_us"] = max(v - add, 0.0)
        if (v := us("mm 16x16 (1 kernel)")) is not None:
            values["gemm_extra_us"] = max(v - add, 0.0)
        if (v := us("cpu add (host tensors)")) is not None:
            values["host_only_op_us"] = v
        if (v := us("item (sync + memcpy)")) is not None:  # = a view, the copy's launch, the wait, the return
            values["sync_return_us"] = max(v - view - add, 0.0)
        if (f := us("linear functional (1 kernel)")) is not None and (m := us("linear module (1 kernel)")) is not None:
            values["module_call_us"] = max(m - f, 0.0)
        if (v := us("backward node")) is not None:
            values["backward_node_us"] = max(v - add, 0.0)
        few_many = section.get("foreach_tensors")
        if few_many:
            few, many = us(f"foreach add_ x{few_many[0]}"), us(f"foreach add_ x{few_many[1]}")
            if few is not None and many is not None:
                per_tensor = max((many - few) / (few_many[1] - few_many[0]), 0.0)
                values["foreach_per_tensor_us"] = per_tensor
                values["foreach_op_us"] = max(few - per_tensor * few_many[0], 0.0)
        library = tuple((name, v) for name, case in LIBRARY_CASES.items() if (v := us(case)) is not None)
        if library:
            values["library_call_us"] = library
        if (v := us(LIBRARY_LAUNCH_CASE)) is not None:
            values["library_launch_us"] = v
        lines = section.get(MODEL_PYTHON)
        if isinstance(lines, dict) and lines.get("per_line_us"):  # scripts/fit/fit_python_lines.py
            values["python_line_us"] = float(lines["per_line_us"])
            values["python_line_range"] = tuple(float(v) for v in lines.get("range", (1.0, 1.0)))
        compiled = section.get("compiled")
        if isinstance(compiled, dict):  # scripts/fit/fit_compiled_host.py
            values.update({k: float(v) for k, v in compiled.items() if k in COMPILED_HOST_FIELDS})
        chain = section.get("mixed chain")
        if isinstance(chain, dict) and chain.get("ops"):
            values.update(_chain_factors(chain, HostModel(**values)))
        values["run_speed_range"] = run_speed_range(section)
        calibrated = calibration_bench(section)
        on_target = target or calibrated
        if target is not None:
            values["cpu_scale"] = geometric_mean(calibrated.ratios_to(target))
            if values.get("python_line_us") and calibrated.python_us and target.python_us:
                values["python_line_us"] *= target.python_us / calibrated.python_us
        if capture is not None and capture.python_us and on_target.python_us:
            values["python_scale"] = on_target.python_us / capture.python_us
            values["python_scale_range"] = scale_range(capture.ratios_to(on_target))
        return HostModel(**values, host=host, capture_cpu=capture.cpu if capture else "", target_cpu=on_target.cpu)

    def dispatch_us(self, op: OpRecord, cost: Cost | None) -> float:
        """CPU time of the op itself: Python binding, dispatcher, autograd bookkeeping, kernel launches."""
        if op.op == TORCH_SAVE_OP:  # no dispatch: torch.save's own work on the host
            return self.cpu_scale * torch_save_us(op.args)
        build_us = CUDNN_GRAPH_BUILD_US if NEW_CUDNN_GRAPH_TAG in op.tags else 0.0
        return self.cpu_scale * (self._chain_factor(op) * self._tight_loop_us(op, cost) + build_us)

    def _chain_factor(self, op: OpRecord) -> float:
        """The step's chain factor for this op: the engine's for a backward formula; a forward op's for one that
        Python called, in backward too (FROM_PYTHON_TAG: a custom Function's backward, checkpointing's recomputed
        forward), as it goes through the Python bindings."""
        if op.phase == "backward" and FROM_PYTHON_TAG not in op.tags:
            return self.backward_factor
        if host_phase(op.phase) in ("forward", "backward") and "grad" not in op.tags:
            return self.no_grad_factor
        return self.forward_factor

    def _tight_loop_us(self, op: OpRecord, cost: Cost | None) -> float:
        if op.op in RANGE_MARKERS:  # where a profiler range begins or ends: no work (its hooks: parallel_host.py)
            return 0.0
        if op.op == ENGINE_NODES_OP:  # autograd nodes that ran without an op of their own
            return op.args.get("nodes", 0) * self.backward_node_us
        if GRAPHED_TAG in op.tags:  # replayed inside a CUDA graph: the replay's launch covers it
            return 0.0
        if op.op == USER_GRAPH_REPLAY_OP:
            return (self.user_graph_launch_us + self.user_graph_per_kernel_us * op.args.get("kernels", 0)) * self.cpu_scale
        units = compiled_units(op, cost)
        if units:
            return sum(getattr(self, unit) * count for unit, count in units.items())
        if op.op.startswith(HOST_OP_PREFIX):  # a sync outside aten (synchronize, tolist): its wait is the timeline's
            return 0.0
        # the autograd engine's own cost per node, paid at the node's first op whatever that op launches
        engine_us = self.backward_node_us if "node" in op.tags else 0.0
        if "host" in op.tags:
            return self.host_only_op_us + engine_us
        if cost is None or cost.kernels == 0:
            return self.view_op_us + engine_us
        library = dict(self.library_call_us).get(op.name)
        if library is not None:
            return (library + self._library_items_us(op, cost) + engine_us
                    + (self.grad_extra_us if "grad" in op.tags else 0.0))
        if op.name.startswith(FOREACH_PREFIX):
            return self.foreach_op_us + self.foreach_per_tensor_us * max(map(len, tensor_lists(op)), default=1)
        us = self.kernel_op_us + (cost.kernels - 1) * self.extra_kernel_launch_us + engine_us
        if cost.kind == "gemm":
            us += self.gemm_extra_us
        if "grad" in op.tags:
            us += self.grad_extra_us
        return us

    def _library_items_us(self, op: OpRecord, cost: Cost) -> float:
        """Host µs a calibrated library call spends launching work items beyond its case's own."""
        if op.name not in LIBRARY_LAUNCH_OPS or op.name not in dict(self.library_call_us):
            return 0.0
        return max(cost.kernels - LIBRARY_CASE_ITEMS[op.name], 0) * self.library_launch_us

    def library_overlap_us(self, op: OpRecord, cost: Cost | None) -> float:
        """The part of dispatch_us that a library call spends launching its later work items from inside the
        library, while its first ones already run on the GPU (the timeline's Launch.overlap_us)."""
        if cost is None or cost.kernels == 0 or GRAPHED_TAG in op.tags or compiled_units(op, cost):
            return 0.0
        return self.cpu_scale * self._chain_factor(op) * self._library_items_us(op, cost)

    def for_step(self, ops) -> "HostModel":
        """This model with the chain factors interpolated to the variety of the step's own ops."""
        def factor(chain: float, chain_kinds: int, phases: tuple[str, ...]) -> float:
            kinds = len({op.op for op in ops if op.phase in phases and op.parent < 0
                         and not op.op.startswith(HOST_OP_PREFIX) and COMPILED_TAG not in op.tags})
            if chain_kinds <= 1:
                return chain
            share = min(max(kinds - 1, 0) / (chain_kinds - 1), 1.0)
            return 1.0 + (chain - 1.0) * share

        return dataclasses.replace(
            self, compiled_tails=compiled_tails(ops),
            forward_factor=factor(self.forward_factor, self.forward_chain_kinds,
                                        ("forward", POST_BACKWARD, "optimizer")),
            no_grad_factor=factor(self.no_grad_factor, self.forward_chain_kinds, ("forward", POST_BACKWARD)),
            backward_factor=factor(self.backward_factor, self.backward_chain_kinds, ("backward",)))

    def python_us(self, op: OpRecord) -> float:
        """The model's own Python before this op and its module calls, on the target host (none for an op
        replayed in a CUDA graph: no Python runs between a graph's kernels)."""
        return self.captured_python_us(op) + self.module_calls_us(op)

    def captured_python_us(self, op: OpRecord) -> float:
        """The model's Python the capture saw before this op, on the target: its counted lines at the fitted
        µs per line where the capture counted them and the profile has the fit, else the time the capture
        machine read, carried by the Python benchmark's ratio. None before a compiled graph's call or replay
        (Dynamo's guards and AOTAutograd's wrapper) nor inside Inductor's generated wrapper: run here on fake
        tensors under the capture's hooks, the wrapper's Python, its way out included (compiled_tails), read
        more than the device's host measured for the whole compiled call (on scripts/device/probe_compiled_host.py's
        cases, 2026-12-06: the probe's default-mode calls predicted 46% over at the median with every unit at 0),
        so its graph calls, Triton launches and allocations are priced by units instead (_tight_loop_us, fitted
        to that probe: scripts/fit/fit_compiled_host.py)."""
        if (GRAPHED_TAG in op.tags or COMPILED_TAG in op.tags or op.op in (COMPILED_GRAPH_OP, CUDAGRAPH_REPLAY_OP)
                or op.index in self.compiled_tails):
            return 0.0
        share = self.read_share(op)
        if share == 0.0:
            return op.python_lines * self.python_line_us
        if share == 1.0:
            return op.python_us * self.python_scale
        return (1.0 - share) * op.python_lines * self.python_line_us + share * op.python_us * self.python_scale

    def read_share(self, op: OpRecord) -> float:
        """How much of the model Python before this op is priced as the capture read it (1.0), not by its counted
        lines (0.0). A few lines that run for long are C work the lines cannot price (numpy, a tokenizer,
        sum(range(10**7))): the capture's reading stands for them. The margin keeps ordinary stretches the count's:
        the capture's own hand-over reads up to about 0.25 ms beyond their lines' price (a foreach call over 150
        tensors, whose lists the capture's modes walk; the built-in GPT example's AdamW, 2026-12-05), and several
        times their price over hundreds of lines (Adam's 496 in a GCN step, 2026-12-08). From the margin to
        HEAVY_STRETCH_RAMP times it the share rises linearly in the log of the reading, so that a reading's noise
        moves the price by at most its own size, never by a switch's jump."""
        if not self.price_lines or INSIDE_COMPILED_TAG in op.tags:  # (compiled functions' Python: timed)
            return 1.0
        timed = op.python_us * self.python_scale
        margin = HEAVY_STRETCH_FACTOR * op.python_lines * self.python_line_us + self.heavy_stretch_min_us
        if timed <= margin:
            return 0.0
        if timed >= HEAVY_STRETCH_RAMP * margin:
            return 1.0
        return math.log(timed / margin) / math.log(HEAVY_STRETCH_RAMP)

    def priced_by_lines(self, op: OpRecord) -> bool:
        """Whether the model Python before this op is priced wholly by its counted lines (read_share says how
        much of it is priced as read)."""
        return self.read_share(op) == 0.0

    def module_calls_us(self, op: OpRecord) -> float:
        return 0.0 if GRAPHED_TAG in op.tags else op.modules * self.module_call_us * self.cpu_scale

    @property
    def sync_return(self) -> float:
        return self.sync_return_us * self.cpu_scale


def compiled_tails(ops) -> frozenset[int]:
    """The indices of the ops recorded right after a compiled graph's wrapper returned (COMPILED_GRAPH_END_OP):
    the Python read before each is the compiled call's way out (AOTAutograd's runtime wrapper, Dynamo's return),
    not the caller's."""
    ops = list(ops)
    return frozenset(ops[i + 1].index for i, op in enumerate(ops[:-1]) if op.op == COMPILED_GRAPH_END_OP)


# How far either side of a single benchmark's ratio the model Python is given when only the Python benchmark
# was run on both machines: the three benchmarks' ratios between the device host (zoo run, 2026-11-30) and
# the development machine spread from 0.91x to 1.08x their geometric mean (1.85, 2.20, 2.03:
# validation/zoo_measured.json.gz cpu_microbenchmarks, benchmarks/host_determinism.py's cpu_bench).
SINGLE_BENCHMARK_SPREAD = 0.09


# The host's own speed from one process to the next: each calibration run's host costs over their median across
# runs, the median over the cost kinds; the step is also given at the 10th and 90th percentile of those runs'
# speeds. The H200's 18 runs (profiles/h200.json host.runs, separate processes over four days) spread 0.75-1.82,
# 10th-90th percentile 0.88-1.46; a run right after torch.profiler had run in its process was about 1.4x slower
# (scripts/device/host_spread_probe.py --isolate profiler: validation/host_spread/).
RUN_SPREAD_QUANTILES = (0.1, 0.9)
MIN_RUNS_FOR_SPREAD = 3


def run_speed_range(section: dict) -> tuple[float, float]:
    """(slow, fast) host-speed factors the profile's own calibration runs span (RUN_SPREAD_QUANTILES), 1.0 for
    the median run; (1.0, 1.0) with fewer than MIN_RUNS_FOR_SPREAD runs recorded."""
    runs = section.get("runs") or ()
    kinds = [v for v in section.values() if isinstance(v, dict) and v.get("median_us")
             and len(v.get("per_run_median_us") or ()) == len(runs)]
    if len(runs) < MIN_RUNS_FOR_SPREAD or not kinds:
        return (1.0, 1.0)
    speeds = sorted(statistics.median(v["per_run_median_us"][i] / v["median_us"] for v in kinds)
                    for i in range(len(runs)))

    def quantile(q: float) -> float:  # linear between the nearest runs
        at = q * (len(speeds) - 1)
        below = int(at)
        above = min(below + 1, len(speeds) - 1)
        return speeds[below] + (speeds[above] - speeds[below]) * (at - below)

    return (round(quantile(RUN_SPREAD_QUANTILES[0]), 3), round(quantile(RUN_SPREAD_QUANTILES[1]), 3))


def scale_range(ratios: tuple[float, ...]) -> tuple[float, float]:
    """The lowest and highest ratio; one ratio gets SINGLE_BENCHMARK_SPREAD either side."""
    if not ratios:
        return (1.0, 1.0)
    if len(ratios) == 1:
        return (ratios[0] * (1 - SINGLE_BENCHMARK_SPREAD), ratios[0] * (1 + SINGLE_BENCHMARK_SPREAD))
    return (min(ratios), max(ratios))


def geometric_mean(ratios: tuple[float, ...]) -> float:
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else 1.0


def calibration_bench(section: dict) -> CpuBench:
    """The calibrated host's benchmarks: its `cpu bench` case (calibrate/host.py), else its Python benchmark
    alone (profiles made before the three were recorded), fastest run."""
    if isinstance(section.get("cpu bench"), dict):
        return CpuBench.from_json(section["cpu bench"])
    case = section.get("python bench")
    python = float(case["min_us"]) if isinstance(case, dict) and "min_us" in case else 0.0
    return CpuBench(python_us=python, cpu=str(section.get("cpu", "")))


def _chain_factors(chain: dict, base: HostModel) -> dict[str, float]:
    """Measured host time of the mixed chain over its per-op prediction, per pass (1 where unmeasured)."""
    ops = [OpRecord.from_json(o) for o in chain["ops"]]
    no_grad_ops = [OpRecord.from_json(o) for o in chain.get("ops_no_grad", ())]
    out: dict = {}
    for part, mine, name in (("forward", [op for op in ops if op.phase == "forward"], "forward"),
                             ("backward", [op for op in ops if op.phase == "backward"], "backward"),
                             ("forward_no_grad", no_grad_ops, "no_grad")):
        predicted = sum(base._tight_loop_us(op, cost_of(op)) for op in mine)
        measured = chain.get(part, {}).get("median_us")
        if predicted > 0 and measured:
            out[f"{name}_factor"] = measured / predicted
            if name != "no_grad":
                out[f"{name}_chain_kinds"] = len({op.op for op in mine})
    return out
