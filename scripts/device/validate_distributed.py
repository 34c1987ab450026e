"""Measure collectives and DDP / FSDP2 training steps on several GPUs; compare kernelcast's predictions.

Device run, one node with 2 GPUs, measuring only (about 3 minutes on 2 H200s; rank 0 writes $OUT; no part
starts after --budget-s, 360 s by default):

    PYTHONPATH=src timeout 470 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
        scripts/device/validate_distributed.py --measure-only --out "$OUT"

Then on any machine, with the code as it is then (re-runnable at any time): capture every measured example
at the measured world size (a subprocess each, one after the other), predict it as for the measured torch,
and write the comparison:

    PYTHONPATH=src python scripts/device/validate_distributed.py --predict-only \
        --measured validation/distributed_measured.json --out /tmp/distcmp

(--reuse-captures re-predicts the captures saved there, for changes to the predict stage only.)

Check the measuring path on a CPU first (gloo, tiny models, one round; the same code otherwise):

    PYTHONPATH=src torchrun --standalone --nproc-per-node 2 scripts/device/validate_distributed.py --dry-run-cpu \
        --out /tmp/distdry

Without --measure-only a device run also predicts and compares at the end, on rank 0; that writes a capture
and a prediction per example beside the measurements, more files than the device tool brings back.

What the device run measures, in this order (rank 0 rewrites its files after every part, so a run cut short
keeps what finished; a part that fails is recorded with its traceback and the next one runs; no part starts
after --budget-s seconds):
1. all_reduce / all_gather_into_tensor / reduce_scatter_tensor against message size S, 1 KiB to 1 GiB
   (nccl-tests' S: the whole buffer, the whole gathered output, the whole scattered input), fp32, and bf16
   all_reduce at a few sizes; each point the median of `reps` CUDA-event timings after `warmup` calls
   (Protocol), with algbw = S / t and busbw by nccl-tests' factors;
2. twelve training steps (CONFIGS): the code of example:llama_fsdp, llama_ddp, llama, gpt_fsdp, gpt_ddp and
   gpt (their make_model(), wrap() and training_step(), the functions their build() calls), each distributed
   one with and without communication (VARIANT_HOW says what each variant keeps). Per step config, on every
   rank:
   - the step time: median over `rounds` rounds of `steps` back-to-back steps between CUDA events, and the
     host time of every step in those rounds (perf_counter around step(), no synchronize);
   - `host_steps` single steps from an idle GPU: the CPU time until step() returns (after its last launch)
     and the wall time to a synchronize;
   - `profile_active` steps under torch.profiler (CPU + CUDA, shapes) after `profile_warmup`: rank 0 keeps a
     compact record (every CPU op, record_function range, CUDA runtime call and GPU kernel / memcpy / memset
     with its stream and duration, linked by external id and correlation id) and the raw chrome trace; every
     rank a summary (kernel time per stream, NCCL kernels apart, FSDP2's copy ops, the FSDP::* and DDP
     ranges, time inside aten ops per thread, the top CPU ops);
3. the environment: torch, CUDA, NCCL, GPUs, CPU, and kernelcast's Python benchmark on this host.

Files (--out): distributed_measured.json (all of the above but the compact profiles), distributed_profiles.json.gz
(rank 0's compact profiles), distributed_traces.tar (rank 0's raw chrome traces, gzipped, while they fit in
TRACE_TAR_MAX_BYTES), log_rank<N>.txt. --predict-only writes distributed_compare.json, and capture_<example>.json
and predicted_<example>.json for each example.

The targets (issue 15): step time within 10% for every DDP and FSDP2 step, exposed communication (the step
minus the same step with no-op communication) within 20%.

NVLink multicast stays off (NVLS can take the host's shared GPUs out of service): the variables below are set
before NCCL or PyTorch start, in this process and in every process it starts.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import gzip
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

# The workplace's multicast-off variables (/work/.library/device/KINDS.md): NCCL, PyTorch symmetric memory,
# NVSHMEM. Set before torch (and NCCL) load; torchrun's children inherit them from here on.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(MULTICAST_OFF)

import kernelcast  # noqa: E402,F401  (before torch: a CPU-only torch needs its fake CUDA hooks first)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GPU = "h200"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}  # nccl-tests doc/PERFORMANCE.md
STEP_TOLERANCE = 0.10  # the issue's targets: step time within 10%,
EXPOSED_TOLERANCE = 0.20  # exposed communication within 20%
PG_TIMEOUT_S = 180  # a rank stuck in a collective (its peer failed) is ended by NCCL's watchdog after this
BUDGET_S = 360  # no new part starts after this many seconds of the run (the device call allows about 480)
TRACE_TAR_MAX_BYTES = 15 * 2 ** 20  # files that come back from the device must stay under 16 MiB
NCCL_KERNEL_PREFIX = "nccl"  # NCCL's kernels are named ncclDevKernel_* / ncclKernel_*
TOP_CPU_OPS = 60  # CPU ops by total time kept in each profile summary
MEASURED_FILE, PROFILES_FILE, TRACES_FILE = "distributed_measured.json", "distributed_profiles.json.gz", \
    "distributed_traces.tar"
COMPARE_FILE = "distributed_compare.json"


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How many calls and steps each measurement takes."""

    warmup: int  # collective calls before timing a size: NCCL sets up channels and buffers on the first ones
    reps: int  # timed collective calls per point; the median is kept, the raw times too
    sizes_bytes: tuple[int, ...]  # fp32 message sizes of the sweep
    bf16_all_reduce_bytes: tuple[int, ...]  # bf16 all_reduce sizes (the reduction's dtype changes its kernel)
    step_warmup: int  # steps before timing: allocator, cuBLAS/cuDNN heuristics, DDP's bucket rebuild (step 2)
    steps: int  # steps per timed round, back to back (what kernelcast's steady-state step time predicts)
    rounds: int  # timed rounds; the median round is kept
    host_steps: int  # single steps from an idle GPU: host time to the last launch, wall time to a synchronize
    profile_warmup: int  # profiled steps thrown away (the profiler's own start-up)
    profile_active: int  # profiled steps kept


DEVICE_PROTOCOL = Protocol(warmup=5, reps=20, sizes_bytes=tuple(4 ** k * 1024 for k in range(11)),  # 1 KiB-1 GiB
                           bf16_all_reduce_bytes=(2 ** 20, 2 ** 24, 2 ** 26, 2 ** 28), step_warmup=3, steps=10,
                           rounds=5, host_steps=10, profile_warmup=1, profile_active=2)
DRY_PROTOCOL = Protocol(warmup=1, reps=2, sizes_bytes=(1024, 16384, 65536), bf16_all_reduce_bytes=(16384,),
                        step_warmup=1, steps=2, rounds=1, host_steps=2, profile_warmup=1, profile_active=1)

