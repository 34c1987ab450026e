"""Measure workloads given as FILE.py:build on a real GPU, as scripts/device/zoo_measure.py measures the zoo: step time
(CUDA events around back-to-back steps, and synchronized single steps), GPU kernel time and each kernel under
torch.profiler, memory. For the shared cases and benchmarks/cases, whose truths the zoo does not hold.

    PYTHONPATH=src python3 scripts/device/measure_workloads.py --out $OUT/cases_measured.json \\
        benchmarks/cases/compiled_cnn_logs_item.py:build [--compile default] [--warmup 12] [--arg k=v]

A compiled step warms up for --warmup steps first (a frame that recompiles each step reaches Dynamo's recompile
limit, 8, and runs eagerly from then on: the steady state).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import torch

SCRIPTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(SCRIPTS / d) for d in ("device", "fit", "eval")]  # sibling scripts
import zoo_measure  # noqa: E402

from kernelcast.capture.workload import load_build, on_sys_path  # noqa: E402


def _value(text: str):
    try:
        return json.loads(text.lower() if text in ("True", "False") else text)
    except json.JSONDecodeError:
        return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="+", help="FILE.py:build")
    parser.add_argument("--out", required=True)
    parser.add_argument("--compile", dest="compile_mode", help="wrap each step in torch.compile(mode=...)")
    parser.add_argument("--warmup", type=int, default=zoo_measure.WARMUP)
    parser.add_argument("--arg", action="append", default=[], help="build() keyword argument, k=v")
    args = parser.parse_args()
    out = Path(args.out)
    doc = json.loads(out.read_text()) if out.exists() else {"workloads": {}}
    doc.update({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")})
    kwargs = dict(a.split("=", 1) for a in args.arg)
    kwargs = {k: _value(v) for k, v in kwargs.items()}
    zoo_measure.WARMUP = args.warmup
    for spec in args.specs:
        key = spec + (f" --compile {args.compile_mode}" if args.compile_mode else "") + \
            "".join(f" --arg {a}" for a in args.arg)
        t0 = time.perf_counter()
        try:
            build, folder = load_build(spec)
            with on_sys_path(folder):
                def built():
                    step, step_args = build(**kwargs)
                    if args.compile_mode:
                        step = torch.compile(step, mode=args.compile_mode)
                    return step, step_args
                entry = zoo_measure.measure(built)
        except Exception as exc:  # one failing workload must not lose the others
            entry = {"error": f"{type(exc).__name__}: {exc}"[:500], "traceback": traceback.format_exc()[-1500:]}
        entry["seconds"] = round(time.perf_counter() - t0, 2)
        entry["command"] = "PYTHONPATH=src python3 scripts/device/measure_workloads.py " + " ".join(sys.argv[1:])
        doc["workloads"][key] = entry
        print(f"{key}: step {entry.get('step_ms_median')} ms, GPU {entry.get('gpu_time_us')} us "
              f"({entry['seconds']} s)", flush=True)
        torch._dynamo.reset()
        out.write_text(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
