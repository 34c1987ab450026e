"""How cuDNN runs a bidirectional RNN's two directions in inference: kernel by kernel, with the stream each ran on,
the sum of their durations against the union of the time any ran (issue 31).

    PYTHONPATH=src python3 scripts/device/probe_rnn_directions.py --out $OUT/rnn_directions.json   # on the GPU

Why: our whole-model programs (benchmarks/whole_models) on an H100 measured a 6-layer bidirectional GRU's
kernels (batch 10, hidden 256, 512 steps, fp32, no_grad) at 114 ms summed, 9.3 µs a kernel, where the same
LSTM stack unidirectional ran 2.6 µs a kernel and kernelcast priced both at about 2.4 µs; the RNN probe
(probe_rnn.py) measured directions alike in training at batch 32. If the two directions run concurrently on
two streams, each kernel's duration carries the other's, and the sum of durations is not the GPU's busy time.

Cases: LSTM and GRU, one and two directions, 1 and 6 layers, batch 10 and 32, hidden 256, 512 steps, fp32,
inference and (one case) training forward. Per case: the call's time between CUDA events (median of 10 after 3
warm-ups), then one profiled call: every kernel's name, stream, start and duration; their sum, their union, the
streams used, and per kernel name the count and mean duration.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts

CASES = [(mode, bidir, layers, batch, train)
         for mode in ("lstm", "gru") for bidir in (False, True) for layers in (1, 6) for batch in (10, 32)
         for train in (False,)] + [("gru", True, 6, 10, True), ("lstm", True, 6, 10, True)]
HIDDEN, INPUT, STEPS = 256, 128, 512


def _union_us(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def run_case(mode: str, bidir: bool, layers: int, batch: int, train: bool) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kernelcast.measure import back_to_back_ms

    cls = torch.nn.LSTM if mode == "lstm" else torch.nn.GRU
    rnn = cls(INPUT, HIDDEN, layers, batch_first=True, bidirectional=bidir).cuda().train(train)
    x = torch.randn(batch, STEPS, INPUT, device="cuda")

    def call():
        with torch.set_grad_enabled(train):
            return rnn(x)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = [ms * 1000.0 for ms in back_to_back_ms(call, 1, 10)]  # one call between two events, then a synchronize
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    spans = [(e.time_range.start, e.time_range.end) for e in kernels]
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        by_name.setdefault(e.name[:90], []).append(e.time_range.end - e.time_range.start)
    streams = sorted({getattr(e, "device_resource_id", None) or 0 for e in kernels})
    return {"mode": mode, "bidirectional": bidir, "layers": layers, "batch": batch, "train": train,
            "call_us": statistics.median(times), "kernels": len(kernels),
            "sum_us": round(sum(b - a for a, b in spans), 1), "union_us": round(_union_us(spans), 1),
            "streams": streams,
            "by_name": {n: [len(v), round(statistics.fmean(v), 2)] for n, v in sorted(by_name.items(),
                                                                                       key=lambda kv: -sum(kv[1]))[:8]}}


def profile_program(path: str) -> dict:
    """A KernelBench-format program (benchmarks/whole_models) profiled two ways in one process: as this probe
    profiles (CUDA activity only: sum and union of the kernels' spans) and as scripts/device/zoo_measure.py profiles
    a step (CPU and CUDA activity, kernels attributed to their aten ops: their summed durations)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kernelbench_validate import _build_for, _load
    from zoo_measure import _profile

    step, inputs = _build_for(_load(Path(path)))()
    for _ in range(3):
        step(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(*inputs)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    spans = [(e.time_range.start, e.time_range.end) for e in kernels]
    zoo = _profile(step, inputs, module_ranges=False)
    return {"program": path, "kernels": len(kernels), "sum_us": round(sum(b - a for a, b in spans), 1),
            "union_us": round(_union_us(spans), 1), "zoo_measure_work_items": zoo["work_items"],
            "zoo_measure_sum_us": round(sum(k[3] for k in zoo["kernels"]), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--programs", nargs="*", default=[], help="KernelBench-format files to profile both ways")
    args = parser.parse_args()
    import torch

    if args.programs:
        rows = [profile_program(p) for p in args.programs]
        for row in rows:
            print(row, flush=True)
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "programs": rows}, indent=1))
        return 0

    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S"), "hidden": HIDDEN, "input": INPUT, "steps": STEPS, "cases": []}
    for case in CASES:
        try:
            row = run_case(*case)
        except Exception as exc:  # noqa: BLE001 - one case's failure is listed
            row = {"case": list(case), "error": f"{type(exc).__name__}: {exc}"[:300]}
        doc["cases"].append(row)
        print({k: v for k, v in row.items() if k != "by_name"}, flush=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