# (make_model kwargs, training_step kwargs) per model example: the examples' own sizes on the device, tiny
# ones for the CPU dry run.
DEVICE_SIZES: dict[str, tuple[dict, dict]] = {"gpt": ({}, {}), "llama": ({}, {})}
TINY_SIZES: dict[str, tuple[dict, dict]] = {
    "gpt": (dict(layers=2, width=64, heads=2, vocab=128, context=32), dict(batch=2, seq=32, vocab=128)),
    "llama": (dict(hidden=64, intermediate=128, heads=4, kv_heads=2, layers=2, vocab=128, seq=32),
              dict(batch=2, seq=32, vocab=128)),
}

VARIANT_HOW = {
    "full": "the example's step as is",
    "noop_comm": "FSDP2 with every all-gather and reduce-scatter a no-op (FSDPModule.set_custom_all_gather / "
                 "set_custom_reduce_scatter): the same hooks, DTensor dispatch, copy-in / copy-out kernels, side "
                 "streams and sharded optimizer, no communication and no wait on the other rank (the gathered "
                 "parameters hold stale memory: a timing run only)",
    "noop_hook": "DDP with a comm hook that returns its bucket untouched (ddp_comm_hooks.debugging_hooks.noop_hook): "
                 "the reducer's autograd hooks and bucket copies (a plain copy where the default hook's copy "
                 "also divides), the buffer broadcast before forward; no gradient all-reduce",
    "no_sync": "forward and backward under DDP.no_sync(): no reducer work at all (no bucket copies, no "
               "all-reduce, no buffer broadcast); DDP's forward wrapper still runs",
    "single": "the unwrapped model on one GPU per rank, no collective in the step: the compute reference (unsharded: "
              "the whole optimizer, no copies, no hooks; for llama_fsdp, bf16 autocast where FSDP2 casts "
              "parameters through its policy)",
}


@dataclasses.dataclass(frozen=True)
class StepConfig:
    name: str
    model: str  # the example that defines the model and its training step: gpt | llama
    example: str  # the example whose wrapping and step options it runs (gpt_ddp, llama_fsdp, ...)
    variant: str  # a VARIANT_HOW key

    @property
    def parallel(self) -> str:
        return self.example.removeprefix(self.model).lstrip("_") or "single"


def _configs() -> tuple[StepConfig, ...]:
    """Most important first (the issue's case: FSDP2 of a Llama-shaped decoder), in case the run is cut short."""
    out = []
    for model in ("llama", "gpt"):
        out += [StepConfig(f"{model}_fsdp", model, f"{model}_fsdp", "full"),
                StepConfig(f"{model}_fsdp.noop_comm", model, f"{model}_fsdp", "noop_comm"),
                StepConfig(model, model, model, "single"),
                StepConfig(f"{model}_ddp", model, f"{model}_ddp", "full"),
                StepConfig(f"{model}_ddp.noop_hook", model, f"{model}_ddp", "noop_hook"),
                StepConfig(f"{model}_ddp.no_sync", model, f"{model}_ddp", "no_sync")]
    return tuple(out)


CONFIGS = _configs()
# the variant whose step, subtracted from the full step, is the measured exposed communication
NO_COMM_VARIANT = {"fsdp": "noop_comm", "ddp": "noop_hook"}


# -- predictions (CPU side) ----------------------------------------------------------------------------------
def predicted_collectives(world_size: int, interconnect: str | None, sizes_bytes=DEVICE_PROTOCOL.sizes_bytes
                          ) -> list[dict]:
    from kernelcast.devices import get_gpu
    from kernelcast.devices.interconnects import get_interconnect, natural_interconnect
    from kernelcast.predict.comm import collective_time, host_issue_us

    link = get_interconnect(interconnect) if interconnect else natural_interconnect(get_gpu(GPU))
    rows = []
    for collective in COLLECTIVES:
        for size in sizes_bytes:
            est = collective_time(collective, size, world_size, link)
            issue = host_issue_us(collective, link) or 0.0  # the sweep's CUDA events include the CPU's issue
            rows.append({"collective": collective, "bytes": size, "interconnect": link.id,
                         "predicted_us": issue + est.time_us, "predicted_kernel_us": est.time_us,
                         "predicted_issue_us": issue, "algorithm": est.algorithm, "protocol": est.protocol,
                         "predicted_busbw_gb_per_s": est.busbw_bytes_per_s / 1e9})
    return rows


def _capture(example: str, world_size: int, path: Path) -> dict | None:
    """Capture example:NAME as rank 0 of world_size in a process of its own (this one may hold a real NCCL
    group, and a capture runs in a fake one; torchrun's rendezvous variables are left out so nothing in it joins
    the real job). None when it worked, else the error."""
    cmd = [sys.executable, "-m", "kernelcast", "capture", f"example:{example}", "--gpu", GPU,
           "--world-size", str(world_size), "-o", str(path)]
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1], "command": " ".join(cmd)}
    return None


def _predicted_numbers(pred, pred_json: dict) -> dict:
    comm = pred_json.get("comm") or {}
    hooks = pred_json.get("parallel_host") or {}
    return {"step_ms": pred.step_time_us / 1e3, "gpu_time_ms": pred.gpu_time_us / 1e3,
            "host_time_ms": pred.host_time_us / 1e3, "python_time_ms": pred.python_time_us / 1e3,
            "kernels": pred.kernels, "bound": pred.bound,
            "compute_ms": comm.get("compute_us", pred.gpu_time_us) / 1e3,
            "comm_ms": comm.get("comm_us", 0) / 1e3, "exposed_comm_ms": comm.get("exposed_comm_us", 0) / 1e3,
            "noop_saving_ms": comm.get("noop_saving_us", 0) / 1e3, "issue_host_ms": comm.get("issue_host_us", 0) / 1e3,
            "hook_host_ms": hooks.get("hook_us", 0) / 1e3, "fsdp_units": hooks.get("fsdp_units", {}),
            "unmodelled_hooks": hooks.get("unmodelled_hooks", []), "collectives": comm.get("collectives", 0),
            "step_without_comm_ms": comm.get("step_without_comm_us", pred.step_time_us) / 1e3}


def phase_speed(index: dict[str, float] | None) -> dict[str, float] | None:
    """A profile's host speed index per thread as predict_capture's host_speed per phase: backward runs on the
    autograd thread, forward and optimizer on the Python thread."""
    if not index:
        return None
    return {"forward": index.get("main", 1.0), "optimizer": index.get("main", 1.0),
            "backward": index.get("autograd", 1.0)}


