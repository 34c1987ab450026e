"""Public capture entry points: a workload's build(), a (step, args) pair, or a `with` block."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch

from kernelcast import progress
from kernelcast.devices import DEFAULT_GPU, GPU, get_gpu
from kernelcast.errors import CaptureError
from kernelcast.gc_pause import collect_before_capture, cyclic_gc_paused
from kernelcast.records.memory import BUILD
from kernelcast.records import HOST_OP_PREFIX, Capture

from .compiled import compiled_in, is_compiled_callable
from .cpu_speed import this_machine_bench
from .inductor import check_compile_mode, compile_seconds, compile_step
from .cuda_facade import TargetDevice
from .distributed import check_world_size, distributed_capture, fake_process_group
from .host_clock import TIMING_STEPS, model_entry
from .session import CaptureSession

WARMUP_STEPS = 1  # one unrecorded step first, so optimizer state and lazy buffers exist when we record
# A step running compiled code recompiles while it warms up (the optimizer's state exists from the second step
# on, and Dynamo guards on it): more unrecorded steps, until one compiles nothing, so the recorded step is a
# steady-state one (no compile in it), up to this many.
MAX_COMPILE_WARMUP_STEPS = 3
# A frame whose guard fails every step (a graph break's resume function guarding on a list the step appends to)
# is traced again each step, with no new Inductor graph, until Dynamo's recompile limit (8 by default); from then
# on it runs eagerly. Such steps are cheap to repeat, so the warm-up runs on to that steady state, up to this many.
MAX_DYNAMO_WARMUP_STEPS = 12


def target_device(gpu: GPU) -> TargetDevice:
    return TargetDevice(
        name=gpu.name, capability=gpu.capability if gpu.capability[0] else (9, 0),
        memory_bytes=int(gpu.memory_bytes), sm_count=gpu.sm_count, l2_bytes=int(gpu.l2_bytes),
        supports_bf16=gpu.supports_bf16,
    )


def _session(gpu: str | GPU, compile_mode: str | None = None) -> CaptureSession:
    collect_before_capture()
    spec = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    session = CaptureSession(target_device(spec), spec.cuda_arch, compile_mode, spec.id)
    session.cpu_bench = this_machine_bench()  # before the session: its benchmarks run real CPU tensors
    return session


def _run_steps(session: CaptureSession, step: Callable, args: tuple, timing_steps: int = TIMING_STEPS) -> None:
    session.compiled_found = compiled_in(step, args)
    compiled_whole = is_compiled_callable(step)
    session.real_run_paths.refresh()  # libraries the build imported
    step = _counting_reads_per_step(session, step)
    progress.stage("warm-up step (not recorded)")
    storages = session.storages
    storages.start_warmup()
    for _ in range(WARMUP_STEPS):
        step(*args)
    reading = "fastest"
    regions = session.inductor
    if session.recorder is not None:  # (set up at the first call of compiled code: capture/inductor.py)
        session.recorder.clock.count_compiled_code_as_units(regions is not None or bool(session.compiled_found))
    if regions is not None and regions.graphs:
        graph_steps = 0
        for _ in range(MAX_DYNAMO_WARMUP_STEPS):
            compiled_before, frames_before = regions.graphs, session.dynamo_compiles.count
            step(*args)
            if regions.graphs == compiled_before and session.dynamo_compiles.count == frames_before:
                break
            if regions.graphs == compiled_before:  # Dynamo traced again, Inductor compiled nothing new
                session.warmup_recompiling_steps += 1
            else:
                graph_steps += 1
                if graph_steps >= MAX_COMPILE_WARMUP_STEPS:
                    break
        regions.warm_graphs = regions.graphs
        regions.compile_s = compile_seconds()
        # A compiled step is read as often as an eager one, each op keeping the median of its readings, not the
        # fastest (session.record_timed): read once, one slow stretch of the reading goes into the step (the
        # compiled MLP step's model Python read 269-471 us over six captures, 10.9% spread in the step; read so,
        # 1.8-2.8% in three runs of benchmarks/host_determinism.py; under CUDA graphs 3.8% and 16.9% read once,
        # 7.8% and 9.8% so), and the median keeps a single reading's level, which the compiled host fit was made
        # against (scripts/fit/fit_compiled_host.py).
        reading = "median"
        # A step that calls compiled code has its lines counted, but the Python that runs inside a compiled function's
        # wrapper (a graph break's resume function, AOTAutograd's epilogue, autograd's backward call, CUDA graph trees'
        # bookkeeping) costs the device's host more than the compiled-call units and its counted lines price, and is
        # read as timed (capture/host_clock.py _compiled_function_wrapper). All of it priced by lines, with
        # torch.compile's own Python left out (_COMPILE_PASS), the compiled zoo's default-mode steps went from 14.4% to
        # 22.6% off at the median, reduce-overhead from 5.8% to 7.4%, its host-bound training steps 20-50% short
        # (2026-12-06, scripts/eval/compile_validate.py). The Python outside every compiled function (the loop of
        # transformers' generate() around its compiled forward) is priced by its lines, as in an eager step: timed, the
        # static-cache generate step read 35.2-48.8 ms over seven captures of the same code. A step compiled whole
        # (torch.compile(step), every `--compile` capture) runs all of its Python inside the wrapper: it counts none, as
        # before, since a tracer on its first step only slows that reading.
        if compiled_whole:
            session.end_line_count()
        elif session.recorder is not None:
            session.recorder.clock.time_inside_compiled_functions(True)
        # and its readings keep no fastest-of-several: the first pass through code that runs differently with
        # the module tracker's hooks in place (a warning raised in a module's forward is attributed to another
        # line of Module._call_impl and shown again, its source read from disk) goes to one more warm-up step
        session.tracked_warmup(lambda: step(*args))
    progress.stage("recording the step")
    session.recording = True
    session.record_timed(lambda: step(*args), timing_steps, storages, args, reading)
    session.measure_gap_baselines()
    session.recording = False


def _counting_reads_per_step(session: CaptureSession, step: Callable) -> Callable:
    """`step`, with the host reads at each line counted from each call's start: a stated list of values
    (--assume train.py:40=True*9,False) is one step's reads at that line."""
    @model_entry
    def counted(*args):
        if session.recorder is not None:
            session.recorder.host_reads.new_step()
        return step(*args)

    return counted


