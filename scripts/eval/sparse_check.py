"""The sparse ops of the H200 probe, captured and predicted here: work items and GPU time per case.

    python3 scripts/eval/sparse_check.py validation/probes/sparse_probe.json [--json out.json]

Each probe case (scripts/device/probe_sparse.py: coalesce, dense += sparse coalesced or not, dense + sparse,
sparse_mask, clone, the sparse backward of nn.EmbeddingBag and nn.Embedding) is rebuilt on fake CUDA tensors
with the same sizes, captured, and predicted on the H200; the measured side is the sum of the profiled work
items' durations (not the event time, which holds the host's launch gaps). Prints one line per case and the
median and worst |error| per op.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import kernelcast  # noqa: F401  (before torch: fake CUDA for a CPU build)
import torch

from kernelcast.capture import capture


def _sparse(nnz: int, dim: int, rows: int, coalesced: bool = False) -> torch.Tensor:
    ids = torch.randint(0, rows, (1, nnz), device="cuda")
    s = torch.sparse_coo_tensor(ids, torch.randn(nnz, dim, device="cuda"), (rows, dim))
    return s.coalesce() if coalesced else s


def _setup(case: dict):
    """(objects made before the step, the step) for one probe case."""
    name, rows = case["case"], case["rows"]
    if name in ("coalesce", "add_uncoalesced", "add_coalesced", "add_out_of_place", "sparse_mask", "sparse_clone"):
        nnz, dim = case["nnz"], case["dim"]
        s = _sparse(nnz, dim, rows, coalesced=name in ("add_coalesced", "sparse_mask"))
        dense = torch.zeros(rows, dim, device="cuda")
        return {"coalesce": lambda: s.coalesce(), "add_uncoalesced": lambda: dense.add_(s, alpha=-0.1),
                "add_coalesced": lambda: dense.add_(s, alpha=-0.1), "add_out_of_place": lambda: torch.add(dense, s),
                "sparse_mask": lambda: dense.sparse_mask(s), "sparse_clone": lambda: s.clone()}[name]
    if name == "embedding_bag_sparse_backward":
        table = torch.nn.EmbeddingBag(rows, case["dim"], mode=case["mode"], sparse=True).cuda()
        ids = torch.randint(0, rows, (case["batch"] * case["bag"],), device="cuda")
        offsets = torch.arange(0, case["batch"] * case["bag"], case["bag"], device="cuda")
        out = table(ids, offsets)
    else:
        table = torch.nn.Embedding(rows, case["dim"], sparse=True).cuda()
        out = table(torch.randint(0, rows, (case["tokens"],), device="cuda"))
    grad = torch.randn_like(out)
    return lambda: torch.autograd.backward(out, grad)


def check(case: dict) -> dict:
    with capture("h200") as cap:
        with cap.paused():
            torch.manual_seed(0)
            run = _setup(case)
        run()
    pred = cap.predict("h200")
    measured_us = sum(k[1] for k in case["kernels"])
    row = {k: case[k] for k in case if k not in ("kernels", "blocking", "us")}
    row.update(predicted_items=pred.kernels, measured_items=case["work_items"],
               predicted_us=round(pred.gpu_time_us, 2), measured_us=round(measured_us, 2))
    row["error"] = round((pred.gpu_time_us - measured_us) / measured_us, 3) if measured_us else None
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    probe = json.load(open(args.probe))
    rows = [check(c) for c in probe["cases"] if "error" not in c]
    for r in rows:
        size = ", ".join(f"{k}={r[k]}" for k in ("nnz", "dim", "batch", "bag", "mode", "tokens") if k in r)
        err = f"{100 * r['error']:+6.1f}%" if r["error"] is not None else "     -"
        print(f"{r['case']:30s} {size:34s} items {r['predicted_items']:3d} vs {r['measured_items']:3d}   "
              f"GPU {r['predicted_us']:8.1f} vs {r['measured_us']:8.1f} us {err}")
    summary = {}
    for name in sorted({r["case"] for r in rows}):
        errs = [abs(r["error"]) for r in rows if r["case"] == name and r["error"] is not None]
        items = sum(r["predicted_items"] == r["measured_items"] for r in rows if r["case"] == name)
        total = sum(r["case"] == name for r in rows)
        summary[name] = {"cases": total, "items_exact": items,
                         "median_error": round(statistics.median(errs), 3) if errs else None,
                         "worst_error": round(max(errs), 3) if errs else None}
        print(f"  {name:30s} items exact {items}/{total}; GPU |error| median "
              f"{100 * summary[name]['median_error']:.1f}% worst {100 * summary[name]['worst_error']:.1f}%"
              if errs else f"  {name:30s} items exact {items}/{total}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "python3 scripts/eval/sparse_check.py validation/probes/sparse_probe.json --json "
                       + args.json, "summary": summary, "cases": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
