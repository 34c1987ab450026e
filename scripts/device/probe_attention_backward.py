"""Attention backward kernels timed by their own durations, for the sweep's attention cases (on the GPU).

    PYTHONPATH=src python3 scripts/device/probe_attention_backward.py --out $OUT/h200_attention_backward_raw.json.gz

Why: the designed sweep timed a backward case as forward + backward between CUDA events, less the forward case.
At small shapes that measured the host, not the GPU: every backward came out at 90-670 µs, up to 61x its forward
(the autograd call's CPU time, with the GPU idle), and a GPT-2-sized causal backward was priced at 342 µs against
148 µs of kernels measured in a training step. Here each case's graph is built once; the backward alone runs
REPEATS times under torch.profiler, and its time is the sum of the CUDA kernels' durations per call (kernels from
autograd's device thread included: the profiler session, not a range on the main thread, collects them).
The rows (pass "backward_kernels") replace the sweep's backward rows in the profile (calibrate/profile.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

REPEATS = 3


def measure(params: dict) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.autograd import DeviceType
    from torch.nn.attention import sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    from kernelcast.calibrate.timing import OpSnapshot
    from kernelcast.calibrate.sweep import attention_inputs

    q, k, v, kwargs, backend = attention_inputs(params, "cuda", requires_grad=True)
    with sdpa_kernel([backend]):
        out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    grad = torch.randn_like(out)
    snapshot = OpSnapshot()  # the ops as the capture records them (the cost key comes from the backward op)
    with snapshot, sdpa_kernel([backend]):
        o = F.scaled_dot_product_attention(q, k, v, **kwargs)
        torch.autograd.grad(o, (q, k, v), grad)
    for _ in range(2):  # warm-up: plans built, caches filled
        torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPEATS):
            torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    per_call = len(kernels) // REPEATS
    times = [sum(e.time_range.end - e.time_range.start for e in kernels[i * per_call:(i + 1) * per_call])
             for i in range(REPEATS)]
    return {"kind": "attention", **params, "pass": "backward_kernels",
            "ops": [op.to_json() for op in snapshot.ops], "time_us": round(statistics.median(times), 3),
            "times_us": [round(t, 3) for t in times],
            "kernels": [(e.name[:100], round(e.time_range.end - e.time_range.start, 3)) for e in kernels[:per_call]]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import torch

    from kernelcast.calibrate import run_meta, write_raw
    from kernelcast.calibrate.sweep import attention_cases

    t0 = time.perf_counter()
    results = []
    for case in attention_cases("cuda"):
        if case.params["pass"] != "backward":
            continue
        params = {k: v for k, v in case.params.items() if k != "pass"}
        try:
            results.append(measure(params))
        except Exception as exc:  # a backend that refuses a case: data too
            results.append({"kind": "attention", **params, "pass": "backward_kernels",
                            "error": f"{type(exc).__name__}: {exc}"[:300]})
        torch.cuda.empty_cache()
    raw = {"meta": run_meta("PYTHONPATH=src python3 scripts/device/probe_attention_backward.py --out "
                            "h200_attention_backward_raw.json.gz", t0),
           "cases": [], "sweep": results, "host": {}}
    write_raw(raw, args.out)
    ok = [r for r in results if "error" not in r]
    print(f"{len(results)} backward cases, {len(results) - len(ok)} refused, {raw['meta']['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
