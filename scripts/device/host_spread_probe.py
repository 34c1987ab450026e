"""Device probe: what a host-bound step's measured time is made of, across processes and process states (issue 33).

    PYTHONPATH=src python3 scripts/device/host_spread_probe.py --out $OUT/host_spread_run1.json   # on a GPU; run it in
    python3 scripts/device/host_spread_probe.py --summary validation/host_spread/host_spread_run*.json  # fresh processes

The same host-bound steps (REFERENCE: a 20-op elementwise chain, the zoo's tabular MLP training step, the zoo's
GPT-2 forward) timed as scripts/device/zoo_measure.py times them (back-to-back steps between CUDA events) and by the
thread's CPU time over the same steps, with the three CPU microbenchmarks kernelcast scales host costs by
(capture/cpu_speed.py), at each of these states of one process:
- fresh: nothing else run yet;
- after_zoo: after zoo_measure.py's routine (build, warm-up, timing, memory, torch.profiler) ran on OTHERS, as
  the zoo's one-process run does (a torch.compile'd one among them);
- gc_frozen: after gc.collect() and gc.freeze() (Python's cyclic collector no longer walks the objects alive);
- dynamo_reset: after torch._dynamo.reset().
CPU time that moves with the wall time says the process does more work; wall time alone moving says it waits
(other tenants, the clock). Run in two or three processes to see the process-to-process part.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ("tabular_batchnorm1d_train", "gpt2_forward_fp32_b1")
OTHERS = ("resnet_train_fp32", "bert_forward_fp16", "compiled_mean", "lstm_train", "moe_train", "roberta_train")
STEPS = 20
REPEATS = 5
CHAIN_OPS = 20


def _chain_build():
    import torch

    x = torch.randn(1024, device="cuda")

    def step(x):
        for _ in range(CHAIN_OPS // 2):
            x = x * 1.0001
            x = x + 0.0001
        return x

    return step, (x,)


def _zoo_build(name: str):
    sys.path.insert(0, str(ROOT / "examples" / "zoo"))
    from registry import ZOO

    from kernelcast.capture.workload import load_build

    spec = dict((n, s) for n, _, s in ZOO)[name]
    build, _ = load_build(str(ROOT / spec.split(":")[0]) + ":" + spec.split(":")[1])
    return build


def _time(step, args) -> dict:
    import torch

    from kernelcast.measure import back_to_back_ms

    for _ in range(3):
        step(*args)
    torch.cuda.synchronize()
    wall = back_to_back_ms(lambda: step(*args), STEPS, REPEATS)
    cpu = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        t0 = time.thread_time()
        for _ in range(STEPS):
            step(*args)
        cpu.append((time.thread_time() - t0) / STEPS * 1e3)
        torch.cuda.synchronize()
    return {"wall_ms": statistics.median(wall), "cpu_ms": statistics.median(cpu)}


def _state(label: str, refs: dict) -> dict:
    from kernelcast.capture.cpu_speed import measure_cpu_bench

    row = {"state": label, "cpu_bench": measure_cpu_bench().to_json(), "steps": {}}
    for name, (step, args) in refs.items():
        row["steps"][name] = _time(step, args)
    print(label, json.dumps({k: {m: round(v, 3) for m, v in t.items()} for k, t in row["steps"].items()}), flush=True)
    return row


def probe() -> dict:
    import torch

    sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts
    import zoo_measure

    refs = {"chain20": _chain_build()}
    for name in REFERENCE:
        refs[name] = _zoo_build(name)()
    rows = [_state("fresh", refs)]
    for name in OTHERS:
        try:
            zoo_measure.measure(_zoo_build(name))
        except Exception as exc:  # one that fails here is a note, not the end of the probe
            print(f"{name}: {type(exc).__name__}: {exc}"[:200], flush=True)
        gc.collect()
        torch.cuda.empty_cache()
    rows.append(_state("after_zoo", refs))
    gc.collect()
    gc.freeze()
    rows.append(_state("gc_frozen", refs))
    torch._dynamo.reset()
    rows.append(_state("dynamo_reset", refs))
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
            "pid": os.getpid(), "steps": STEPS, "repeats": REPEATS, "rows": rows,
            "command": "PYTHONPATH=src python3 scripts/device/host_spread_probe.py --out OUT"}


def _cause(name: str, chain) -> None:
    """One thing the zoo's process did before a workload, done alone."""
    import torch

    step, args = chain
    if name == "profiler":  # as zoo_measure.py's _profile: CPU and CUDA activities, module ranges
        from torch.profiler import ProfilerActivity, profile

        from kernelcast.measure import _module_ranges

        with _module_ranges(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            step(*args)
            torch.cuda.synchronize()
    elif name == "compile":  # Dynamo and Inductor loaded and run once
        fn = torch.compile(lambda x: (x * 2).sin() + 1)
        fn(torch.randn(4096, device="cuda"))
        torch.cuda.synchronize()
    elif name == "allocator":  # the caching allocator holding many blocks of many sizes
        keep = [torch.empty(int(1024 * 1.3 ** (i % 40)), device="cuda") for i in range(3000)]
        del keep[::2]
        torch.cuda.synchronize()
    elif name == "zoo_one":
        sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts
        import zoo_measure

        zoo_measure.measure(_zoo_build("resnet_train_fp32"))
    elif name != "none":
        raise SystemExit(f"unknown cause {name!r}")


CAUSES = ("none", "profiler", "compile", "allocator", "zoo_one")


def isolate(cause: str) -> dict:
    """In a fresh process: the 20-op chain and the CPU benchmarks, then one cause, then both again."""
    import torch

    chain = _chain_build()
    before = _state("fresh", {"chain20": chain})
    _cause(cause, chain)
    gc.collect()
    after = _state(f"after_{cause}", {"chain20": chain})
    return {"cause": cause, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d"), "rows": [before, after],
            "command": f"PYTHONPATH=src python3 scripts/device/host_spread_probe.py --isolate {cause} --out OUT"}


def summary(paths: list[str]) -> int:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    names = list(runs[0]["rows"][0]["steps"])
    print(f"{'state':14}" + "".join(f"{n[:22]:>26}" for n in names) + "   python/dispatch/module bench (us)")
    for run in runs:
        for row in run["rows"]:
            cells = "".join(f"{row['steps'][n]['wall_ms']:>13.3f} / {row['steps'][n]['cpu_ms']:<9.3f}"
                            for n in names)
            b = row["cpu_bench"]
            print(f"{row['state']:14}{cells}   {b['python_bench_us']:.0f}/{b['dispatch_add_2000_us']:.0f}/"
                  f"{b['module_call_5000_us']:.0f}")
        print()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--summary", nargs="+")
    parser.add_argument("--isolate", choices=CAUSES, help="one cause alone, in this fresh process")
    args = parser.parse_args()
    if args.summary:
        return summary(args.summary)
    doc = isolate(args.isolate) if args.isolate else probe()
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