def predicted_step(example: str, world_size: int, interconnect: str | None, out: Path,
                   torch_version: str | None = None, reuse_capture: bool = False, repeat: int = 1,
                   speed: dict[str, float] | None = None) -> dict:
    """Capture example:NAME `repeat` times, one after the other, as out/capture_NAME[.rK].json (a capture times
    the model's Python on this machine: a busy CPU inflates it, so repeated captures show how much, and the
    median is kept); predict each here as for `torch_version` (the measured run's: multi_tensor_apply's launch
    rules changed between versions), out/predicted_NAME[.rK].json. The numbers are those of the capture whose
    predicted step is the median; `repeats` lists every capture's step and the load average around it. With
    `speed` (the measured run's host speed index per thread), also the step at that host speed: a diagnostic
    that separates the model's error from the device host's state, not a prediction."""
    from kernelcast.predict import predict_capture
    from kernelcast.records import Capture
    from kernelcast.report import prediction_json

    runs = []
    for k in range(repeat):
        suffix = f".r{k}" if repeat > 1 else ""
        capture_path = out / f"capture_{example}{suffix}.json"
        started, load = time.perf_counter(), _load_average()
        if not (reuse_capture and capture_path.exists()):
            failed = _capture(example, world_size, capture_path)
            if failed:
                return failed
        capture_s = time.perf_counter() - started
        cap = Capture.load(capture_path)
        if torch_version:
            cap = dataclasses.replace(cap, settings=dataclasses.replace(cap.settings, torch_version=torch_version))
        pred = predict_capture(cap, GPU, interconnect=interconnect if world_size > 1 else None)
        pred_json = prediction_json(pred)
        (out / f"predicted_{example}{suffix}.json").write_text(json.dumps(pred_json, indent=1))
        at_speed = predict_capture(cap, GPU, interconnect=interconnect if world_size > 1 else None,
                                   host_speed=phase_speed(speed)) if speed else None
        runs.append({**_predicted_numbers(pred, pred_json), "kernel_model": pred_json["kernel_model"],
                     "step_at_measured_host_speed_ms": at_speed.step_time_us / 1e3 if at_speed else None,
                     "host_model": pred_json["host"], "capture_python_bench_us": cap.settings.python_bench_us,
                     "capture_s": round(capture_s, 1), "load_average": [load, _load_average()],
                     "capture": capture_path.name})
    steps = sorted(r["step_ms"] for r in runs)
    chosen = min(runs, key=lambda r: (abs(r["step_ms"] - statistics.median(steps)), r["step_ms"]))
    return {**chosen, "as_torch": torch_version or cap.settings.torch_version,
            "captured_with_torch": cap.settings.torch_version, "reused_capture": reuse_capture,
            "repeats": [{k: r[k] for k in ("step_ms", "host_time_ms", "python_time_ms", "capture_s",
                                          "load_average", "capture")} for r in runs],
            "step_ms_range": [steps[0], steps[-1]],
            "command": f"{sys.executable} -m kernelcast capture example:{example} --gpu {GPU} "
                       f"--world-size {world_size}"}


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


