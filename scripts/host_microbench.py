"""Host (CPU) cost of eager PyTorch ops on the machine it runs on: the constants of predict/host.py.

    PYTHONPATH=src python3 scripts/host_microbench.py --out $OUT/host_microbench.json

Each case runs a loop of N ops with tiny tensors, so the GPU finishes each kernel before the next launch
arrives and the loop time is the CPU's. Synchronised before and after; repeated; medians with min and max.
"""

import argparse
import json
import statistics
import time

import torch

N_OPS = 2000
REPEATS = 7


def per_op_us(fn, n: int = N_OPS) -> list[float]:
    runs = []
    for _ in range(REPEATS + 1):  # first run warms up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return runs[1:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    x = torch.ones(16, device="cuda")
    w = torch.ones(16, 16, device="cuda")
    ln = torch.nn.LayerNorm(16).cuda()
    cases = {
        "add (1 kernel)": lambda: x + 1,
        "mm 16x16 (1 kernel)": lambda: w @ w,
        "layer_norm module (1 kernel)": lambda: ln(w),
        "view (no kernel)": lambda: x.view(4, 4),
        "transpose (no kernel)": lambda: w.t(),
        "item (sync + memcpy)": lambda: x[0].item(),
        "cpu add (host tensors)": lambda: torch.ones(4) + 1,
    }
    results = {}
    for name, fn in cases.items():
        runs = per_op_us(fn, 500 if "item" in name else N_OPS)
        results[name] = {"median_us": statistics.median(runs), "min_us": min(runs), "max_us": max(runs), "runs_us": runs}
        print(f"{name:32s} median {statistics.median(runs):7.2f} us  (min {min(runs):.2f}, max {max(runs):.2f})")
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
            "command": "PYTHONPATH=src python3 scripts/host_microbench.py --out $OUT/host_microbench.json"}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
