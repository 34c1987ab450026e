"""Measure collectives and distributed training steps on several GPUs, and compare kernelcast's predictions.

Run on one node with 2 or more GPUs (device machine nvidia-h200-x2 or larger):

    torchrun --standalone --nproc-per-node 2 scripts/validate_distributed.py --out "$OUT"

or only the CPU-side part (kernelcast's predictions, no GPU needed):

    python scripts/validate_distributed.py --predict-only --world-size 2 --out /tmp/out

What it measures (rank 0 writes $OUT/distributed_validation.json):
1. all_reduce / all_gather_into_tensor / reduce_scatter_tensor time against message size S (nccl-tests' S:
   the whole buffer, the whole gathered output, the whole scattered input), each point the median of REPS
   CUDA-event timings after WARMUP calls, with algbw = S / t and busbw by nccl-tests' factors;
2. a DDP and an FSDP2 training step of the GPT-2-small model of example:gpt (the code of example:gpt_ddp and
   example:gpt_fsdp), back to back, median over ROUNDS rounds of STEPS steps; and the same step without
   communication (DDP under no_sync(); for FSDP2, the unsharded model on one GPU), whose difference is the
   measured exposed communication;
3. kernelcast's prediction of each (captured in a subprocess, rank 0 of the same world size on the fake
   process group), side by side, with the issue's targets: step time within 10%, exposed communication
   within 20%.

NVLink multicast stays off (NVLS can take the host's shared GPUs out of service): the variables below are set
before NCCL or PyTorch start, in this process and in every process it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# The workplace's multicast-off variables (/work/.library/device/KINDS.md): NCCL, PyTorch symmetric memory,
# NVSHMEM. Set before torch (and NCCL) load; torchrun's children inherit them from here on.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(MULTICAST_OFF)

import kernelcast  # noqa: E402,F401  (before torch: a CPU-only torch needs its fake CUDA hooks first)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GPU = "h200"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
SIZES_BYTES = [4 ** k * 1024 for k in range(11)]  # 1 KiB ... 1 GiB, every factor of 4
DTYPE = torch.float32  # nccl-tests' default; only bytes matter to the model
WARMUP = 5  # calls before timing: NCCL sets up channels and buffers on the first calls of a size
REPS = 20  # timed calls per point; the median is kept (robust to a stray slow call), the raw times too
STEP_WARMUP = 3  # steps before timing: allocator, cuDNN/cuBLAS heuristics, DDP's bucket rebuild (step 2)
STEPS = 10  # steps per timed round, back to back (what kernelcast's steady-state step time predicts)
ROUNDS = 5  # rounds; the median round is kept
STEP_TOLERANCE = 0.10  # the targets: step time within 10%,
EXPOSED_TOLERANCE = 0.20  # exposed communication within 20%
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}  # nccl-tests doc/PERFORMANCE.md


# -- predictions (CPU side) ----------------------------------------------------------------------------------
def predicted_collectives(world_size: int, interconnect: str | None) -> list[dict]:
    from kernelcast.devices import get_gpu
    from kernelcast.devices.interconnects import get_interconnect, natural_interconnect
    from kernelcast.predict.comm import collective_time

    link = get_interconnect(interconnect) if interconnect else natural_interconnect(get_gpu(GPU))
    rows = []
    for collective in COLLECTIVES:
        for size in SIZES_BYTES:
            est = collective_time(collective, size, world_size, link)
            rows.append({"collective": collective, "bytes": size, "interconnect": link.id,
                         "predicted_us": est.time_us, "algorithm": est.algorithm, "protocol": est.protocol,
                         "predicted_busbw_gb_per_s": est.busbw_bytes_per_s / 1e9})
    return rows


def predicted_step(example: str, world_size: int, interconnect: str | None, out: Path) -> dict:
    """kernelcast predict, in a process of its own: this one may hold a real NCCL group, and a capture runs in
    a fake one. torchrun's rendezvous variables are left out so nothing in it joins the real job."""
    json_path = out / f"predicted_{example}.json"
    cmd = [sys.executable, "-m", "kernelcast", "predict", f"example:{example}", "--gpu", GPU,
           "--world-size", str(world_size), "--json", str(json_path), "--top", "5"]
    if interconnect:
        cmd += ["--interconnect", interconnect]
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID")}
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    (out / f"predicted_{example}.txt").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1], "command": " ".join(cmd)}
    pred = json.loads(json_path.read_text())
    comm = pred.get("comm") or {}
    return {"step_ms": pred["step_time_us"] / 1e3, "compute_ms": comm.get("compute_us", 0) / 1e3,
            "comm_ms": comm.get("comm_us", 0) / 1e3, "exposed_comm_ms": comm.get("exposed_comm_us", 0) / 1e3,
            "step_without_comm_ms": comm.get("step_without_comm_us", pred["step_time_us"]) / 1e3,
            "kernel_model": pred["kernel_model"], "capture_and_predict_s": time.perf_counter() - started,
            "command": " ".join(cmd)}