# -- measurements (GPU side; CPU with gloo for the dry run) --------------------------------------------------
def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _timed_ms(fn, reps: int, cuda: bool) -> list[float]:
    """One CUDA-event pair per call (kernelcast.measure back_to_back_ms at one step): device time of each call,
    launch overhead included when it is exposed; a host timer per call without CUDA (gloo)."""
    if cuda:
        from kernelcast.measure import back_to_back_ms

        return back_to_back_ms(fn, 1, reps)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _collective_call(collective: str, size: int, dtype: torch.dtype, world_size: int, device: str):
    numel = size // torch.tensor([], dtype=dtype).element_size()
    if collective == "all_reduce":
        buf = torch.ones(numel, dtype=dtype, device=device)
        return lambda: dist.all_reduce(buf)
    if collective == "all_gather":  # S = the gathered output
        inp = torch.ones(numel // world_size, dtype=dtype, device=device)
        outp = torch.empty(numel // world_size * world_size, dtype=dtype, device=device)
        return lambda: dist.all_gather_into_tensor(outp, inp)
    inp = torch.ones(numel // world_size * world_size, dtype=dtype, device=device)  # reduce_scatter: S = input
    outp = torch.empty(numel // world_size, dtype=dtype, device=device)
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor  # the newer name
    return lambda: reduce_scatter(outp, inp)


def measure_collectives(proto: Protocol, world_size: int, device: str) -> list[dict]:
    cuda = device == "cuda"
    points = [(c, s, torch.float32) for c in COLLECTIVES for s in proto.sizes_bytes]
    points += [("all_reduce", s, torch.bfloat16) for s in proto.bf16_all_reduce_bytes]
    rows = []
    for collective, size, dtype in points:
        call = _collective_call(collective, size, dtype, world_size, device)
        for _ in range(proto.warmup):
            call()
        _sync(cuda)
        dist.barrier()
        times_ms = _timed_ms(call, proto.reps, cuda)
        median_us = statistics.median(times_ms) * 1e3
        algbw = size / (median_us * 1e-6)
        rows.append({"collective": collective, "dtype": str(dtype).removeprefix("torch."), "bytes": size,
                     "measured_us": median_us, "measured_us_all": [round(t * 1e3, 3) for t in times_ms],
                     "algbw_gb_per_s": algbw / 1e9,
                     "busbw_gb_per_s": algbw * BUS_FACTOR[collective](world_size) / 1e9})
        del call
    if cuda:
        torch.cuda.empty_cache()
    return rows


def _noop_fsdp_comms():
    """FSDP2 all-gather and reduce-scatter that allocate as the defaults do and communicate nothing."""
    from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter  # torch >= 2.8

    class NoopAllGather(AllGather):
        def allocate(self, size, *, dtype, device):
            return torch.empty(*size, dtype=dtype, device=device)

        def __call__(self, output_tensor, input_tensor, group, async_op=False):
            return None

    class NoopReduceScatter(ReduceScatter):
        def allocate(self, size, *, dtype, device):
            return torch.empty(*size, dtype=dtype, device=device)

        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            return None

    return NoopAllGather(), NoopReduceScatter()


def build_config(cfg: StepConfig, sizes: dict[str, tuple[dict, dict]], device: str):
    """(model, step, args): the example's own model, wrapping and training step, with the variant applied."""
    import importlib

    base = importlib.import_module(f"kernelcast.examples.{cfg.model}")
    example = importlib.import_module(f"kernelcast.examples.{cfg.example}")
    model_kwargs, step_kwargs = sizes[cfg.model]
    model = base.make_model(**model_kwargs, device=device)
    if cfg.parallel != "single":
        model = example.wrap(model)
    step_context = contextlib.nullcontext
    if cfg.variant == "no_sync":
        step_context = model.no_sync
    elif cfg.variant == "noop_hook":
        from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook

        model.register_comm_hook(None, noop_hook)
    elif cfg.variant == "noop_comm":
        from torch.distributed.fsdp import FSDPModule

        all_gather, reduce_scatter = _noop_fsdp_comms()
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.set_custom_all_gather(all_gather)
                module.set_custom_reduce_scatter(reduce_scatter)
    step, args = base.training_step(model, **step_kwargs, device=device, step_context=step_context,
                                    **getattr(example, "STEP_OPTIONS", {}))
    return model, step, args


def time_rounds(step, args, proto: Protocol, cuda: bool) -> dict:
    """Median per-step time over rounds of back-to-back steps, and the host time of each of those steps."""
    for _ in range(proto.step_warmup):
        step(*args)
    _sync(cuda)
    rounds_ms, issue_ms = [], []
    for _ in range(proto.rounds):
        dist.barrier()
        _sync(cuda)
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for _ in range(proto.steps):
            s = time.perf_counter()
            step(*args)
            issue_ms.append((time.perf_counter() - s) * 1e3)
        if cuda:
            end.record()
            end.synchronize()
            rounds_ms.append(start.elapsed_time(end) / proto.steps)
        else:
            rounds_ms.append((time.perf_counter() - t0) * 1e3 / proto.steps)
    return {"median_ms": statistics.median(rounds_ms), "rounds_ms": rounds_ms,
            "issue_ms_back_to_back": [round(t, 4) for t in issue_ms]}


def time_host(step, args, proto: Protocol, cuda: bool) -> dict:
    """Single steps from an idle GPU: CPU time until step() returns (after its last launch; no synchronize),
    and the wall time to the synchronize after it."""
    issue_ms, wall_ms = [], []
    for _ in range(proto.host_steps):
        _sync(cuda)
        t0 = time.perf_counter()
        step(*args)
        t1 = time.perf_counter()
        _sync(cuda)
        t2 = time.perf_counter()
        issue_ms.append(round((t1 - t0) * 1e3, 4))
        wall_ms.append(round((t2 - t0) * 1e3, 4))
    return {"issue_ms": issue_ms, "wall_ms": wall_ms, "issue_ms_median": statistics.median(issue_ms),
            "wall_ms_median": statistics.median(wall_ms)}


def profile_trace(step, args, proto: Protocol, cuda: bool, path: Path) -> dict:
    """The raw chrome trace of PROFILE_ACTIVE back-to-back steps (the last one synchronized before the profiler
    stops), after PROFILE_WARMUP profiled steps that are dropped."""
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    total = proto.profile_warmup + proto.profile_active
    with profile(activities=activities, record_shapes=True,
                 schedule=schedule(wait=0, warmup=proto.profile_warmup, active=proto.profile_active),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for i in range(total):
            step(*args)
            if i == total - 1:
                _sync(cuda)
            prof.step()
    return json.loads(path.read_text())


# -- profile records (pure functions of a chrome trace) -------------------------------------------------------
class _Interner:
    def __init__(self) -> None:
        self.values: list = []
        self._index: dict = {}

    def __call__(self, value) -> int:
        key = json.dumps(value) if not isinstance(value, str) else value
        if key not in self._index:
            self._index[key] = len(self.values)
            self.values.append(value)
        return self._index[key]


COMPACT_COLUMNS = {
    "cpu_ops": ("name", "ts_us", "dur_us", "thread", "external_id", "input_dims", "input_types"),
    "ranges": ("name", "ts_us", "dur_us", "thread", "external_id"),  # record_function ranges (user_annotation)
    "runtime": ("name", "ts_us", "dur_us", "thread", "correlation", "external_id"),  # CUDA runtime/driver calls
    "gpu": ("kind", "name", "ts_us", "dur_us", "stream", "correlation", "external_id", "grid", "block", "bytes"),
    "gpu_ranges": ("name", "ts_us", "dur_us", "stream"),  # record_function ranges as the GPU saw them
}
_GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
_RUNTIME_CATS = ("cuda_runtime", "cuda_driver")


def compact_trace(trace: dict) -> dict:
    """Every CPU op, record_function range, CUDA runtime call and GPU work item of a chrome trace, as rows of
    COMPACT_COLUMNS; names, shapes and input types interned in `strings`. Times in µs from the first
    ProfilerStep's start; CPU threads numbered in `threads` (their names), GPU streams by their CUDA id."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    steps = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    t0 = steps[0]["ts"] if steps else min((e["ts"] for e in events), default=0.0)
    thread_names = {e.get("tid"): e["args"].get("name") for e in trace.get("traceEvents", [])
                    if e.get("ph") == "M" and e.get("name") == "thread_name"}
    strings = _Interner()
    threads: dict = {}

    def thread(e):
        key = (e.get("pid"), e.get("tid"))
        if key not in threads:
            threads[key] = {"index": len(threads), "name": thread_names.get(e.get("tid"), str(e.get("tid")))}
        return threads[key]["index"]

    def ts(e):
        return round(e["ts"] - t0, 3)

    rows: dict[str, list] = {key: [] for key in COMPACT_COLUMNS}
    for e in sorted(events, key=lambda e: e["ts"]):
        cat, a = e.get("cat"), e.get("args", {})
        dur = round(e.get("dur", 0.0), 3)
        if cat == "cpu_op":
            rows["cpu_ops"].append([strings(e["name"]), ts(e), dur, thread(e), a.get("External id"),
                                    strings(a.get("Input Dims", [])), strings(a.get("Input type", []))])
        elif cat == "user_annotation":
            rows["ranges"].append([strings(e["name"]), ts(e), dur, thread(e), a.get("External id")])
        elif cat in _RUNTIME_CATS:
            rows["runtime"].append([strings(e["name"]), ts(e), dur, thread(e), a.get("correlation"),
                                    a.get("External id")])
        elif cat in _GPU_KINDS:
            rows["gpu"].append([_GPU_KINDS[cat], strings(e["name"]), ts(e), dur, a.get("stream", e.get("tid")),
                                a.get("correlation"), a.get("External id"), a.get("grid"), a.get("block"),
                                a.get("bytes")])
        elif cat == "gpu_user_annotation":
            rows["gpu_ranges"].append([strings(e["name"]), ts(e), dur, a.get("stream", e.get("tid"))])
    return {"columns": {k: list(v) for k, v in COMPACT_COLUMNS.items()}, "strings": strings.values,
            "threads": [t["name"] for t in sorted(threads.values(), key=lambda t: t["index"])],
            "steps": [[ts(e), round(e["dur"], 3)] for e in steps], **rows}


def _top_level_us(spans: list[tuple[float, float]]) -> float:
    """Time covered by spans that no other span contains (CPU ops nest: aten::linear holds aten::addmm)."""
    total, end = 0.0, float("-inf")
    for start, dur in sorted(spans, key=lambda s: (s[0], -s[1])):
        if start >= end:
            total += dur
            end = start + dur
        elif start + dur > end:  # overlaps without nesting (clock jitter): count the part outside
            total += start + dur - end
            end = start + dur
    return total


def summarize_profile(compact: dict) -> dict:
    """Per-step totals of a compact profile: CPU span, host time to the last launch, host time outside any aten
    op per thread, GPU time by stream (NCCL kernels apart), and counts of FSDP2's ops and of every range."""
    s = compact["strings"]
    n_steps = max(len(compact["steps"]), 1)
    steps_end = [ts + dur for ts, dur in compact["steps"]]
    last_launch = []
    for (start, _), end in zip(compact["steps"], steps_end):
        ends = [r[1] + r[2] for r in compact["runtime"] if start <= r[1] < end]
        last_launch.append(round((max(ends) - start) / 1e3, 4) if ends else None)
    by_stream: dict = {}
    gpu = {"compute_kernel_ms": 0.0, "nccl_kernel_ms": 0.0, "kernels": 0, "nccl_kernels": 0, "memcpy": 0,
           "memset": 0, "memcpy_ms": 0.0, "memset_ms": 0.0}
    for kind, name, _, dur, stream, *_ in compact["gpu"]:
        row = by_stream.setdefault(str(stream), [0, 0.0])
        row[0] += 1
        row[1] += dur / 1e3
        if kind == "kernel":
            nccl = s[name].startswith(NCCL_KERNEL_PREFIX)
            gpu["nccl_kernels" if nccl else "kernels"] += 1
            gpu["nccl_kernel_ms" if nccl else "compute_kernel_ms"] += dur / 1e3
        else:
            gpu[kind] += 1
            gpu[f"{kind}_ms"] += dur / 1e3
    per_step = {k: round(v / n_steps, 4) for k, v in gpu.items()}
    ops: dict = {}
    spans_by_thread: dict = {}
    for name, ts, dur, thread, *_ in compact["cpu_ops"]:
        row = ops.setdefault(s[name], [0, 0.0])
        row[0] += 1
        row[1] += dur / 1e3
        spans_by_thread.setdefault(thread, []).append((ts, dur))
    ranges: dict = {}
    for name, ts, dur, thread, _ in compact["ranges"]:
        if not s[name].startswith("ProfilerStep#"):
            row = ranges.setdefault(s[name], [0, 0.0])
            row[0] += 1
            row[1] += dur / 1e3
    top = sorted(ops.items(), key=lambda kv: -kv[1][1])[:TOP_CPU_OPS]
    return {
        "steps": len(compact["steps"]),
        "cpu_step_ms": [round(dur / 1e3, 4) for _, dur in compact["steps"]],
        "last_launch_ms": last_launch,
        "gpu_per_step": per_step,
        "gpu_by_stream_per_step": {k: [v[0] / n_steps, round(v[1] / n_steps, 4)] for k, v in by_stream.items()},
        "cpu_ops_per_step": len(compact["cpu_ops"]) / n_steps,
        "in_aten_ops_ms_per_step_by_thread": {compact["threads"][t]: round(_top_level_us(v) / 1e3 / n_steps, 4)
                                              for t, v in spans_by_thread.items()},
        "fsdp_ops": {k: [v[0], round(v[1], 4)] for k, v in ops.items() if k.startswith("fsdp::")},
        "ranges": {k: [v[0], round(v[1], 4)] for k, v in ranges.items()},
        "top_cpu_ops": [[k, v[0], round(v[1], 4)] for k, v in top],
    }


# -- the device run ------------------------------------------------------------------------------------------
class Log:
    """Every rank's lines go to its file; rank 0's (and any rank's failures) to stdout as well."""

    def __init__(self, path: Path, rank: int, started: float) -> None:
        self.path, self.rank, self.started = path, rank, started
        path.write_text("")

    def __call__(self, text: str, always: bool = False) -> None:
        line = f"[rank {self.rank} {time.perf_counter() - self.started:6.1f} s] {text}"
        if self.rank == 0 or always:
            print(line, flush=True)
        with self.path.open("a") as f:
            f.write(line + "\n")


def _environment(device: str) -> dict:
    import importlib.metadata

    from kernelcast.capture.cpu_speed import python_bench_us

    env = {**MULTICAST_OFF, "torch": torch.__version__, "python": platform.python_version(),
           "cpu": _cpu_model(), "cpu_count": os.cpu_count(), "python_bench_us": python_bench_us(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        env["transformers"] = importlib.metadata.version("transformers")
    with contextlib.suppress(AttributeError):
        env["cpus_usable"] = len(os.sched_getaffinity(0))
    if device == "cuda":
        env.update({"cuda": torch.version.cuda, "device": torch.cuda.get_device_name(),
                    "device_count": torch.cuda.device_count(), "cudnn": torch.backends.cudnn.version()})
        with contextlib.suppress(Exception):  # an informational field: a build without NCCL has none
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    return env


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def _git_commit() -> str | None:
    """HEAD, "+dirty" when tracked files changed; None where there is no git or no repository (the device's
    copy of the working tree may have neither)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=ROOT).stdout.strip()
    except OSError:
        return None
    return done.stdout.strip() + ("+dirty" if dirty else "") if done.returncode == 0 else None


def _local_numel(model) -> int:
    return sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in model.parameters())


def measure_config(cfg: StepConfig, sizes, proto: Protocol, device: str, trace_path: Path
                   ) -> tuple[dict, dict | None]:
    """(this rank's measurements, its compact profile or None) of one step config."""
    cuda = device == "cuda"
    started = time.perf_counter()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    model, step, args = build_config(cfg, sizes, device)
    result: dict = {"build_s": round(time.perf_counter() - started, 2), "local_parameters": _local_numel(model)}
    result["timed"] = time_rounds(step, args, proto, cuda)
    result["host"] = time_host(step, args, proto, cuda)
    compact = None
    try:  # the profiler is the likeliest part to fail (CUPTI, trace format): keep the timings if it does
        compact = compact_trace(profile_trace(step, args, proto, cuda, trace_path))
        result["profile"] = summarize_profile(compact)
    except Exception as exc:
        result["profile_error"] = f"{type(exc).__name__}: {exc}"[:2000]
        result["profile_traceback"] = traceback.format_exc()[-4000:]
    if cuda:
        result["max_memory_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2 ** 30, 3)
    del model, step, args
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    result["total_s"] = round(time.perf_counter() - started, 2)
    return result, compact


class Writer:
    """Rank 0's files, rewritten after every part so that a run cut short keeps what finished."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.profiles: dict = {}
        for name in (MEASURED_FILE, PROFILES_FILE, TRACES_FILE):
            (out / name).unlink(missing_ok=True)

    def _replace(self, name: str, data: bytes) -> None:
        tmp = self.out / f".{name}.tmp"
        tmp.write_bytes(data)
        tmp.replace(self.out / name)

    def measured(self, record: dict) -> None:
        self._replace(MEASURED_FILE, json.dumps(record, indent=1).encode())

    def profile(self, name: str, compact: dict) -> None:
        self.profiles[name] = compact
        self._replace(PROFILES_FILE, gzip.compress(json.dumps(self.profiles, separators=(",", ":")).encode()))

    def trace(self, name: str, raw_path: Path) -> bool:
        """Adds the raw trace, gzipped, to the tar if it stays under TRACE_TAR_MAX_BYTES."""
        data = gzip.compress(raw_path.read_bytes())
        tar_path = self.out / TRACES_FILE
        size = tar_path.stat().st_size if tar_path.exists() else 0
        if size + len(data) + 2048 > TRACE_TAR_MAX_BYTES:
            return False
        with tarfile.open(tar_path, "a") as tar:
            info = tarfile.TarInfo(f"{name}.rank0.json.gz")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        return True


def _rank0_decides(rank: int, value):
    box = [value if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def run_measurements(args) -> dict | None:
    """Measure on every rank; rank 0 returns (and writes) the record, the others None."""
    started = time.perf_counter()
    dry = args.dry_run_cpu
    device, backend = ("cpu", "gloo") if dry else ("cuda", "nccl")
    proto, sizes = (DRY_PROTOCOL, TINY_SIZES) if dry else (DEVICE_PROTOCOL, DEVICE_SIZES)
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    init = {"backend": backend, "timeout": datetime.timedelta(seconds=PG_TIMEOUT_S)}
    if not dry:
        torch.cuda.set_device(local_rank)
        init["device_id"] = torch.device("cuda", local_rank)
    dist.init_process_group(**init)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / f"log_rank{rank}.txt", rank, started)
    writer = Writer(out) if rank == 0 else None
    configs = [c for c in CONFIGS if not args.only or c.name in args.only]
    record = {
        "kind": "kernelcast distributed measurement", "world_size": world_size, "backend": backend,
        "sizes": "tiny (CPU dry run: the numbers mean nothing)" if dry else "examples' own",
        "command": " ".join(["torchrun --standalone --nproc-per-node", str(world_size),
                             "scripts/device/validate_distributed.py", *sys.argv[1:]]),
        "commit": _git_commit() if rank == 0 else None, "gpu_catalogue_id": GPU,
        "protocol": dataclasses.asdict(proto), "model_sizes": sizes, "variants": VARIANT_HOW,
        "configs": [dataclasses.asdict(c) for c in configs], "steps": {}, "errors": [], "skipped": [],
        "parts_s": {},
    }
    envs: list = [None] * world_size
    dist.all_gather_object(envs, _environment(device))
    record["env"], record["env_by_rank"] = envs[0], envs
    log(f"{world_size} ranks, {backend}, {envs[0].get('device', 'cpu')}, torch {torch.__version__}")

    def save():
        if writer:
            record["elapsed_s"] = round(time.perf_counter() - started, 1)
            writer.measured(record)

    def over_budget(part: str) -> bool:
        late = _rank0_decides(rank, time.perf_counter() - started > args.budget_s)
        if late:
            record["skipped"].append(part)
            log(f"skipped {part}: past the {args.budget_s} s budget")
        return late

    if not args.skip_collectives and not over_budget("collectives"):
        t0 = time.perf_counter()
        try:
            record["collectives"] = measure_collectives(proto, world_size, device)
            for row in record["collectives"]:
                if row["bytes"] >= 2 ** 20 or dry:
                    log(f"{row['collective']:15s} {row['dtype']:8s} {row['bytes']:>11d} B {row['measured_us']:10.1f} us"
                        f"  busbw {row['busbw_gb_per_s']:7.1f} GB/s")
        except Exception as exc:  # keep going: the steps do not need the sweep
            record["errors"].append({"part": "collectives", "error": f"{type(exc).__name__}: {exc}"[:2000],
                                     "traceback": traceback.format_exc()[-4000:]})
            log(f"collectives FAILED: {type(exc).__name__}: {exc}", always=True)
        record["parts_s"]["collectives"] = round(time.perf_counter() - t0, 1)
        save()

    with tempfile.TemporaryDirectory() as tmp:
        for cfg in configs:
            if over_budget(cfg.name):
                save()
                continue
            t0 = time.perf_counter()
            trace_path = Path(tmp) / f"{cfg.name}.rank{rank}.json"
            compact = None
            try:
                result, compact = measure_config(cfg, sizes, proto, device, trace_path)
            except Exception as exc:  # one failing config must not lose the others
                result = {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc()[-4000:]}
                gc.collect()
                if device == "cuda":
                    torch.cuda.empty_cache()
            results: list = [None] * world_size
            dist.all_gather_object(results, result)
            record["steps"][cfg.name] = {"config": dataclasses.asdict(cfg), "how": VARIANT_HOW[cfg.variant],
                                         "ranks": results}
            record["parts_s"][cfg.name] = round(time.perf_counter() - t0, 1)
            if "error" in result:
                log(f"{cfg.name:22s} FAILED: {result['error'][:300]}", always=True)
            else:
                line = (f"{cfg.name:22s} step {result['timed']['median_ms']:8.2f} ms (rounds "
                        f"{min(result['timed']['rounds_ms']):.2f}-{max(result['timed']['rounds_ms']):.2f}); host to "
                        f"last launch {result['host']['issue_ms_median']:8.2f} ms, synced wall "
                        f"{result['host']['wall_ms_median']:8.2f} ms; ")
                if "profile" in result:
                    g = result["profile"]["gpu_per_step"]
                    line += (f"kernels/step {g['kernels']:.0f} ({g['compute_kernel_ms']:.2f} ms) + NCCL "
                             f"{g['nccl_kernels']:.0f} ({g['nccl_kernel_ms']:.2f} ms); ")
                else:
                    line += f"profile FAILED: {result['profile_error'][:200]}; "
                log(line + f"{result['total_s']:.1f} s", always="profile" not in result)
            if writer and compact is not None:
                writer.profile(cfg.name, compact)
                if trace_path.exists() and not writer.trace(cfg.name, trace_path):
                    record["skipped"].append(f"raw trace of {cfg.name} (tar full)")
            trace_path.unlink(missing_ok=True)
            save()
    dist.barrier()
    dist.destroy_process_group()
    save()
    log(f"done in {time.perf_counter() - started:.1f} s")
    return record if rank == 0 else None


# -- comparison ----------------------------------------------------------------------------------------------
def _error(predicted: float | None, measured: float | None) -> float | None:
    return (predicted - measured) / measured if predicted is not None and measured else None


def _rank0(measured: dict, name: str) -> dict | None:
    entry = measured["steps"].get(name)
    if not entry or "error" in entry["ranks"][0]:
        return None
    return entry["ranks"][0]


def compare(measured: dict, predicted: dict[str, dict], speed: dict[str, dict] | None = None) -> dict:
    """Per full or single-GPU step config: step time, exposed communication, GPU kernel time and host time,
    measured (rank 0) against predicted, with the issue's targets.

    The measured exposed communication is the step minus the same step with no-op communication (NO_COMM_VARIANT),
    medians of their rounds; the band beside it spans what the rounds allow (fastest full round minus slowest
    no-op round, to the reverse). Predicted: the step minus the step whose collectives cost nothing on the GPU nor
    to issue on the CPU, as the no-op variants run them (CommSummary.noop_saving_us). `speed`: per config, the
    host speed index of its profile's threads (calibrate/parallel_fit.py), to read the host-side errors by."""
    rows = {}
    speed = speed or {}
    for cfg in (StepConfig(**c) for c in measured["configs"]):
        if cfg.variant not in ("full", "single"):
            continue
        m, p = _rank0(measured, cfg.name), predicted.get(cfg.example, {})
        if m is None or "step_ms" not in p:
            rows[cfg.name] = {"measured_error": (measured["steps"].get(cfg.name) or {}).get("ranks", [{}])[0]
                              .get("error", "not measured") if m is None else None, "predicted": p}
            continue
        g = m.get("profile", {}).get("gpu_per_step")  # None where the profiler failed
        row = {
            "example": cfg.example, "world_size": measured["world_size"] if cfg.parallel != "single" else 1,
            "measured_step_ms": m["timed"]["median_ms"], "predicted_step_ms": p["step_ms"],
            "step_error": _error(p["step_ms"], m["timed"]["median_ms"]),
            "measured_compute_kernel_ms": g and g["compute_kernel_ms"] + g["memcpy_ms"] + g["memset_ms"],
            "predicted_compute_kernel_ms": p["compute_ms"],
            "measured_nccl_kernel_ms": g and g["nccl_kernel_ms"], "predicted_comm_ms": p["comm_ms"],
            "measured_kernels": g and g["kernels"] + g["memcpy"] + g["memset"], "predicted_kernels": p["kernels"],
            "measured_host_to_last_launch_ms": m["host"]["issue_ms_median"],
            "predicted_host_ms": p["host_time_ms"],
        }
        row["compute_kernel_error"] = _error(row["predicted_compute_kernel_ms"], row["measured_compute_kernel_ms"])
        row["host_error"] = _error(p["host_time_ms"], row["measured_host_to_last_launch_ms"])
        row["measured_rounds_ms"] = [min(m["timed"]["rounds_ms"]), max(m["timed"]["rounds_ms"])]
        row["step_within_rounds"] = row["measured_rounds_ms"][0] <= p["step_ms"] <= row["measured_rounds_ms"][1]
        if cfg.name in speed:
            row["host_speed_index"] = speed[cfg.name]
        if cfg.parallel != "single":
            row["step_within_target"] = row["step_error"] is not None and abs(row["step_error"]) <= STEP_TOLERANCE
            exposed = {}
            for variant in ("noop_comm", "noop_hook", "no_sync", "single"):
                name = cfg.model if variant == "single" else f"{cfg.example}.{variant}"
                base = _rank0(measured, name)
                if base is not None:
                    exposed[variant] = m["timed"]["median_ms"] - base["timed"]["median_ms"]
            row["measured_step_minus"] = exposed
            reference = NO_COMM_VARIANT[cfg.parallel]
            if reference in exposed:
                base_rounds = _rank0(measured, f"{cfg.example}.{reference}")["timed"]["rounds_ms"]
                predicted_exposed = p.get("noop_saving_ms", p["exposed_comm_ms"])
                row["measured_exposed_comm_ms"] = max(exposed[reference], 0.0)
                row["measured_exposed_band_ms"] = [min(m["timed"]["rounds_ms"]) - max(base_rounds),
                                                   max(m["timed"]["rounds_ms"]) - min(base_rounds)]
                row["measured_exposed_against"] = reference
                row["predicted_exposed_comm_ms"] = predicted_exposed
                row["predicted_exposed_on_gpu_ms"] = p["exposed_comm_ms"]
                row["predicted_step_without_comm_ms"] = p["step_without_comm_ms"]
                row["exposed_error"] = _error(predicted_exposed, row["measured_exposed_comm_ms"])
                row["exposed_within_target"] = (row["exposed_error"] is not None
                                                and abs(row["exposed_error"]) <= EXPOSED_TOLERANCE)
                lo, hi = row["measured_exposed_band_ms"]
                row["exposed_within_band"] = lo <= predicted_exposed <= hi
        row["predicted"] = p
        rows[cfg.name] = row
    return rows


def compare_collectives(measured_rows: list[dict], world_size: int, interconnect: str | None) -> list[dict]:
    sizes = sorted({r["bytes"] for r in measured_rows})
    predicted = {(r["collective"], r["bytes"]): r for r in predicted_collectives(world_size, interconnect, sizes)}
    rows = []
    for row in measured_rows:
        p = predicted[(row["collective"], row["bytes"])]
        rows.append({**{k: v for k, v in row.items() if k != "measured_us_all"},
                     **{k: p[k] for k in ("predicted_us", "algorithm", "protocol", "interconnect",
                                          "predicted_busbw_gb_per_s")},
                     "error": _error(p["predicted_us"], row["measured_us"])})
    return rows


def host_speed(measured_in: str) -> dict[str, dict]:
    """Per config, its profile's host speed index per thread (main, autograd) against the single-GPU step of
    the same model (calibrate/parallel_fit.py), from the compact profiles beside the measured file; {} without."""
    from kernelcast.calibrate.parallel_fit import thread_role, thread_speed_index

    path = Path(measured_in).with_name(PROFILES_FILE)
    if not path.exists():
        return {}
    profiles = json.load(gzip.open(path, "rt"))
    out = {}
    for name, compact in profiles.items():
        reference = profiles.get(name.split("_")[0].split(".")[0])
        if reference is not None:
            index = thread_speed_index(compact, reference)
            out[name] = {thread_role(compact["threads"][i]): round(v, 3) for i, v in index.items()
                         if thread_role(compact["threads"][i]) != "other"}
    return out


def predict_and_compare(measured: dict, measured_in: str, out: Path, interconnect: str | None,
                        reuse_captures: bool = False, repeat: int = 1) -> dict:
    """Predicts, one after the other (a capture times the model's Python: a busy CPU would inflate it), every
    example measured in full or on one GPU, and compares."""
    world_size, measured_torch = measured["world_size"], measured["env"]["torch"]
    wanted = {}
    for cfg in (StepConfig(**c) for c in measured["configs"]):
        if cfg.variant in ("full", "single") and cfg.name in measured["steps"]:
            wanted[cfg.example] = world_size if cfg.parallel != "single" else 1
    predicted = {}
    speed = host_speed(measured_in)
    for example, n in wanted.items():
        predicted[example] = predicted_step(example, n, interconnect, out, measured_torch, reuse_captures, repeat,
                                            speed.get(example))
        p = predicted[example]
        print(f"predicted example:{example} at world size {n} as torch {measured_torch}: "
              + (p["error"] if "error" in p else f"step {p['step_ms']:.2f} ms (captures {p['step_ms_range'][0]:.2f}-"
                 f"{p['step_ms_range'][1]:.2f}), GPU {p['gpu_time_ms']:.2f} ms, no-op saving "
                 f"{p['noop_saving_ms']:.2f} ms, hooks {p['hook_host_ms']:.2f} ms"), flush=True)
    result = {"kind": "kernelcast distributed comparison", "measured_in": measured_in,
              "measured_commit": measured.get("commit"), "predicted_commit": _git_commit(),
              "predicted_with_torch": torch.__version__, "measured_with_torch": measured["env"]["torch"],
              "sizes": measured["sizes"], "world_size": world_size, "gpu_catalogue_id": GPU,
              "targets": {"step": STEP_TOLERANCE, "exposed_comm": EXPOSED_TOLERANCE},
              "command": "PYTHONPATH=src python scripts/device/validate_distributed.py " + " ".join(sys.argv[1:]),
              "repeat": repeat, "steps": compare(measured, predicted, speed)}
    if measured.get("collectives"):
        result["collectives"] = compare_collectives(measured["collectives"], world_size, interconnect)
    (out / COMPARE_FILE).write_text(json.dumps(result, indent=1))
    if measured["sizes"] != "examples' own":
        print(f"measured with {measured['sizes']}: the errors below say nothing about the model")
    _print_comparison(result)
    return result


def _pct(x: float | None) -> str:
    return f"{x:+.1%}" if x is not None else "-"


def _ms(x: float | None) -> str:
    return f"{x:8.2f}" if x is not None else "       -"


def _print_comparison(result: dict) -> None:
    for row in result.get("collectives", []):
        if row["bytes"] >= 2 ** 20:
            print(f"{row['collective']:15s} {row['dtype']:8s} {row['bytes']:>11d} B  measured "
                  f"{row['measured_us']:9.1f} us (busbw {row['busbw_gb_per_s']:6.1f} GB/s)  predicted "
                  f"{row['predicted_us']:9.1f} us "
                  f"{row['algorithm']}/{row['protocol']} ({_pct(row['error'])})")
    for name, row in result["steps"].items():
        if "measured_step_ms" not in row:
            print(f"{name:12s} not compared: {row.get('measured_error') or row['predicted'].get('error')}")
            continue
        line = (f"{name:12s} step {row['measured_step_ms']:8.2f} ms vs {row['predicted_step_ms']:8.2f} "
                f"({_pct(row['step_error'])}); compute kernels {_ms(row['measured_compute_kernel_ms'])} vs "
                f"{row['predicted_compute_kernel_ms']:8.2f} ({_pct(row['compute_kernel_error'])}); host "
                f"{row['measured_host_to_last_launch_ms']:8.2f} vs {row['predicted_host_ms']:8.2f} "
                f"({_pct(row['host_error'])})")
        if "measured_exposed_comm_ms" in row:
            lo, hi = row["measured_exposed_band_ms"]
            line += (f"; exposed comm {row['measured_exposed_comm_ms']:6.2f} [{lo:.2f}, {hi:.2f}] vs "
                     f"{row['predicted_exposed_comm_ms']:6.2f} ({_pct(row['exposed_error'])})")
        if "host_speed_index" in row:
            line += " ; host speed " + " ".join(f"{k} {v:.2f}" for k, v in row["host_speed_index"].items())
        at_speed = row["predicted"].get("step_at_measured_host_speed_ms")
        if at_speed:
            line += f" ; at that speed {at_speed:.2f} ({_pct(_error(at_speed, row['measured_step_ms']))})"
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the files (default $OUT)")
    parser.add_argument("--measure-only", action="store_true", help="measure on the GPUs; predict later elsewhere")
    parser.add_argument("--predict-only", action="store_true", help="only kernelcast's predictions (no GPU)")
    parser.add_argument("--measured", help="with --predict-only: a device run's distributed_measured.json to "
                                           "compare with (its world size and configs)")
    parser.add_argument("--world-size", type=int, default=2, help="with --predict-only and no --measured")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --predict-only: capture each example this many times and keep the median step")
    parser.add_argument("--reuse-captures", action="store_true",
                        help="with --predict-only: re-predict the captures saved in --out (predict-stage changes)")
    parser.add_argument("--interconnect", default=None, help="kernelcast interconnect (default: the GPU's own)")
    parser.add_argument("--dry-run-cpu", action="store_true", help="under torchrun on a CPU: gloo, tiny models")
    parser.add_argument("--only", nargs="*", help="step configs to run (names as in CONFIGS)")
    parser.add_argument("--skip-collectives", action="store_true")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="no part starts after this many seconds")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    if args.predict_only:
        if args.measured:
            predict_and_compare(json.loads(Path(args.measured).read_text()), args.measured, out, args.interconnect,
                                args.reuse_captures, args.repeat)
            return 0
        examples = {c.example: (args.world_size if c.parallel != "single" else 1) for c in CONFIGS
                    if c.variant in ("full", "single") and (not args.only or c.name in args.only)}
        result = {"world_size": args.world_size, "interconnect": args.interconnect, "commit": _git_commit(),
                  "command": "PYTHONPATH=src python scripts/device/validate_distributed.py " + " ".join(sys.argv[1:]),
                  "collectives": predicted_collectives(args.world_size, args.interconnect),
                  "steps": {ex: predicted_step(ex, n, args.interconnect, out, reuse_capture=args.reuse_captures,
                                               repeat=args.repeat)
                            for ex, n in examples.items()}}
        (out / "distributed_predicted.json").write_text(json.dumps(result, indent=1))
        for name, row in result["steps"].items():
            print(name, json.dumps({k: v for k, v in row.items() if k not in ("command", "host_model")}))
        return 0

    record = run_measurements(args)
    if record is None or args.measure_only or args.dry_run_cpu:
        return 0
    predict_and_compare(record, str(out / MEASURED_FILE), out, args.interconnect)
    return 0


if __name__ == "__main__":
    sys.exit(main())
