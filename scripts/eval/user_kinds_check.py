"""The user-pattern probe's cases (sparse COO matmuls, a TorchScript chain, torch.save) captured and predicted here.

    python3 scripts/eval/user_kinds_check.py validation/h100/user_kinds_dec08/user_kinds_probe.json [--gpu h100-sxm]
        [--json out.json]

Each case of scripts/device/probe_user_kinds.py is rebuilt on fake CUDA tensors with the same sizes, captured, and
predicted on the probe's GPU (`--gpu`, default the H100 the probe ran on): work items and GPU time against the sum
of the profiled work items' durations (not the event time, which holds the host's launch gaps); for torch.save, the
predicted step time of the call against the measured ms between a synchronize before and after (median of the
probe's repeats). Prints one line per case and, per case kind, the items that match and the median |error|.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys

import kernelcast  # noqa: F401  (before torch: fake CUDA for a CPU build)
import torch

from kernelcast.capture import capture


def _adjacency(nodes: int, edges: int) -> torch.Tensor:
    ids = torch.randint(0, nodes, (2, edges), device="cuda")
    return torch.sparse_coo_tensor(ids, torch.rand(edges, device="cuda"), (nodes, nodes)).coalesce()


class _Chain(torch.nn.Module):
    def forward(self, x):
        for _ in range(3):
            x = torch.sigmoid(x) * 2.0 + 1.0
        return x


def _setup(case: dict):
    """The step of one probe case, built as probe_user_kinds.py builds it (objects made before the step)."""
    name = case["case"]
    if name.startswith("spmm"):
        adj = _adjacency(case["nodes"], case["edges"])
        if name == "spmm_forward":
            x = torch.randn(case["nodes"], case["features"], device="cuda")
            return lambda: torch.sparse.mm(adj, x)
        x = torch.randn(case["nodes"], case["features"], device="cuda", requires_grad=True)
        return lambda: torch.sparse.mm(adj, x).sum().backward()
    width, depth = case["width"], case["depth"]
    if name == "scripted_chain":
        model = torch.jit.script(torch.nn.Sequential(*[
            torch.nn.Sequential(torch.nn.Linear(width, width), _Chain()) for _ in range(depth)])).cuda()
        x = torch.randn(64, width, device="cuda")
        return lambda: model(x)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)]).cuda()
    return lambda: torch.save(model.state_dict(), io.BytesIO())


def check(case: dict, gpu: str) -> dict:
    with capture(gpu) as cap:
        with cap.paused():
            torch.manual_seed(0)
            run = _setup(case)
        run()
    pred = cap.predict(gpu)
    row = {k: case[k] for k in case if k not in ("kernels", "blocking", "us", "host_ms_range")}
    row.update(predicted_items=pred.kernels, measured_items=case["work_items"])
    if "host_ms" in case:  # torch.save: the call's time between synchronizes, what the user waits for
        row.update(predicted=round(pred.step_time_us / 1000, 3), measured=case["host_ms"], unit="call ms")
    else:
        row.update(predicted=round(pred.gpu_time_us, 2), measured=round(sum(k[1] for k in case["kernels"]), 2),
                   unit="GPU us")
    row["error"] = round(row["predicted"] / row["measured"] - 1, 3) if row["measured"] else None
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe")
    parser.add_argument("--gpu", default="h100-sxm")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    probe = json.load(open(args.probe))
    rows = [check(c, args.gpu) for c in probe["cases"] if "error" not in c]
    for r in rows:
        size = ", ".join(f"{k}={r[k]}" for k in ("nodes", "edges", "features", "width", "depth") if k in r)
        err = f"{100 * r['error']:+6.1f}%" if r["error"] is not None else "     -"
        print(f"{r['case']:22s} {size:40s} items {r['predicted_items']:3d} vs {r['measured_items']:3d}   "
              f"{r['unit']} {r['predicted']:9.2f} vs {r['measured']:9.2f} {err}")
    summary = {}
    for name in sorted({r["case"] for r in rows}):
        mine = [r for r in rows if r["case"] == name]
        errs = [abs(r["error"]) for r in mine if r["error"] is not None]
        exact = sum(r["predicted_items"] == r["measured_items"] for r in mine)
        summary[name] = {"cases": len(mine), "items_exact": exact,
                         "median_error": round(statistics.median(errs), 3) if errs else None}
        print(f"  {name:22s} items exact {summary[name]['items_exact']}/{len(mine)}; |error| median "
              f"{100 * (summary[name]['median_error'] or 0):.1f}% ({mine[0]['unit']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": f"python3 scripts/eval/user_kinds_check.py {args.probe} --gpu {args.gpu} --json "
                       + args.json, "probe_device": probe["device"], "summary": summary, "cases": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