def timing_steps_for(world_size: int) -> int:
    """Steps the model's Python is read over: one for a step run as a rank of a fake process group (its
    collective records are indexed by the first step's ops, distributed.py), TIMING_STEPS otherwise."""
    return 1 if world_size > 1 else TIMING_STEPS


def capture_workload(build: Callable[..., tuple[Callable, Any]], gpu: str | GPU = DEFAULT_GPU,
                     workload: str = "", world_size: int = 1, build_kwargs: dict[str, Any] | None = None,
                     prepare: Callable[[Callable, tuple], Callable] | None = None,
                     compile_mode: str | None = None) -> Capture:
    """Run `build(**build_kwargs)` and two steps on fake CUDA tensors; return the second step's ops.

    world_size > 1: run them as rank 0 of that many ranks, in torch's fake process group (see distributed.py);
    DDP / FSDP2 / tensor-parallel steps then record their collectives. prepare(step, args), when given, runs
    after build() inside the capture and returns the step to run (whatif/transforms.py changes a workload so).
    compile_mode: run the step as `torch.compile(step, mode=compile_mode)` would (capture/inductor.py)."""
    check_world_size(world_size)
    if compile_mode is not None:
        check_compile_mode(compile_mode)
    with cyclic_gc_paused(), fake_process_group(world_size), _session(gpu, compile_mode) as session, \
            distributed_capture(world_size, session.recorder) as distributed:
        progress.stage("build()")
        built = build(**(build_kwargs or {}))
        if not (isinstance(built, tuple) and len(built) == 2 and callable(built[0])):
            raise CaptureError("build() must return (step, args), with step callable and args a tuple")
        step, args = built
        args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
        if prepare is not None:
            step = prepare(step, args)
        if compile_mode is not None:
            if session.inductor_missing is not None:
                raise CaptureError(f"--compile needs Inductor, which cannot run here: {session.inductor_missing}")
            step = compile_step(step, compile_mode)
        _run_steps(session, step, args, timing_steps_for(world_size))
        captured = distributed.finish(session.result(workload))
    check_runs_on_gpu(captured)
    return captured


