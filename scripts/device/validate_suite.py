"""The validation suite: predict (calibrated) and measure each step on the GPU; write one JSON.

One command on a machine with a GPU, from the repository root, runs the suite and regenerates the docs:

    PYTHONPATH=src python3 scripts/device/validate_suite.py --out validation/suite.json --docs docs/validation.md

(On the device tool, write under $OUT instead, fetch suite.json into validation/, and run
`python3 scripts/eval/report_validation.py validation/ docs/validation.md` here.)

The kernel model uses the shipped profile (src/kernelcast/profiles/h200.json), measured by `kernelcast
calibrate` from microbenchmarks only; no constant is fitted to these steps.
"""

import argparse
import json
import os
import sys
import time
import traceback

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(SCRIPTS, d) for d in ("device", "fit", "eval")]  # sibling scripts

import kernelcast  # noqa: F401  (before torch)
import torch

from kernelcast.validate import validate_file

HF = "examples/hf_models.py"
SUITE = [
    # (name, workload, environment of the workload file)
    ("gpt2_train_b4", f"{HF}:gpt2_train", {"KC_BATCH": "4", "KC_SEQ": "512"}),
    ("gpt2_train_b16", f"{HF}:gpt2_train", {"KC_BATCH": "16", "KC_SEQ": "512"}),
    ("llama_forward_b1", f"{HF}:llama_forward", {"KC_BATCH": "1", "KC_SEQ": "512", "KC_LAYERS": "8"}),
    ("llama_forward_b8", f"{HF}:llama_forward", {"KC_BATCH": "8", "KC_SEQ": "512", "KC_LAYERS": "8"}),
    ("bert_train_b16", f"{HF}:bert_train", {"KC_BATCH": "16", "KC_SEQ": "128"}),
    ("bert_train_b64", f"{HF}:bert_train", {"KC_BATCH": "64", "KC_SEQ": "128"}),
    ("vit_train_b16", f"{HF}:vit_train", {"KC_BATCH": "16"}),
    ("vit_train_b64", f"{HF}:vit_train", {"KC_BATCH": "64"}),
    ("cnn_train", "example:cnn", {}),
    ("gpt_train_adamw_autocast", "example:gpt", {}),
    ("matmul_sweep", "examples/suite.py:matmul_sweep", {}),
    ("elementwise_sweep", "examples/suite.py:elementwise_sweep", {}),
    ("norms_softmax", "examples/suite.py:norms_softmax", {}),
]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--docs", help="regenerate this markdown from the suite's folder afterwards")
    args = parser.parse_args()
    results = []
    for name, spec, env in SUITE:
        if args.only and name not in args.only:
            continue
        os.environ.update(env)
        try:
            v = validate_file(spec, args.gpu)
            row = {"name": name, "env": env, **v.to_json()}
            e = v.to_json()["errors"]
            print(f"{name:26s} GPU time {e['gpu_time']:+7.1%}  step {e['step_time']:+7.1%}  kernels {e['kernels']:+6.1%}"
                  f"  (measured step {v.measurement.step_ms_median:.2f} ms, GPU {v.measurement.gpu_time_us / 1000:.2f} ms)",
                  flush=True)
        except Exception as exc:  # one broken step must not lose the rest
            row = {"name": name, "env": env, "workload": spec, "error": f"{type(exc).__name__}: {exc}"[:1000],
                   "traceback": traceback.format_exc()[-3000:]}
            print(f"{name:26s} ERROR {row['error'][:200]}", flush=True)
        finally:
            for key in env:
                os.environ.pop(key, None)
            torch.cuda.empty_cache()
        results.append(row)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": time.strftime("%Y-%m-%d"),
            "command": "PYTHONPATH=src python3 scripts/device/validate_suite.py --out $OUT/suite.json"}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "workloads": results}, f)
    if args.docs:
        import report_validation

        report_validation.write_report(os.path.dirname(os.path.abspath(args.out)), args.docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
