"""What CUDA runs for three user patterns the capture learned in the twenty-second session (issue 31).

    PYTHONPATH=src python3 scripts/device/probe_user_kinds.py --out $OUT/user_kinds_probe.json

- torch.sparse.mm of a coalesced COO matrix and a dense one (a GCN layer's `adj @ x`), forward alone and forward
  plus the dense operand's backward (SparseCUDATensorMath.cu s_addmm_out_sparse_dense_cuda, cuSPARSE SpMM), over
  graph sizes from Cora's (2708 nodes, 10556 edges) up;
- torch.save of a model's state_dict to an in-memory buffer (torch/serialization.py: one blocking device-to-host
  copy per storage), host ms per call;
- a torch.jit.script'ed module of an elementwise chain after its profiling runs: whether TorchScript's NNC fuser
  joined the chain (kernels per call).

Per case, after warm-up, one call under torch.profiler gives each GPU work item (name, µs) and the blocking runtime
calls; CUDA events around REPEATS calls give the median µs per call; torch.save is timed on the host with a
synchronize before and after, median of REPEATS. No capture code runs.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys

import torch

from probe_sparse import REPEATS, _profile, profile_cases  # sibling scripts (this folder is on sys.path)
from probe_torch_save import host_ms_summary

WARMUP = 5
# (nodes, edges, features): Cora, a mid-size graph, a large one
GRAPHS = ((2708, 10556, 16), (2708, 10556, 256), (20000, 200000, 64), (100000, 2000000, 128))


def _adjacency(nodes: int, edges: int) -> torch.Tensor:
    ids = torch.randint(0, nodes, (2, edges), device="cuda")
    return torch.sparse_coo_tensor(ids, torch.rand(edges, device="cuda"), (nodes, nodes)).coalesce()


def _cases():
    for nodes, edges, feats in GRAPHS:
        params = {"nodes": nodes, "edges": edges, "features": feats}

        def spmm_forward(nodes=nodes, edges=edges, feats=feats):
            adj, x = _adjacency(nodes, edges), torch.randn(nodes, feats, device="cuda")
            return lambda: torch.sparse.mm(adj, x)

        def spmm_train(nodes=nodes, edges=edges, feats=feats):
            adj = _adjacency(nodes, edges)
            x = torch.randn(nodes, feats, device="cuda", requires_grad=True)
            return lambda: torch.sparse.mm(adj, x).sum().backward()

        yield "spmm_forward", params, spmm_forward
        yield "spmm_train", params, spmm_train
    for width, depth in ((256, 4), (1024, 8)):
        params = {"width": width, "depth": depth}

        def scripted_chain(width=width, depth=depth):
            class Chain(torch.nn.Module):
                def forward(self, x):
                    for _ in range(3):
                        x = torch.sigmoid(x) * 2.0 + 1.0
                    return x
            model = torch.jit.script(torch.nn.Sequential(*[
                torch.nn.Sequential(torch.nn.Linear(width, width), Chain()) for _ in range(depth)])).cuda()
            x = torch.randn(64, width, device="cuda")
            return lambda: model(x)

        yield "scripted_chain", params, scripted_chain


def _host_side(fn) -> dict:
    """The host's time to issue one call (a synchronize before, none after: no GPU wait in it; median of REPEATS
    after warm-up), and the CPU time of each aten op the call ran, µs (torch.profiler's self CPU time, one call)."""
    import time

    from torch.profiler import ProfilerActivity, profile

    for _ in range(WARMUP):
        fn()
    issue = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        issue.append((time.perf_counter() - start) * 1e6)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    cpu = {e.key: round(e.self_cpu_time_total, 1) for e in prof.key_averages() if e.self_cpu_time_total > 0}
    return {"host_issue_us": round(statistics.median(issue), 1), "host_issue_us_range": [round(min(issue), 1),
            round(max(issue), 1)], "cpu_self_us": cpu}


def _save_cases():
    for width, depth in ((256, 4), (1024, 12)):
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)]).cuda()
        nbytes = sum(t.untyped_storage().nbytes() for t in model.state_dict().values())
        yield {"width": width, "depth": depth, "storages": 2 * depth, "bytes": nbytes}, model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    rows = profile_cases(_cases(), WARMUP)
    for row, (_, _, setup) in zip(rows, _cases()):
        if row["case"] == "spmm_forward" and "error" not in row:  # where the host time of sparse.mm goes
            row.update(_host_side(setup()))
    for params, model in _save_cases():
        def save(model=model):
            torch.save(model.state_dict(), io.BytesIO())
        timed = host_ms_summary(save, WARMUP, REPEATS)
        kernels, blocking = _profile(save)
        rows.append({"case": "torch_save_state_dict", **params, **timed, "work_items": len(kernels),
                     "kernels": kernels, "blocking": len(blocking)})
        print(f"torch_save       {json.dumps(params):60s} {len(kernels):3d} items {rows[-1]['host_ms']:9.3f} ms",
              flush=True)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "command": "PYTHONPATH=src python3 scripts/device/probe_user_kinds.py --out $OUT/user_kinds_probe.json",
           "cases": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
