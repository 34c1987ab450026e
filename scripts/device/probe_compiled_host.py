"""Host time of torch.compile'd calls against what their generated code does (device probe).

A compiled call's host side is Dynamo's guard checks on its inputs, AOTAutograd's runtime wrapper, and the
generated wrapper: allocations and tensor reinterpretations (C++ helpers on CUDA), extern kernel calls
(cuBLAS through aten) and Triton launches (the launcher's Python); under mode="reduce-overhead" the graph
replay instead, after copying inputs that are not static into the graph's buffers. These cases vary one of
those counts at a time, with kernels too small to fill the GPU queue, so each call's time is its host side:

- mm_relu_chain k: k cuBLAS mm calls, k Triton kernels (relu), k + 1 inputs;
- sum_inputs n: one Triton kernel reading n inputs;
- many_outputs k: one Triton kernel writing k outputs (k allocations);
- mlp_module k: an nn.Module of k Linear(64, 64) + ReLU layers, called compiled as a model is: Dynamo guards
  on the module and its 2k parameters, which become the graph's inputs (the plain functions above lack them,
  and units fitted on those alone had priced compiled module calls too fast: docs/accuracy.md, 2026-12-04);
- graph_breaks k: k + 1 graphs of one Triton kernel each, split by torch._dynamo.graph_break() (Dynamo's resume
  functions between them);
- encoder_layers k: k nn.TransformerEncoderLayer(64, 4) forwards (batch 4 x 32 tokens): the extern GEMMs,
  attention and many-argument fused kernels a transformer's compiled forward runs;
- mlp_backward k: the mlp_module forward, a sum and its backward (autograd runs the compiled backward graph).
  One eager call comes first (EAGER_FIRST), so the parameters' .grad exist before compiling: otherwise the
  compiled backward creates them and, under reduce-overhead, cudagraph trees refuse the next call ("accessing
  tensor output of CUDAGraphs that has been overwritten"), which kept the case's reduce-overhead rows out of the
  runs of 2026-12-06 (compile_measure.py retries a zoo step the same way: eager_first_step);
- mlp_backward_none k: the same with every .grad set to None before each call, as `optimizer.zero_grad()` leaves
  them in a training loop: autograd's AccumulateGrad then keeps the backward's gradients instead of launching an
  add_ per parameter, which tells the backward's own host cost from the accumulation's (added 2026-12-07);
each eager, compiled (default) and compiled (reduce-overhead). The last three were added on 2026-12-06: the compiled
zoo's default-mode steps spent 20-80 µs of host time per kernel, the first four cases 15-20 (which cases the fit
takes: scripts/fit/fit_compiled_host.py). Per case: the CPU time of the calling
thread per call (median of REPEATS loops of CALLS calls, no synchronization inside a loop) and the wall time, with
the host's CPU benchmarks. scripts/fit/fit_compiled_host.py captures the same cases here and fits per-unit costs.

    PYTHONPATH=src python3 scripts/device/probe_compiled_host.py --out $OUT/compiled_host.json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import operator
import statistics
import sys
import time

import torch

CALLS = 200
REPEATS = 5
WARMUP = 5
MODES = ("eager", "default", "reduce-overhead")
CASES = [("mm_relu_chain", k) for k in (1, 4, 16, 32)] + [("sum_inputs", n) for n in (1, 8, 32, 128)] + \
        [("many_outputs", k) for k in (1, 8, 32)] + [("mlp_module", k) for k in (1, 4, 16, 32)] + \
        [("graph_breaks", k) for k in (1, 4, 16)] + [("encoder_layers", k) for k in (1, 4)] + \
        [("mlp_backward", k) for k in (1, 4, 16)] + [("mlp_backward_none", k) for k in (1, 4, 16)]
# cases called once eagerly before compiling (the docstring says why)
EAGER_FIRST = ("mlp_backward", "mlp_backward_none")


def _mm_relu_chain(x, *weights):
    for w in weights:
        x = torch.relu(x @ w)
    return x


def _sum_inputs(*xs):
    return functools.reduce(operator.add, xs) * 0.5


def _many_outputs(k: int):
    def outputs(x):
        return tuple(x + float(i) for i in range(k))

    return outputs


def _graph_breaks(k: int):
    def breaks(x):
        for _ in range(k):
            x = torch.relu(x) + 1.0
            torch._dynamo.graph_break()
        return x * 0.5

    return breaks


def _mlp_backward(model: torch.nn.Module, grads_to_none: bool = False):
    def step(x):
        with torch.enable_grad():
            model(x).sum().backward()

    # called before each compiled call, outside it (probe), so Dynamo traces no part of it
    step.before_call = (lambda: model.zero_grad(set_to_none=True)) if grads_to_none else None
    return step


def case(name: str, size: int, device: str = "cuda"):
    """(function, args) of one probe case; `device` "cuda" on the GPU, any for a capture."""
    if name == "mm_relu_chain":
        return _mm_relu_chain, (torch.randn(64, 64, device=device), *[torch.randn(64, 64, device=device)
                                                                      for _ in range(size)])
    if name == "sum_inputs":
        return _sum_inputs, tuple(torch.randn(256, device=device) for _ in range(size))
    if name == "many_outputs":
        return _many_outputs(size), (torch.randn(256, device=device),)
    if name in ("mlp_module", "mlp_backward", "mlp_backward_none"):
        layers = [m for _ in range(size) for m in (torch.nn.Linear(64, 64), torch.nn.ReLU())]
        model = torch.nn.Sequential(*layers).to(device)
        fn = model if name == "mlp_module" else _mlp_backward(model, grads_to_none=name == "mlp_backward_none")
        return fn, (torch.randn(64, 64, device=device),)
    if name == "graph_breaks":
        return _graph_breaks(size), (torch.randn(256, device=device),)
    if name == "encoder_layers":
        layers = [torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
                  for _ in range(size)]
        return torch.nn.Sequential(*layers).to(device).eval(), (torch.randn(4, 32, 64, device=device),)
    raise ValueError(name)


def host_per_call(call) -> tuple[float, float]:
    """(CPU µs of this thread, wall µs) per call: medians over REPEATS loops of CALLS calls."""
    from kernelcast.capture.cpu_speed import thread_cpu_ns

    cpu, wall = [], []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        c0, w0 = thread_cpu_ns(), time.perf_counter_ns()
        for _ in range(CALLS):
            call()
        cpu.append((thread_cpu_ns() - c0) / 1e3 / CALLS)
        wall.append((time.perf_counter_ns() - w0) / 1e3 / CALLS)
        torch.cuda.synchronize()
    return statistics.median(cpu), statistics.median(wall)


def probe(name: str, size: int, mode: str) -> dict:
    torch._dynamo.reset()
    fn, args = case(name, size)
    if name in EAGER_FIRST:
        fn(*args)
    step = fn if mode == "eager" else torch.compile(fn, mode=mode)
    before = getattr(fn, "before_call", None)

    def call():
        if before is not None:
            before()
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        return step(*args)

    with torch.no_grad():
        for _ in range(WARMUP):
            call()
        cpu_us, wall_us = host_per_call(call)
    return {"case": name, "size": size, "mode": mode, "cpu_us": round(cpu_us, 3), "wall_us": round(wall_us, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*", help="case names to run (all by default)")
    parser.add_argument("--sizes", nargs="*", type=int, help="these sizes of each case (the case's own by default)")
    parser.add_argument("--modes", nargs="*", choices=MODES, default=MODES)
    args = parser.parse_args()
    from kernelcast.capture.cpu_speed import measure_cpu_bench

    doc = {"command": "PYTHONPATH=src python3 scripts/device/probe_compiled_host.py " + " ".join(sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "device": torch.cuda.get_device_name(),
           "calls": CALLS, "repeats": REPEATS, "cpu_bench": dataclasses.asdict(measure_cpu_bench()), "rows": []}
    rows = doc["rows"]
    names = dict.fromkeys(name for name, _ in CASES)
    cases = ([(n, k) for n in names for k in args.sizes] if args.sizes else CASES)
    for name, size in cases:
        if args.only and name not in args.only:
            continue
        for mode in args.modes:
            try:
                rows.append(probe(name, size, mode))
            except Exception as exc:  # one case failing keeps the rest
                rows.append({"case": name, "size": size, "mode": mode, "error": f"{type(exc).__name__}: {exc}"[:300]})
            print(json.dumps(rows[-1]), flush=True)
            with open(args.out, "w") as f:  # after every row: a run cut off at its time limit keeps what it measured
                json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
