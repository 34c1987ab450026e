"""KernelBench levels 1-2 on a real GPU, kernel by kernel: which kernels each program's aten ops ran and how long
each took, so a prediction's miss can be put on the op (and the library kernel) that makes it (issue 30).

    PYTHONPATH=src python3 scripts/device/kernelbench_kernels.py --out $OUT/kernelbench_kernels.json.gz   # on the GPU
    python3 scripts/device/kernelbench_kernels.py compare validation/kernelbench/h200_kernels.json.gz      # here
    python3 scripts/device/kernelbench_kernels.py compare validation/kernelbench/h200_kernels.json.gz --all  # every one
    PYTHONPATH=src python3 scripts/device/kernelbench_kernels.py --dir benchmarks/whole_models --out $OUT/wm.json.gz
    python3 scripts/device/kernelbench_kernels.py compare validation/whole_models/h100_kernels.json.gz \
        --dir benchmarks/whole_models --gpu h100-sxm        # our own whole-model programs (their captures: build/)

Measure (on the GPU): each program built as KernelBench runs it (scripts/eval/kernelbench_validate.py: seed 42, fp32,
torch.no_grad(), model and inputs on CUDA), WARMUP calls, then PROFILED calls under torch.profiler; every GPU
work item with its duration and the aten ops on its launch stack (outermost first), as scripts/device/zoo_measure.py
records a zoo step. The library versions and the math settings in force (TF32 for cuDNN and for matmuls) are
recorded beside them: KernelBench's published timings are torch 2.5, ours torch 2.11.

Compare (here, no GPU): each captured program (build/kernelbench/captures, `kernelbench_validate.py capture`)
predicted on the H200, its kernel time per outermost aten op against the measured one (median over the
profiled calls), and the error summed by op over the programs: which op kinds the kernel model misses.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts

WARMUP = 3
PROFILED = 3
BUSY_ONLY_MS = 0.0  # measure every program; compare reads the busy ones by kernelbench_validate's rule


def measure(out: str, only: list[str], folder: str | None = None) -> int:
    import torch

    from kernelbench_validate import _build_for, _load, programs
    from zoo_measure import _profile, _write

    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"),
           "settings": {"cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                        "float32_matmul_precision": torch.get_float32_matmul_precision(),
                        "cudnn_benchmark": torch.backends.cudnn.benchmark},
           "command": "PYTHONPATH=src python3 scripts/device/kernelbench_kernels.py " + " ".join(sys.argv[1:]),
           "warmup": WARMUP, "profiled": PROFILED, "programs": {}}
    listed = [(f"{Path(folder).name}/{p.name}", p) for p in sorted(Path(folder).glob("*.py"))] if folder else programs()
    for name, path in listed:
        if only and not any(o in name for o in only):
            continue
        t0 = time.perf_counter()
        entry: dict = {}
        try:
            step, args = _build_for(_load(path))()
            for _ in range(WARMUP):
                step(*args)
            torch.cuda.synchronize()
            calls = [_profile(step, args, module_ranges=False) for _ in range(PROFILED)]
            entry = {"work_items": calls[0]["work_items"],
                     "calls": [[[k[0], k[2], k[3]] for k in c["kernels"]] for c in calls]}
            del step, args
        except Exception as exc:  # one broken program must not lose the others
            entry = {"error": f"{type(exc).__name__}: {exc}"[:500], "traceback": traceback.format_exc()[-1500:]}
        entry["seconds"] = round(time.perf_counter() - t0, 2)
        doc["programs"][name] = entry
        torch.cuda.empty_cache()
        gpu_us = sum(k[2] for k in entry["calls"][0]) if "calls" in entry else None
        print(f"{name}: {gpu_us if gpu_us is None else round(gpu_us, 1)} us ({entry['seconds']} s)", flush=True)
        _write(doc, out)
    return 0


def _measured_by_op(calls: list, captured_ops: set[str]) -> dict[str, float]:
    """{outermost aten op packet: median over the calls of its kernels' summed µs}."""
    from zoo_validate import _owner

    per_call = []
    for kernels in calls:
        by_op: collections.Counter = collections.Counter()
        for chain, _, us in kernels:
            by_op[_owner(chain, captured_ops)] += us
        per_call.append(by_op)
    ops = set().union(*per_call)
    return {op: statistics.median(c.get(op, 0.0) for c in per_call) for op in ops}


# An op's kernels under this many µs in a program are left out of its per-program ratio: near the launch floor a
# ratio says little about the op's kind.
RATIO_MIN_US = 5.0


def compare(path: str, out: str | None, profile_path: str | None = None, every_program: bool = False,
            gpu_name: str = "h200", folder: str | None = None) -> int:
    import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
    from kernelcast.measure import packet
    from kernelcast.devices import get_gpu
    from kernelcast.predict import predict_capture
    from kernelcast.records import Capture

    from kernelbench_validate import CAPTURES, _busy, _ours

    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    ours = _ours()
    gpu = get_gpu(gpu_name)
    if folder:  # our own programs (whole_models_check.py captured them): every one, no H200 reference
        from whole_models_check import CAPTURES as FOLDER_CAPTURES
        every_program = True
    model = None
    if profile_path:  # a rebuilt profile tried before it replaces the shipped one
        from kernelcast.predict.calibrated import CalibratedModel

        data = json.loads(Path(profile_path).read_text())
    rows, by_op = {}, collections.defaultdict(lambda: [0.0, 0.0, 0])
    ratios = collections.defaultdict(list)  # op -> predicted / measured per program where it ran RATIO_MIN_US
    for name, entry in sorted(doc["programs"].items()):
        target = (FOLDER_CAPTURES / (Path(name).stem + ".json") if folder
                  else CAPTURES / (name.replace("/", "__") + ".json"))
        ref = {} if folder else ours.get(name)
        if "calls" not in entry or not target.exists() or ref is None:
            continue
        if not every_program and not _busy({"measured_ms": {"h200": ref["mean_ms"]},
                                            "h200_gpu_busy_us": ref["gpu_busy_us"]}):
            continue
        cap = Capture.load(target)
        if profile_path:
            model = CalibratedModel(gpu, cap.settings, data, gpu)
        pred = predict_capture(cap, gpu, kernel_model=model)
        predicted: collections.Counter = collections.Counter()
        for p in pred.ops:
            root = p.index if p.parent < 0 else p.parent
            predicted[packet(cap.ops[root].op)] += p.time_us
        captured = {packet(o.op) for o in cap.ops if o.parent < 0}
        measured = _measured_by_op(entry["calls"], captured)
        ops = sorted(set(predicted) | set(measured), key=lambda o: -measured.get(o, 0.0))
        rows[name] = {op: [round(predicted.get(op, 0.0), 1), round(measured.get(op, 0.0), 1)] for op in ops
                      if predicted.get(op, 0.0) or measured.get(op, 0.0)}
        for op, (p, m) in rows[name].items():
            by_op[op][0] += p
            by_op[op][1] += m
            by_op[op][2] += 1
            if m >= RATIO_MIN_US and p > 0:
                ratios[op].append(p / m)
    # the summed error follows the op's largest programs; the median of the per-program ratios shows a kind
    # priced off across shapes (how the one-element broadcast operands and 3-D pools' lanes were found)
    which = "programs" if every_program else "GPU-busy programs"
    print(f"{len(rows)} {which}; kernel time by outermost aten op, summed over them ({gpu.id}), and the median of "
          f"its per-program predicted / measured (where it ran at least {RATIO_MIN_US:g} us)")
    print(f"{'op':34s} {'programs':>8s} {'predicted ms':>12s} {'measured ms':>12s} {'error':>7s} {'median ratio':>12s}")
    for op, (p, m, n) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
        median = f"{statistics.median(ratios[op]):12.2f}" if ratios[op] else f"{'-':>12s}"
        print(f"{op:34s} {n:8d} {p / 1e3:12.2f} {m / 1e3:12.2f} {(p / m - 1) if m else float('inf'):+7.0%} "
              f"{median}")
    if out:
        Path(out).write_text(json.dumps({"command": "python3 scripts/device/kernelbench_kernels.py compare " + path,
                                         "programs": rows}, indent=1) + "\n")
        print(f"wrote {out}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", default="measure", choices=("measure", "compare"))
    parser.add_argument("path", nargs="?", help="compare: the measured file")
    parser.add_argument("--out", help="measure: the file to write (.json.gz); compare: per-program rows (.json)")
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--profile", help="compare: an H200 profile file to use instead of the shipped one")
    parser.add_argument("--all", action="store_true", help="compare: every program, not only the GPU-busy ones")
    parser.add_argument("--dir", help="KernelBench-format programs of this folder instead of levels 1-2")
    parser.add_argument("--gpu", default="h200", help="compare: the GPU the measurement ran on (kernelcast's id)")
    args = parser.parse_args()
    if args.what == "compare":
        return compare(args.path, args.out, args.profile, args.all, args.gpu, args.dir)
    if not args.out:
        parser.error("measure needs --out")
    return measure(args.out, args.only, args.dir)


if __name__ == "__main__":
    sys.exit(main())