def check_runs_on_gpu(captured: Capture) -> None:
    """A step whose torch ops all ran on CPU tensors has nothing for a GPU to do: the model or its inputs were
    not moved to the GPU, which a prediction of 0 kernels would hide. Raises CaptureError saying so."""
    device_ops = [op for op in captured.ops if not op.op.startswith(HOST_OP_PREFIX)]
    on_gpu = any(t.on_gpu for op in device_ops for t in (*op.tensors_in(), *op.tensors_out()))
    if device_ops and not on_gpu:
        raise CaptureError(f"the step ran on the CPU: none of its {len(device_ops)} torch ops touched a CUDA tensor; "
                           "move the model and its inputs to the GPU in build() (model.cuda(), "
                           "torch.randn(..., device='cuda')), as the step would run on the GPU you name")


def _to_fake_cuda(value: Any) -> Any:
    """Fake CUDA copies of the user's real tensors and modules; the originals are left untouched."""
    import copy

    if isinstance(value, torch.nn.Module):
        clone = copy.deepcopy(value)
        return clone.to("cuda")
    if isinstance(value, torch.Tensor):
        return value.to("cuda")
    if isinstance(value, (list, tuple)):
        return type(value)(_to_fake_cuda(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_fake_cuda(v) for k, v in value.items()}
    return value


def capture_step(step: Callable, args: tuple = (), gpu: str | GPU = DEFAULT_GPU, workload: str = "",
                 world_size: int = 1) -> Capture:
    """Capture `step(*args)`. Tensors and modules in `args` are copied to fake CUDA; anything the step
    reaches in other ways must already be fake (built under `kernelcast.capture()` or by a build())."""
    check_world_size(world_size)
    with cyclic_gc_paused(), fake_process_group(world_size), _session(gpu) as session, \
            distributed_capture(world_size, session.recorder) as distributed:
        fake_args = tuple(_to_fake_cuda(a) for a in args)
        try:
            _run_steps(session, step, fake_args, timing_steps_for(world_size))
        except RuntimeError as exc:
            if "FakeTensor" in str(exc) or "fake" in str(exc).lower():
                raise CaptureError(
                    "the step uses real tensors kernelcast cannot see (e.g. a model closed over by the step): "
                    "pass the model in args, or build it inside `with kernelcast.capture():`") from exc
            raise
        return distributed.finish(session.result(workload))


class CaptureBlock:
    """The `with kernelcast.capture() as cap:` handle: records the ops run inside the block."""

    def __init__(self, gpu: str | GPU) -> None:
        self._gpu = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
        self._session = _session(self._gpu)
        self._capture: Capture | None = None

    def __enter__(self) -> "CaptureBlock":
        self._session.__enter__()
        self._session.recording = True
        self._session.storages.start_step()
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._session.recording:
                # the block's step ends here: the baselines' own loops allocate, and are not the step's memory
                self._session.storages.end_step()
                self._session.measure_gap_baselines()
            self._capture = self._session.result()
        finally:
            self._session.__exit__(*exc)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Run set-up code (building the model, a warm-up step) without recording it. Before the block's first
        recorded op, what it allocates is set-up, as a workload's build() is: resident before the step, and the
        modules and optimizers it makes are found again as the step (re)starts, so their parameters, gradients
        and state are labelled as such (they had been counted as the step's activations and temporaries)."""
        session, storages = self._session, self._session.storages
        setup = not session.recorder.ops
        was = session.recording
        session.recording = False
        if setup:
            storages.stage = BUILD
        try:
            yield
        finally:
            session.recording = was
            if setup:
                storages.forget_owners()
                storages.start_step()

    @property
    def capture(self) -> Capture:
        if self._capture is None:
            raise CaptureError("the capture is read after its `with` block ends")
        return self._capture

    def predict(self, gpu: str | GPU | None = None):
        from kernelcast.predict import predict_capture

        return predict_capture(self.capture, gpu or self._gpu)


def capture(gpu: str | GPU = DEFAULT_GPU) -> CaptureBlock:
    return CaptureBlock(gpu)
