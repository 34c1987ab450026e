"""Device probe: GPU work items per cuDNN RNN call, swept over the factors the launch rule depends on.

    PYTHONPATH=src python3 scripts/device/probe_rnn.py --out $OUT/probe_rnn.json

For each configuration (mode, hidden size, layers, directions, sequence length, batch, dtype, packed or not,
training or not, dropout) it builds the nn.RNN/LSTM/GRU on CUDA, runs WARMUP steps, then profiles one step and
counts the work items (kernels, memsets, memcpys) under `_cudnn_rnn` (forward) and `_cudnn_rnn_backward`
(training), with their kernel names; its output is compared with costs/rnn.py's rule off the device.

What it settles (costs/rnn.py stated each as an assumption from the zoo's six RNN workloads; run on the
H200 as validation/probes/probe_rnn.json, the launch rule and scripts/fit/fit_rnn_times.py's time fit now follow it):
- the wavefront chunk of a unidirectional multi-layer stack (16 steps at T=128, H=512, B=32): does it stay 16
  across T, H, B, or is it T/8, or something else;
- GRU and RNN_TANH/RELU backward launches per step (only LSTM was measured);
- persistent algorithms (small-h and PERSIST_STATIC) for several layers and directions;
- packed sequences: hidden-state copies at batch-size changes for unidirectional and multi-layer packs;
- dropout between layers (kernels per layer output and chunk);
- the 2 memsets before layer 1's input GEMMs of the bidirectional GRU.
Needs a CUDA GPU; nothing here runs on CPU.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import torch
import torch.nn as nn

from kernelcast.measure import attribute

WARMUP = 2
MODES = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn_tanh": nn.RNN}


def configs() -> list[dict]:
    """The sweep: one factor at a time around a base point, then a few crossings."""
    base = dict(mode="lstm", hidden=512, layers=2, bidirectional=False, steps=128, batch=32, input=256,
                dtype="float32", packed=False, train=True, dropout=0.0)
    out = [base]
    for key, values in {"steps": [8, 16, 17, 32, 48, 64, 100, 256, 512], "hidden": [128, 192, 256, 384, 1024],
                        "layers": [1, 3, 4], "batch": [1, 8, 16, 64, 128], "bidirectional": [True],
                        "mode": ["gru", "rnn_tanh"], "dtype": ["float16", "bfloat16"], "packed": [True],
                        "train": [False], "dropout": [0.2]}.items():
        out += [{**base, key: v} for v in values]
    for mode, layers, bidirectional, packed in itertools.product(MODES, (1, 2), (False, True), (False, True)):
        out.append({**base, "mode": mode, "layers": layers, "bidirectional": bidirectional, "packed": packed,
                    "hidden": 256, "steps": 64})
    for mode, hidden in itertools.product(MODES, (64, 128, 192, 256)):  # the small-h thresholds
        out.append({**base, "mode": mode, "hidden": hidden, "layers": 1})
    return out


def build(c: dict):
    dtype = getattr(torch, c["dtype"])
    rnn = MODES[c["mode"]](c["input"], c["hidden"], num_layers=c["layers"], bidirectional=c["bidirectional"],
                           dropout=c["dropout"], batch_first=True).cuda().to(dtype)
    rnn.train(c["train"])
    x = torch.randn(c["batch"], c["steps"], c["input"], device="cuda", dtype=dtype, requires_grad=c["train"])
    lengths = torch.linspace(c["steps"], max(c["steps"] // 4, 1), c["batch"]).long()  # sorted, on the host

    def step():
        inp = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True) if c["packed"] else x
        with torch.set_grad_enabled(c["train"]):
            out = rnn(inp)[0]
            data = out.data if c["packed"] else out
            if c["train"]:
                data.float().square().mean().backward()

    return step


def count(step) -> dict:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels, _ = attribute(prof.events(), {"_cudnn_rnn", "_cudnn_rnn_backward"})
    out: dict = {"forward": [], "backward": []}
    for k in kernels:
        if "_cudnn_rnn_backward" in k.chain:
            out["backward"].append(k)
        elif "_cudnn_rnn" in k.chain:
            out["forward"].append(k)

    def by_name(ks) -> dict:  # kernel name -> [count, total µs]: per-step kernel times for the time model
        table: dict = {}
        for k in ks:
            entry = table.setdefault(k.name[:90], [0, 0.0])
            entry[0] += 1
            entry[1] = round(entry[1] + k.duration_us, 3)
        return table

    return {"forward_items": len(out["forward"]), "backward_items": len(out["backward"]),
            "forward_us": round(sum(k.duration_us for k in out["forward"]), 3),
            "backward_us": round(sum(k.duration_us for k in out["backward"]), 3),
            "forward_kernels": by_name(out["forward"]), "backward_kernels": by_name(out["backward"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("probe_rnn.py needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = []
    for c in configs():
        try:
            rows.append({"config": c, **count(build(c))})
        except RuntimeError as exc:  # a configuration cuDNN refuses is a result too
            rows.append({"config": c, "error": str(exc)[:300]})
        print(json.dumps(rows[-1])[:200], flush=True)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