# -- measurements (GPU side) ---------------------------------------------------------------------------------
def _timed_ms(fn, reps: int) -> list[float]:
    """One CUDA-event pair per call: device time of each call, launch overhead included when it is exposed."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def measure_collectives(world_size: int) -> list[dict]:
    rows = []
    itemsize = torch.tensor([], dtype=DTYPE).element_size()
    for collective in COLLECTIVES:
        for size in SIZES_BYTES:
            numel = size // itemsize
            if collective == "all_reduce":
                buf = torch.ones(numel, dtype=DTYPE, device="cuda")
                call = lambda: dist.all_reduce(buf)  # noqa: E731
            elif collective == "all_gather":  # S = the gathered output
                inp = torch.ones(numel // world_size, dtype=DTYPE, device="cuda")
                outp = torch.empty(numel // world_size * world_size, dtype=DTYPE, device="cuda")
                call = lambda: dist.all_gather_into_tensor(outp, inp)  # noqa: E731
            else:  # reduce_scatter: S = the whole input
                inp = torch.ones(numel // world_size * world_size, dtype=DTYPE, device="cuda")
                outp = torch.empty(numel // world_size, dtype=DTYPE, device="cuda")
                call = lambda: dist.reduce_scatter_tensor(outp, inp)  # noqa: E731
            for _ in range(WARMUP):
                call()
            torch.cuda.synchronize()
            dist.barrier()
            times_ms = _timed_ms(call, REPS)
            median_us = statistics.median(times_ms) * 1e3
            algbw = size / (median_us * 1e-6)
            rows.append({"collective": collective, "bytes": size, "measured_us": median_us,
                         "measured_us_all": [t * 1e3 for t in times_ms], "algbw_gb_per_s": algbw / 1e9,
                         "busbw_gb_per_s": algbw * BUS_FACTOR[collective](world_size) / 1e9})
            del call
    return rows


def _step_ms(step, args) -> dict:
    for _ in range(STEP_WARMUP):
        step(*args)
    torch.cuda.synchronize()
    rounds = []
    for _ in range(ROUNDS):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(STEPS):
            step(*args)
        end.record()
        end.synchronize()
        rounds.append(start.elapsed_time(end) / STEPS)
    return {"median_ms": statistics.median(rounds), "rounds_ms": rounds}


def _gpt_step(model, opt, no_comm=None):
    from contextlib import nullcontext

    def step(idx, targets):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(idx, targets)
        with (no_comm() if no_comm else nullcontext()):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _batch():
    from kernelcast.examples.gpt import BATCH, SEQ, VOCAB

    return (torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda"), torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda"))


def measure_steps() -> dict:
    """The code of example:gpt_ddp and example:gpt_fsdp, and each without communication."""
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel

    from kernelcast.examples.gpt import GPT

    out = {}
    torch.manual_seed(0)
    ddp = DistributedDataParallel(GPT().to("cuda"))
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4, weight_decay=0.1)
    out["gpt_ddp"] = _step_ms(_gpt_step(ddp, opt), _batch())
    out["gpt_ddp"]["without_comm"] = _step_ms(_gpt_step(ddp, opt, no_comm=ddp.no_sync), _batch())
    out["gpt_ddp"]["without_comm_how"] = "DDP.no_sync(): backward without the gradient all-reduce"
    del ddp, opt
    torch.cuda.empty_cache()

    model = GPT().to("cuda")
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    out["gpt_fsdp"] = _step_ms(_gpt_step(model, opt), _batch())
    del model, opt
    torch.cuda.empty_cache()
    plain = GPT().to("cuda")  # one GPU's step, unsharded: the FSDP2 step's compute with no communication
    opt = torch.optim.AdamW(plain.parameters(), lr=3e-4, weight_decay=0.1)
    out["gpt_fsdp"]["without_comm"] = _step_ms(_gpt_step(plain, opt), _batch())
    out["gpt_fsdp"]["without_comm_how"] = "the unsharded model on one GPU (FSDP2's copies and waits left out)"
    return out


# -- comparison ----------------------------------------------------------------------------------------------
def _error(predicted: float, measured: float) -> float | None:
    return (predicted - measured) / measured if measured else None


def compare(measured_steps: dict, predicted_steps: dict) -> dict:
    rows = {}
    for name, m in measured_steps.items():
        p = predicted_steps.get(name, {})
        if "step_ms" not in p:
            rows[name] = {"measured": m, "predicted": p}
            continue
        exposed = max(m["median_ms"] - m["without_comm"]["median_ms"], 0.0)
        step_err, exposed_err = _error(p["step_ms"], m["median_ms"]), _error(p["exposed_comm_ms"], exposed)
        rows[name] = {
            "measured_step_ms": m["median_ms"], "predicted_step_ms": p["step_ms"], "step_error": step_err,
            "measured_exposed_comm_ms": exposed, "predicted_exposed_comm_ms": p["exposed_comm_ms"],
            "exposed_error": exposed_err,
            "step_within_target": step_err is not None and abs(step_err) <= STEP_TOLERANCE,
            "exposed_within_target": exposed_err is not None and abs(exposed_err) <= EXPOSED_TOLERANCE,
            "measured": m, "predicted": p,
        }
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the JSON (default $OUT)")
    parser.add_argument("--predict-only", action="store_true", help="only kernelcast's predictions (no GPU)")
    parser.add_argument("--world-size", type=int, default=None, help="with --predict-only: ranks to predict for")
    parser.add_argument("--interconnect", default=None, help="kernelcast interconnect (default: the GPU's own)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"env": {**MULTICAST_OFF, "torch": torch.__version__}, "gpu_catalogue_id": GPU,
              "protocol": {"warmup": WARMUP, "reps": REPS, "step_warmup": STEP_WARMUP, "steps": STEPS,
                           "rounds": ROUNDS, "dtype": str(DTYPE)}}

    if args.predict_only:
        world_size = args.world_size or 2
        result["world_size"] = world_size
        result["collectives"] = predicted_collectives(world_size, args.interconnect)
        result["steps"] = {name: {"predicted": predicted_step(name, world_size, args.interconnect, out)}
                           for name in ("gpt_ddp", "gpt_fsdp")}
        (out / "distributed_validation.json").write_text(json.dumps(result, indent=1))
        for name, row in result["steps"].items():
            print(name, json.dumps(row["predicted"]))
        return 0

    dist.init_process_group("nccl")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    result["world_size"] = world_size
    result["device"] = torch.cuda.get_device_name()
    measured_collectives = measure_collectives(world_size)
    measured_steps = measure_steps()
    dist.barrier()
    dist.destroy_process_group()
    if rank != 0:
        return 0
    predicted = {(r["collective"], r["bytes"]): r for r in predicted_collectives(world_size, args.interconnect)}
    for row in measured_collectives:
        p = predicted[(row["collective"], row["bytes"])]
        row.update({k: p[k] for k in ("predicted_us", "algorithm", "protocol", "interconnect",
                                      "predicted_busbw_gb_per_s")})
        row["error"] = _error(row["predicted_us"], row["measured_us"])
    result["collectives"] = measured_collectives
    predicted_steps = {name: predicted_step(name, world_size, args.interconnect, out)
                       for name in ("gpt_ddp", "gpt_fsdp")}
    result["steps"] = compare(measured_steps, predicted_steps)
    (out / "distributed_validation.json").write_text(json.dumps(result, indent=1))
    for row in measured_collectives:
        print(f"{row['collective']:15s} {row['bytes']:>11d} B  measured {row['measured_us']:9.1f} us "
              f"(busbw {row['busbw_gb_per_s']:6.1f} GB/s)  predicted {row['predicted_us']:9.1f} us "
              f"{row['algorithm']}/{row['protocol']}")
    for name, row in result["steps"].items():
        print(name, {k: v for k, v in row.items() if k not in ("measured", "predicted")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
