"""Issue 13's device check of `kernelcast advise`: each kind of fix applied to a workload on the GPU, its measured
saving beside the saving advise predicts (torch.compile's are checked by scripts/device/compile_measure.py and
scripts/eval/compile_validate.py).

On the device machine (one GPU, kernelcast's checkout):

    PYTHONPATH=src python3 scripts/device/advise_check.py --measure --out $OUT/advise_measured.json

runs each CASES entry as written and with its fix (the same change advise makes on fake tensors: kernelcast.advise
prepared_fixes(), applied to the real model build() makes; a larger batch through build()'s argument), each timed
with CUDA events (WARMUP steps, then REPEATS x STEPS back-to-back steps; the median). Here (no GPU):

    PYTHONPATH=src python3 scripts/device/advise_check.py --predict validation/advise/advise_measured.json \
        --out validation/advise/advise_check.json

predicts both sides on the H200 and prints predicted and measured saving per fix.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import kernelcast  # noqa: F401  (before torch)

from kernelcast.whatif.advise import LARGER_BATCH_FACTOR, prepared_fixes
from kernelcast.capture.workload import load_build, on_sys_path
from kernelcast.measure import back_to_back_ms

ROOT = Path(__file__).resolve().parents[2]
# (workload, fix, build() arguments): one case per kind of fix, on workloads where it applies.
CASES = (
    ("examples/zoo/vision.py:resnet_train_fp32", "bf16 autocast", {}),
    ("examples/zoo/vision.py:resnet_train_fp32", "channels_last", {}),
    ("examples/zoo/optimizers.py:build_adamw", "fused optimizer", {}),
    ("examples/zoo/optimizers.py:build_adamw", "bf16 autocast", {}),
    ("examples/zoo/transformers_zoo.py:qwen2_train", "fused optimizer", {}),
    ("examples/zoo/blocks.py:unet_block_train", "channels_last", {}),
    ("example:cnn", "larger batch", {}),
    ("example:gpt", "larger batch", {}),
)
WARMUP, STEPS, REPEATS = 5, 10, 5


def _step_for(spec: str, fix: str | None, args: dict):
    build, _ = load_build(spec)
    from kernelcast.whatif.transforms import batch_parameter
    from kernelcast.capture.workload import build_parameters

    kwargs = dict(args)
    per = 1
    if fix == "larger batch":
        name = batch_parameter(build)
        kwargs[name] = int(kwargs.get(name, build_parameters(build)[name])) * LARGER_BATCH_FACTOR
        per = LARGER_BATCH_FACTOR
    step, step_args = build(**kwargs)
    step_args = tuple(step_args) if isinstance(step_args, (list, tuple)) else (step_args,)
    if fix in prepared_fixes():
        step = prepared_fixes()[fix](step, step_args)
    return step, step_args, per


def _measure_one(spec: str, fix: str | None, args: dict) -> dict:
    import torch

    step, step_args, per = _step_for(spec, fix, args)
    for _ in range(WARMUP):
        step(*step_args)
    torch.cuda.synchronize()
    times = [ms / per for ms in back_to_back_ms(lambda: step(*step_args), STEPS, REPEATS)]
    del step, step_args
    import gc
    gc.collect()
    torch.cuda.empty_cache()
    return {"step_ms": times, "step_ms_median": statistics.median(times)}


def measure(out: str) -> int:
    import torch

    results = []
    for spec, fix, args in CASES:
        folder = load_build(spec)[1]
        with on_sys_path(folder) if folder else _nothing():
            row = {"workload": spec, "fix": fix, "args": args}
            try:
                row["before"] = _measure_one(spec, None, args)
                row["after"] = _measure_one(spec, fix, args)
            except Exception as exc:  # one case's failure is data, not the end of the run
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        results.append(row)
        print(spec, fix, {k: v.get("step_ms_median") for k, v in row.items() if isinstance(v, dict) and k != "args"},
              row.get("error", ""), flush=True)
        Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "date": time.strftime("%Y-%m-%d"), "command":
                                         "PYTHONPATH=src python3 scripts/device/advise_check.py --measure --out OUT",
                                         "settings": {"warmup": WARMUP, "steps": STEPS, "repeats": REPEATS},
                                         "rows": results}, indent=1))
    return 0


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def predict(measured_path: str, out: str | None) -> int:
    from kernelcast.api import capture_file
    from kernelcast.predict import predict_capture

    doc = json.loads(Path(measured_path).read_text())
    rows = []
    for row in doc["rows"]:
        if "error" in row:
            print(f"{row['workload']} {row['fix']}: not measured ({row['error'][:80]})")
            continue
        spec, fix, args = row["workload"], row["fix"], row["args"]
        build, _ = load_build(spec)
        from kernelcast.whatif.transforms import batch_parameter
        from kernelcast.capture.workload import build_parameters

        before = predict_capture(capture_file(spec, "h200", 1, args), "h200").step_time_us / 1000
        if fix == "larger batch":
            name = batch_parameter(build)
            bigger = {**args, name: int(args.get(name, build_parameters(build)[name])) * LARGER_BATCH_FACTOR}
            after = predict_capture(capture_file(spec, "h200", 1, bigger), "h200").step_time_us / 1000
            after /= LARGER_BATCH_FACTOR
        else:
            after = predict_capture(capture_file(spec, "h200", 1, args, prepare=prepared_fixes()[fix]),
                                    "h200").step_time_us / 1000
        m_before, m_after = row["before"]["step_ms_median"], row["after"]["step_ms_median"]
        r = {"workload": spec, "fix": fix, "predicted_before_ms": before, "predicted_after_ms": after,
             "measured_before_ms": m_before, "measured_after_ms": m_after,
             "predicted_saving": (before - after) / before, "measured_saving": (m_before - m_after) / m_before}
        r["sign_right"] = (r["predicted_saving"] > 0) == (r["measured_saving"] > 0)
        rows.append(r)
        print(f"{spec.split(':')[-1]:28s} {fix:16s} predicted {before:8.3f} -> {after:8.3f} ms "
              f"({r['predicted_saving']:+.0%})  measured {m_before:8.3f} -> {m_after:8.3f} ms "
              f"({r['measured_saving']:+.0%})  {'sign right' if r['sign_right'] else 'SIGN WRONG'}", flush=True)
    if out:
        Path(out).write_text(json.dumps({"command": f"python3 scripts/device/advise_check.py --predict {measured_path}",
                                         "rows": rows}, indent=1) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true", help="run the cases on this machine's GPU")
    parser.add_argument("--predict", metavar="MEASURED", help="predict the cases of a --measure run here")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.measure:
        return measure(args.out or "advise_measured.json")
    if args.predict:
        return predict(args.predict, args.out)
    parser.error("give --measure (on a GPU) or --predict MEASURED")
    return 2


if __name__ == "__main__":
    sys.exit(main())
