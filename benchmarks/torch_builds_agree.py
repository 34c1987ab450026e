"""Do two torch builds predict the same step? The same workloads captured and predicted under each, compared.

    .venv/bin/python benchmarks/torch_builds_agree.py run --out /tmp/cpu.json        # torch 2.13 CPU build
    .venv-cuda/bin/python benchmarks/torch_builds_agree.py run --out /tmp/cuda.json  # torch 2.14.1 CUDA build, no GPU
    python3 benchmarks/torch_builds_agree.py compare /tmp/cpu.json /tmp/cuda.json

Issue 36's target: the same predictions from torch 2.13's CPU build and 2.14.1's CUDA build on a machine without
a GPU, GPU time within 1% and kernels exactly; peak memory is compared too (exactly). Host times are not compared:
they are timed on this machine, and differ between runs and between torch releases' own Python. Each case is a
kind a CUDA build without a GPU used to break or change: backward (the CUDA hooks' primary context), bf16 convs
(the conv backend asks the hooks for bf16 cuDNN), DDP and FSDP with --world-size (DDP's reducer timer), the
README's `with kernelcast.capture(...)` block, and torch.compile (Dynamo asks whether a CUDA graph is being
captured). `compare` exits 1 when a case differs beyond the tolerances or is missing from either side.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

GPU_TIME_TOLERANCE = 0.01  # relative
GPUS = ("h100", "a100")


def _linear_block(gpu: str):
    """The README's Python API: a `with kernelcast.capture(gpu)` block with a backward."""
    import kernelcast
    import torch

    with kernelcast.capture(gpu) as cap:
        with cap.paused():
            model = torch.nn.Linear(4096, 4096).cuda()
            x = torch.randn(64, 4096, device="cuda")
        model(x).sum().backward()
    return cap.predict(gpu)


def _compiled_mlp():
    """A small MLP training step, to be captured as torch.compile(step, mode="default") runs it."""
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512)).cuda()
    x = torch.randn(256, 512, device="cuda")

    def step(x):
        model(x).square().mean().backward()

    return step, (x,)


def _cases():
    from kernelcast.api import capture_file
    from kernelcast.capture import capture_workload
    from kernelcast.predict import predict_capture

    for gpu in GPUS:
        yield f"gpt_train/{gpu}", lambda gpu=gpu: predict_capture(capture_file("example:gpt", gpu), gpu)
        yield f"cnn_bf16_channels_last_train/{gpu}", lambda gpu=gpu: predict_capture(capture_file("example:cnn", gpu), gpu)
    yield "llama_train/h100", lambda: predict_capture(capture_file("example:llama", "h100"), "h100")
    yield "gpt_ddp_world8/h100", lambda: predict_capture(capture_file("example:gpt_ddp", "h100", world_size=8), "h100")
    yield "gpt_fsdp_world8/h100", lambda: predict_capture(capture_file("example:gpt_fsdp", "h100", world_size=8), "h100")
    yield "readme_api_linear/h100", lambda: _linear_block("h100")
    yield "mlp_train_compile_default/h100", lambda: predict_capture(
        capture_workload(_compiled_mlp, "h100", workload="mlp", compile_mode="default"), "h100")


def _summary(pred) -> dict:
    memory = pred.memory
    return {"gpu_time_us": pred.gpu_time_us, "kernels": pred.kernels,
            "peak_memory_bytes": memory.peak_bytes if memory is not None else None,
            "uncosted": list(pred.uncosted), "compiled_as": pred.compiled_as}


def run(out: str) -> int:
    import kernelcast  # noqa: F401  (before torch: a torch without a GPU needs the fake CUDA shim loaded first)
    import torch

    doc = {"torch": torch.__version__, "cuda_build": torch.version.cuda, "cases": {}, "failed": {}}
    for name, predict in _cases():
        start = time.perf_counter()
        try:
            doc["cases"][name] = _summary(predict())
        except Exception as exc:  # a case that fails is a result here: compare reports it
            doc["failed"][name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        print(f"{name}: {time.perf_counter() - start:.1f} s", "FAILED " + doc["failed"][name] if name in doc["failed"]
              else "", file=sys.stderr, flush=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    return 0


def compare(a_path: str, b_path: str) -> int:
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    print(f"{'case':<38} {'GPU time A us':>14} {'B us':>12} {'diff':>7} {'kernels A':>9} {'B':>6} {'peak mem A=B':>12}")
    bad = []
    for name in sorted(set(a["cases"]) | set(b["cases"]) | set(a["failed"]) | set(b["failed"])):
        ca, cb = a["cases"].get(name), b["cases"].get(name)
        if ca is None or cb is None:
            bad.append(f"{name}: failed under torch {a['torch'] if ca is None else b['torch']}: "
                       f"{(a if ca is None else b)['failed'].get(name, 'missing')}")
            continue
        diff = (cb["gpu_time_us"] - ca["gpu_time_us"]) / ca["gpu_time_us"] if ca["gpu_time_us"] else 0.0
        same_memory = ca["peak_memory_bytes"] == cb["peak_memory_bytes"]
        print(f"{name:<38} {ca['gpu_time_us']:>14.1f} {cb['gpu_time_us']:>12.1f} {diff:>+7.2%} {ca['kernels']:>9} "
              f"{cb['kernels']:>6} {'yes' if same_memory else 'NO':>12}")
        if abs(diff) > GPU_TIME_TOLERANCE or ca["kernels"] != cb["kernels"] or not same_memory:
            bad.append(f"{name}: GPU time {diff:+.2%}, kernels {ca['kernels']} vs {cb['kernels']}, "
                       f"peak memory {ca['peak_memory_bytes']} vs {cb['peak_memory_bytes']}")
    print(f"A: torch {a['torch']} ({'CUDA ' + a['cuda_build'] if a['cuda_build'] else 'CPU'} build); "
          f"B: torch {b['torch']} ({'CUDA ' + b['cuda_build'] if b['cuda_build'] else 'CPU'} build)")
    for line in bad:
        print("DISAGREE", line)
    print("agree" if not bad else f"{len(bad)} cases disagree")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="predict the cases under this interpreter's torch")
    r.add_argument("--out", required=True)
    c = sub.add_parser("compare", help="compare two runs")
    c.add_argument("a")
    c.add_argument("b")
    args = parser.parse_args()
    return run(args.out) if args.cmd == "run" else compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
