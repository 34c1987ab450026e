"""Our own whole-model programs (benchmarks/whole_models), predicted against what a GPU measured of them: held
out from every fit (issues 30 and 31).

    python3 scripts/eval/whole_models_check.py validation/whole_models/h100_whole_models_run*.json \
        validation/whole_models/h100_whole_models_added_run*.json > validation/whole_models/report.txt

The programs are written here in KernelBench's format (Model, get_inputs, get_init_inputs; fp32, one forward
under torch.no_grad(), as scripts/eval/kernelbench_validate.py builds a program): classic networks (ResNet-18,
MobileNetV2, SqueezeNet, an EfficientNet-like and two DenseNet-like stacks, VGG, an inception module, a ShuffleNet
unit), recurrent stacks (LSTM and GRU, one and two directions, their initial states passed), attention (minGPT
blocks, SDPA, nn.MultiheadAttention over an image, a ViT-like nn.TransformerEncoder), a Swin-like window
block, a Mamba-like chunked scan (einops) and a deep narrow MLP. Nothing was fitted to them. Each is measured on
the GPU by scripts/device/kernelbench_call_times.py --dir benchmarks/whole_models --profiled (KernelBench's
protocol: the mean of 30 calls, each from an idle GPU between CUDA events; then torch.profiler's GPU busy time
and work items of a call, and the allocator's peak over a call), in two processes.

Per program: kernelcast's first-step time against the measured mean call (mean over the runs), its GPU time
against the measured busy time, kernels against work items, peak memory growth against the allocator's; the
medians over the programs, and the GPU time again with the GPU's achieved-rate factors off (the datasheet carry
alone), since the factors are fitted to torch 2.5 timings and these ran a current torch.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts
PROGRAMS = ROOT / "benchmarks" / "whole_models"
CAPTURES = ROOT / "build" / "whole_models" / "captures"
# torch.cuda.get_device_name() -> kernelcast GPU
DEVICE_GPU = {"NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA H200": "h200"}
WITHIN = 0.15


def _capture_all() -> dict[str, Path]:
    """{program name: capture file}, each captured again (about 15 s for all; into build/whole_models/captures):
    a cached capture would keep what an older kernelcast captured."""
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
    from kernelbench_validate import _timeout, capture_program

    CAPTURES.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGALRM, _timeout)
    out = {}
    for path in sorted(PROGRAMS.glob("*.py")):
        name = f"{PROGRAMS.name}/{path.name}"
        target = CAPTURES / (path.stem + ".json")
        if capture_program(name, path, target) is None:
            out[name] = target
    return out


def _summary(errors: list[float]) -> str:
    within = sum(abs(e) <= WITHIN for e in errors) / len(errors)
    return (f"median |error| {statistics.median(abs(e) for e in errors):.1%}, within 15% {within:.0%}, "
            f"signed median {statistics.median(errors):+.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measured", nargs="+", help="kernelbench_call_times.py --profiled files of one GPU (each a "
                        "run; a program is averaged over the runs that measured it)")
    args = parser.parse_args()

    runs = [json.loads(Path(p).read_text()) for p in args.measured]
    device = runs[0]["env"]["gpu"]
    gpu = DEVICE_GPU.get(device)
    if gpu is None:
        print(f"error: no kernelcast GPU for {device!r} (DEVICE_GPU)", file=sys.stderr)
        return 2
    captures = _capture_all()

    from kernelcast.devices import get_gpu
    from kernelcast.devices.achieved import DATASHEET
    from kernelcast.predict import predict_capture
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import profile_with
    from kernelcast.records import Capture

    spec = get_gpu(gpu)
    profile = profile_with(gpu, "timings")
    errors: dict[str, list[float]] = {"call": [], "gpu": [], "gpu_datasheet": [], "kernels": [], "memory": []}
    print(f"{len(captures)} programs, measured on {device} ({', '.join(args.measured)}; torch "
          f"{runs[0]['env']['torch']}), predicted as `kernelcast predict --gpu {gpu}`")
    print(f"{'program':22s} {'call ms':>8s} {'pred':>8s} {'err':>6s} {'GPU ms':>8s} {'pred':>8s} {'err':>6s} "
          f"{'kernels':>12s} {'peak growth MiB':>16s}")
    for name, path in captures.items():
        # every run (file) that measured the program: programs added later were measured in files of their own
        measured = [r["problems"][name] for r in runs if "mean_ms" in r["problems"].get(name, {})]
        if not measured or any("gpu_busy_us" not in m for m in measured):
            print(f"{name:22s} not measured")
            continue
        cap = Capture.load(path)
        pred = predict_capture(cap, spec)
        carry = predict_capture(cap, spec, kernel_model=CalibratedModel(
            spec, cap.settings, profile.data, get_gpu(profile.gpu), achieved=DATASHEET))
        call_us = statistics.fmean(m["mean_ms"] for m in measured) * 1000.0
        busy_us = statistics.fmean(m["gpu_busy_us"] for m in measured)
        items = measured[0]["kernels"]
        growth = measured[0]["mem_peak_bytes"] - measured[0]["mem_before_bytes"]
        pred_growth = pred.memory.peak_bytes - pred.memory.resident_bytes if pred.memory else 0
        errors["call"].append(pred.first_step_us / call_us - 1.0)
        errors["gpu"].append(pred.gpu_time_us / busy_us - 1.0)
        errors["gpu_datasheet"].append(carry.gpu_time_us / busy_us - 1.0)
        errors["kernels"].append(pred.kernels / items - 1.0)
        if growth > 0:
            errors["memory"].append(pred_growth / growth - 1.0)
        print(f"{Path(name).stem[:22]:22s} {call_us / 1e3:8.3f} {pred.first_step_us / 1e3:8.3f} "
              f"{errors['call'][-1]:+6.0%} {busy_us / 1e3:8.3f} {pred.gpu_time_us / 1e3:8.3f} "
              f"{errors['gpu'][-1]:+6.0%} "
              f"{pred.kernels:5d}/{items:<6.0f} {pred_growth / 2**20:7.0f}/{growth / 2**20:<8.0f}")
    print()
    for label, key in (("call time (first step)", "call"), ("GPU time", "gpu"),
                       ("GPU time, datasheet carry (factors off)", "gpu_datasheet"), ("kernels", "kernels"),
                       ("peak memory growth", "memory")):
        if errors[key]:
            print(f"{label}: {len(errors[key])} programs, {_summary(errors[key])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
