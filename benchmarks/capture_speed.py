"""Capture + predict time and peak RSS on this machine (no GPU), each workload in fresh processes.

    python3 benchmarks/capture_speed.py [--repeats 3] [--json out.json] [--only llama]

Targets: GPT-2 small training step < 2 s after the imports (issue 2); Llama-7B forward + backward + AdamW < 7 s
for the whole process, imports included, and < 1 GB (issue 35; issue 9's was 10 s).
Two readings per repeat, each in a fresh process:
- the command a user runs, `python -m kernelcast predict WORKLOAD --gpu h200`, timed whole from the parent
  (interpreter start, imports, capture, prediction, the printed report) with its peak RSS from wait4;
- its parts, inside a child: the imports of torch, kernelcast and the model's library (transformers), then
  capture (build + a warm-up step + the recorded step) plus prediction after them.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [
    # (name, workload, environment, time target s, RSS target MB, whether the time target is the whole CLI process's)
    ("gpt2-small train (B=8, S=1024)", "examples/hf_models.py:gpt2_train", {"KC_BATCH": "8", "KC_SEQ": "1024"}, 2.0, None,
     False),
    ("llama-7B train, AdamW (B=1, S=2048)", "examples/hf_models.py:llama_train", {"KC_BATCH": "1", "KC_SEQ": "2048"}, 7.0,
     1024, True),
    ("gpt example train (nanoGPT-like)", "example:gpt", {}, None, None, False),
    ("cnn example train (ResNet-18-like)", "example:cnn", {}, None, None, False),
]

CHILD = """
import json, resource, sys, time
t_import = time.perf_counter()
import kernelcast
import torch
from kernelcast.api import capture_file
from kernelcast.predict import predict_capture
if "hf_models" in sys.argv[1]:
    import transformers
    transformers.GPT2LMHeadModel, transformers.LlamaForCausalLM  # resolve transformers' lazy imports
import_s = time.perf_counter() - t_import
t0 = time.perf_counter()
cap = capture_file(sys.argv[1], "h200")
pred = predict_capture(cap, "h200")
elapsed = time.perf_counter() - t0
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "import_s": import_s, "rss_mb": rss_mb, "ops": len(cap.ops),
                  "kernels": pred.kernels}))
"""


def _env(env):
    return {**os.environ, **env, "PYTHONPATH": os.path.join(ROOT, "src")}


def run_case(workload, env):
    out = subprocess.run([sys.executable, "-c", CHILD, workload], capture_output=True, text=True, env=_env(env),
                         cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_cli(workload, env):
    """(seconds, peak RSS MB) of the whole `kernelcast predict` process, as a user's shell would time it."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: a long stderr cannot block the child
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "kernelcast", "predict", workload, "--gpu", "h200"],
                                 stdout=subprocess.DEVNULL, stderr=err, env=_env(env), cwd=ROOT)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        code = child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        if code != 0:
            err.seek(0)
            raise SystemExit(f"kernelcast predict {workload} failed ({code}): {err.read().decode().strip()[-500:]}")
    return seconds, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--only", help="the cases whose name contains this text")
    args = parser.parse_args()
    rows = []
    print(f"{'workload':38s} {'ops':>6s} {'capture+predict s':>18s} {'imports s':>10s} {'whole CLI s':>18s} "
          f"{'peak RSS MB':>12s}  target")
    for name, workload, env, t_target, rss_target, whole_process in CASES:
        if args.only and args.only not in name:
            continue
        runs = [run_case(workload, env) for _ in range(args.repeats)]
        cli = [run_cli(workload, env) for _ in range(args.repeats)]
        secs, cli_secs = [r["seconds"] for r in runs], [c[0] for c in cli]
        timed = cli_secs if whole_process else secs
        rss = max([r["rss_mb"] for r in runs] + [c[1] for c in cli])
        target = " ".join(x for x in (f"< {t_target} s" + (" whole CLI" if whole_process else "") if t_target else "",
                                      f"< {rss_target} MB" if rss_target else "") if x)
        ok = (t_target is None or statistics.median(timed) < t_target) and (rss_target is None or rss < rss_target)
        imports = statistics.median(r["import_s"] for r in runs)

        def spread(values):
            return f"{statistics.median(values):5.2f} ({min(values):.2f}-{max(values):.2f})"

        print(f"{name:38s} {runs[0]['ops']:6d} {spread(secs):>18s} {imports:10.2f} {spread(cli_secs):>18s} "
              f"{rss:12.0f}  {target} {'ok' if ok else 'MISSED' if target else ''}")
        rows.append({"name": name, "workload": workload, "env": env, "seconds": secs, "rss_mb": rss,
                     "import_s": [r["import_s"] for r in runs], "cli_seconds": cli_secs,
                     "cli_command": f"python -m kernelcast predict {workload} --gpu h200",
                     "ops": runs[0]["ops"], "kernels": runs[0]["kernels"], "target_s": t_target,
                     "target_is_whole_cli": whole_process, "target_rss_mb": rss_target, "met": ok})
    meta = {"cpu_count": os.cpu_count(), "date": time.strftime("%Y-%m-%d"), "python": sys.version.split()[0],
            "command": " ".join(["python3 benchmarks/capture_speed.py", *sys.argv[1:]]), "repeats": args.repeats}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
