"""Ground truth for the capture's model-Python time: the same clock on a real run, no capture.

    PYTHONPATH=src python3 scripts/device/probe_model_python.py [--device cuda|meta] [--out FILE]

--device meta runs the model on meta tensors (no data, no kernels), so a machine with no GPU can compare its
capture with a real run of the same Python: a CPU run would not do, its kernels evict the Python's caches.

A TorchFunctionMode books every torch call as torch's time (as the capture's router does); what is left on the
main thread between calls is the model's Python, module calls included. Its per-call hand-over cost is
measured on a loop of bare calls and taken out, as in the capture. Compare with the capture's figure for the
same step: sum(op.python_us) + module calls x the host model's module_call_us.
"""

import argparse
import json
import os
import statistics
import sys
import time

import kernelcast  # noqa: F401  (before torch)
import torch
from torch.overrides import TorchFunctionMode

from kernelcast.capture.cpu_speed import python_bench_us
from kernelcast.capture.host_clock import HostClock

STEPS = [("gpt2_forward_b1", "examples/hf_models.py:gpt2_forward", {"KC_BATCH": "1", "KC_SEQ": "128"}),
         ("bert_forward_fp16_b32", "examples/hf_models.py:bert_forward",
          {"KC_BATCH": "32", "KC_SEQ": "128", "KC_DTYPE": "float16"}),
         ("vit_forward_b8", "examples/hf_models.py:vit_forward", {"KC_BATCH": "8"})]
REPEATS = 20


class Timed(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.clock = HostClock()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.clock.torch_calls += 1
        self.clock.ours_begin()
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.clock.ours_end()


class OnDevice(TorchFunctionMode):
    """Builds an example written for "cuda" on another device: every device argument that says cuda is
    swapped for it (module moves included: Module.to calls Tensor.to per parameter)."""

    def __init__(self, device: str) -> None:
        super().__init__()
        self.device = torch.device(device)

    def _swap(self, value):
        is_cuda = (isinstance(value, str) and value.startswith("cuda")) or (
            isinstance(value, torch.device) and value.type == "cuda")
        return self.device if is_cuda else value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args = tuple(self._swap(a) for a in args)
        kwargs = {k: self._swap(v) for k, v in (kwargs or {}).items()}
        return func(*args, **kwargs)


def model_python_us(step, args, mode: Timed) -> float:
    mode.clock.restart()
    mode.clock.ours_begin()
    mode.clock.ours_end()
    step(*args)
    mode.clock.ours_begin()
    model_us, calls, _ = mode.clock.take()
    mode.clock.ours_end()
    return model_us, calls


def capture_python_us(spec: str, gpu: str) -> dict:
    """The capture's figure for the same step, on this machine."""
    from kernelcast.api import capture_file

    cap = capture_file(spec, gpu)
    return {"capture_python_us": sum(op.python_us for op in cap.ops), "module_calls": sum(op.modules for op in cap.ops),
            "capture_python_bench_us": cap.settings.python_bench_us}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--out")
    args = parser.parse_args()
    from kernelcast.capture.workload import load_build

    rows = []
    x = torch.ones(16, device=args.device)
    for name, spec, env in STEPS:
        os.environ.update(env)
        build, _ = load_build(spec)
        if args.device == "cuda":
            step, step_args = build()
        else:
            with OnDevice(args.device):
                step, step_args = build()
        for _ in range(3):
            step(*step_args)
        mode = Timed()
        with mode:
            base = []
            for _ in range(5):
                mode.clock.restart(); mode.clock.ours_begin(); mode.clock.ours_end()
                for _ in range(200):
                    x + 1
                mode.clock.ours_begin(); us, calls, _ = mode.clock.take(); mode.clock.ours_end()
                base.append(us / calls)
            per_call = min(base)
            samples = []
            for _ in range(REPEATS):
                us, calls = model_python_us(step, step_args, mode)
                samples.append(max(us - calls * per_call, 0.0))
        del step, step_args
        captured = capture_python_us(spec, args.gpu)
        rows.append({"name": name, "model_python_us": statistics.median(samples), "min_us": min(samples),
                     "max_us": max(samples), "per_call_baseline_us": per_call, **captured})
        print(f"{name:24s} real run: model Python {statistics.median(samples) / 1000:.2f} ms "
              f"({min(samples) / 1000:.2f}-{max(samples) / 1000:.2f}); capture here: "
              f"{captured['capture_python_us'] / 1000:.2f} ms + {captured['module_calls']} module calls", flush=True)
        for key in env:
            os.environ.pop(key, None)
    out = {"meta": {"device": args.device, "torch": torch.__version__, "python_bench_us": python_bench_us(),
                    "date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv)}, "steps": rows}
    if args.out:
        json.dump(out, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
