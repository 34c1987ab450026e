"""Sparse COO gradients on the GPU: the kernels each sparse op launches, and their times, over sizes.

    PYTHONPATH=src python3 scripts/device/probe_sparse.py --out $OUT/sparse_probe.json

What nn.Embedding / nn.EmbeddingBag(sparse=True) and the optimizers that take their gradients run
(torch/optim/sgd.py, adagrad.py, _functional.py sparse_adam): the sparse backward of each module, coalesce,
dense += sparse (coalesced and not), dense.sparse_mask(sparse), and a whole AccumulateGrad of a sparse
gradient. Per case, after warm-up, one call under torch.profiler gives each GPU work item (name, µs) and
whether the host blocked (a cudaMemcpy / synchronize runtime call); CUDA events around REPEATS calls give the
median µs per call (kernelcast.measure's event timer). No capture code runs: the probe checks the capture's
rules, it does not use them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from kernelcast.measure import back_to_back_ms

WARMUP = 3
REPEATS = 20
BLOCKING_RUNTIME_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy", "cudaMemcpyAsync")
ROWS = 200_000


def _uncoalesced(nnz: int, dim: int, rows: int = ROWS) -> torch.Tensor:
    ids = torch.randint(0, rows, (1, nnz), device="cuda")
    return torch.sparse_coo_tensor(ids, torch.randn(nnz, dim, device="cuda"), (rows, dim))


def _backward(table: torch.nn.Module, out: torch.Tensor):
    """The table's sparse backward alone, from a graph built outside the timed call."""
    grad = torch.randn_like(out)

    def run():
        table.weight.grad = None
        torch.autograd.backward(out, grad, retain_graph=True)
    return run


def _cases():
    """(name, parameters, set-up returning the callable to time)."""
    for nnz in (1, 100, 4096, 32768, 262144, 1_048_576):
        for dim in (16, 128):
            params = {"nnz": nnz, "dim": dim, "rows": ROWS}

            def coalesce(nnz=nnz, dim=dim):
                s = _uncoalesced(nnz, dim)
                return lambda: s.coalesce()

            def add_uncoalesced(nnz=nnz, dim=dim):
                s, dense = _uncoalesced(nnz, dim), torch.zeros(ROWS, dim, device="cuda")
                return lambda: dense.add_(s, alpha=-0.1)

            def add_coalesced(nnz=nnz, dim=dim):
                s, dense = _uncoalesced(nnz, dim).coalesce(), torch.zeros(ROWS, dim, device="cuda")
                return lambda: dense.add_(s, alpha=-0.1)

            def add_out_of_place(nnz=nnz, dim=dim):
                s, dense = _uncoalesced(nnz, dim), torch.zeros(ROWS, dim, device="cuda")
                return lambda: torch.add(dense, s)

            def sparse_mask(nnz=nnz, dim=dim):
                s, dense = _uncoalesced(nnz, dim).coalesce(), torch.randn(ROWS, dim, device="cuda")
                return lambda: dense.sparse_mask(s)

            def sparse_clone(nnz=nnz, dim=dim):
                s = _uncoalesced(nnz, dim)
                return lambda: s.clone()

            for fn in (coalesce, add_uncoalesced, add_coalesced, add_out_of_place, sparse_mask, sparse_clone):
                yield fn.__name__, params, fn
    for batch, bag, mode in ((1024, 16, "sum"), (2048, 24, "mean"), (256, 4, "sum"), (4096, 40, "mean")):
        params = {"batch": batch, "bag": bag, "mode": mode, "dim": 64, "rows": ROWS}

        def bag_backward(batch=batch, bag=bag, mode=mode):
            table = torch.nn.EmbeddingBag(ROWS, 64, mode=mode, sparse=True).cuda()
            ids = torch.randint(0, ROWS, (batch * bag,), device="cuda")
            offsets = torch.arange(0, batch * bag, bag, device="cuda")
            return _backward(table, table(ids, offsets))

        yield "embedding_bag_sparse_backward", params, bag_backward
    for tokens in (4096, 32768):
        params = {"tokens": tokens, "dim": 128, "rows": ROWS}

        def embedding_backward(tokens=tokens):
            table = torch.nn.Embedding(ROWS, 128, sparse=True).cuda()
            return _backward(table, table(torch.randint(0, ROWS, (tokens,), device="cuda")))

        yield "embedding_sparse_backward", params, embedding_backward


def _events_us(fn) -> float:
    """Median µs of REPEATS calls, each between two CUDA events."""
    return statistics.median(back_to_back_ms(fn, steps=1, repeats=REPEATS)) * 1000.0


def _profile(fn) -> tuple[list, list]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels, blocking = [], []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not getattr(e, "is_user_annotation", False):
            kernels.append([e.name[:160], round(e.device_time, 3)])
        elif e.name in BLOCKING_RUNTIME_CALLS:
            blocking.append(e.name)
    return kernels, blocking


def profile_cases(cases, warmup: int) -> list[dict]:
    """One row per (name, parameters, set-up) case: after `warmup` calls, one profiled call's work items and
    blocking runtime calls, and the median µs of REPEATS calls between CUDA events; a case that fails is reported
    with its error, the others still run."""
    rows = []
    for name, params, setup in cases:
        try:
            fn = setup()
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize()
            kernels, blocking = _profile(fn)
            rows.append({"case": name, **params, "us": round(_events_us(fn), 3), "work_items": len(kernels),
                         "kernels": kernels, "blocking": blocking})
            print(f"{name:32s} {json.dumps(params):70s} {len(kernels):3d} items {rows[-1]['us']:9.2f} us",
                  flush=True)
        except Exception as exc:  # a case that fails is reported, the others still run
            rows.append({"case": name, **params, "error": f"{type(exc).__name__}: {exc}"[:300]})
            print(f"{name} {params} failed: {exc}", file=sys.stderr)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    rows = profile_cases(_cases(), WARMUP)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "command": "PYTHONPATH=src python3 scripts/device/probe_sparse.py --out $OUT/sparse_probe.json", "cases": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
