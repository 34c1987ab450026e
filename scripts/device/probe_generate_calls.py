"""Does every call of a static-cache `generate()` pay for autotuning, or only the first few (issue 31)?

    PYTHONPATH=src python3 scripts/device/probe_generate_calls.py --out $OUT/generate_calls.json   # on the GPU, ~2 min

The zoo's profiled `llama_generate_static_cache` call (validation/zoo_issue31_measured.json.gz) ran 3102 L2-sized
`zero_` kernels between Triton launches, the pattern of Inductor's benchmarker, after 33 earlier calls. Here one
process runs CALLS calls of each workload, each timed alone on a host timer between torch.cuda.synchronize()
calls, then profiles PROFILED more, each on its own: per call its GPU work items, how many are L2-flush fills
(FillFunctor over an int buffer), Triton kernels, and their summed kernel time; and Dynamo's counters after all.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "zoo"))
import generation  # noqa: E402

from kernelcast.measure import synced_ms  # noqa: E402

CALLS = 12
PROFILED = 3
WORKLOADS = ("llama_generate_static_cache", "gpt2_generate_greedy")


def profiled_call(step, args) -> dict:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(*args)
        torch.cuda.synchronize()
    items = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    names = [e.name for e in items]
    fills = [e for e in items if "FillFunctor<int>" in e.name]
    return {"work_items": len(items), "kernel_us": round(sum(e.time_range.elapsed_us() for e in items), 1),
            "int_fills": len(fills), "int_fill_us": round(sum(e.time_range.elapsed_us() for e in fills), 1),
            "triton_kernels": sum(n.startswith("triton") for n in names),
            "top_names": sorted({n[:80] for n in names})[:40]}


def probe(name: str) -> dict:
    import torch._dynamo.utils as dynamo_utils

    step, args = getattr(generation, name)()
    call_ms = [round(ms, 2) for ms in synced_ms(lambda: step(*args), CALLS)]
    profiled = [profiled_call(step, args) for _ in range(PROFILED)]
    after_ms = [round(ms, 2) for ms in synced_ms(lambda: step(*args), 3)]
    counters = {k: dict(v) for k, v in dynamo_utils.counters.items() if v}
    return {"name": name, "call_ms": call_ms, "profiled": profiled, "after_profile_ms": after_ms,
            "median_last_half_ms": statistics.median(call_ms[CALLS // 2:]),
            "dynamo_counters": json.loads(json.dumps(counters, default=str))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import transformers

    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "transformers": transformers.__version__, "date": time.strftime("%Y-%m-%d %H:%M"),
           "command": "PYTHONPATH=src python3 scripts/device/probe_generate_calls.py " + " ".join(sys.argv[1:]),
           "calls": CALLS, "workloads": []}
    for name in WORKLOADS:
        t0 = time.perf_counter()
        doc["workloads"].append({**probe(name), "seconds": round(time.perf_counter() - t0, 1)})
        w = doc["workloads"][-1]
        print(name, "calls ms", w["call_ms"], "profiled", [(p["work_items"], p["int_fills"], p["kernel_us"])
                                                          for p in w["profiled"]], f"{w['seconds']} s")
        torch._dynamo.reset()
    Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
