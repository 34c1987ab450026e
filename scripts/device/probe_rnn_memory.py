"""Device probe: the device memory cuDNN's RNN calls take from PyTorch's caching allocator.

    PYTHONPATH=src python3 scripts/device/probe_rnn_memory.py --out $OUT/probe_rnn_memory.json
    PYTHONPATH=src python3 scripts/device/probe_rnn_memory.py --deep --out $OUT/probe_rnn_memory_deep.json

`_cudnn_rnn` (aten/src/ATen/native/cudnn/RNN.cpp) allocates, besides its outputs (output, hy, cy), a workspace
of the size cudnnGetRNNTempSpaceSizes asks for (freed when the call returns) and, in training, a reserve space
(returned, and kept by autograd until the backward has run); `_cudnn_rnn_backward` allocates a workspace of its
own. The sizes come from cuDNN, not from PyTorch's code, and torch's meta kernel gives the reserve 0 bytes, so
they are measured here, per configuration of probe_rnn.py's sweep plus a seeded sample of a wider grid: every
allocation and free the caching allocator records inside the forward call and inside the backward call
(torch.cuda.memory._record_memory_history), with the sizes of the call's known outputs.

Needs a CUDA GPU; nothing here runs on CPU.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

import torch

SCRIPTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(SCRIPTS / d) for d in ("device", "fit", "eval")]  # sibling scripts
from probe_rnn import MODES, configs  # noqa: E402

WARMUP = 2
SAMPLE = 80  # configurations drawn from WIDE_GRID besides probe_rnn's sweep
WIDE_GRID = {"mode": list(MODES), "hidden": [64, 128, 256, 512, 1024], "layers": [1, 2, 3],
             "bidirectional": [False, True], "steps": [8, 32, 128, 512], "batch": [1, 8, 32, 128],
             "input": [32, 256, 1024], "dtype": ["float32", "bfloat16", "float16"], "train": [False, True]}
SEED = 20261201
# --deep: stacks of 4-8 layers, which the sweep and WIDE_GRID (1-3 layers) never reached: our whole-model LSTM and
# GRU programs of 6 layers (benchmarks/whole_models) measured their peak 10-19% over the fitted workspace's.
DEEP_GRID = {**WIDE_GRID, "layers": [4, 6, 8], "batch": [1, 10, 32], "steps": [32, 128, 512]}
DEEP_SAMPLE = 40


def wide_sample(grid_axes: dict = WIDE_GRID, sample: int = SAMPLE) -> list[dict]:
    rng = random.Random(SEED)
    grid = list(itertools.product(*grid_axes.values()))
    return [{**dict(zip(grid_axes, values)), "packed": False, "dropout": 0.0} for values in rng.sample(grid, sample)]


def events(call) -> list[list]:
    """[action, bytes] of every allocator event of device 0 inside call(), in order (alloc, free_requested,
    free_completed, segment_alloc, ...)."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100000, context=None, stacks="python")
    try:
        result = call()
        torch.cuda.synchronize()
        trace = torch.cuda.memory._snapshot()["device_traces"][0]
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return [[e["action"], e["size"]] for e in trace], result


def measure(c: dict) -> dict:
    dtype = getattr(torch, c["dtype"])
    rnn = MODES[c["mode"]](c["input"], c["hidden"], num_layers=c["layers"], bidirectional=c["bidirectional"],
                           dropout=c["dropout"], batch_first=True).cuda().to(dtype)
    rnn.flatten_parameters()  # .to(dtype) left the weights in separate storages: cuDNN would copy them each call
    rnn.train(c["train"])
    x = torch.randn(c["batch"], c["steps"], c["input"], device="cuda", dtype=dtype, requires_grad=c["train"])
    lengths = torch.linspace(c["steps"], max(c["steps"] // 4, 1), c["batch"]).long()

    def forward():
        inp = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True) if c["packed"] else x
        with torch.set_grad_enabled(c["train"]):
            return rnn(inp)

    for _ in range(WARMUP):
        out = forward()
        if c["train"]:
            data = out[0].data if c["packed"] else out[0]
            data.backward(torch.ones_like(data))
    del out
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    forward_events, out = events(forward)
    row = {"config": c, "forward_events": forward_events,
           "forward_peak_over_before": torch.cuda.max_memory_allocated() - before,
           "forward_kept": torch.cuda.memory_allocated() - before,
           "outputs": [t.untyped_storage().nbytes() for t in _tensors(out)]}
    if c["train"]:
        data = out[0].data if c["packed"] else out[0]
        grad = torch.ones_like(data)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        row["backward_events"], _ = events(lambda: data.backward(grad))
        row["backward_peak_over_before"] = torch.cuda.max_memory_allocated() - before
    return row


def _tensors(out) -> list[torch.Tensor]:
    flat = []
    for item in out if isinstance(out, tuple) else (out,):
        if isinstance(item, tuple):
            flat += _tensors(item)
        elif isinstance(item, torch.Tensor):
            flat.append(item)
        elif hasattr(item, "data"):  # a PackedSequence
            flat.append(item.data)
    return flat


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--deep", action="store_true", help="only DEEP_SAMPLE stacks of 4-8 layers (DEEP_GRID)")
    args = parser.parse_args()
    rows = []
    for c in (wide_sample(DEEP_GRID, DEEP_SAMPLE) if args.deep else configs() + wide_sample()):
        try:
            rows.append(measure(c))
        except Exception as exc:  # the failure is data too (an unsupported dtype or size)
            rows.append({"config": c, "error": f"{type(exc).__name__}: {exc}"[:300]})
        torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                          "cudnn": torch.backends.cudnn.version(), "rows": rows}) + "\n")
    print(f"{len(rows)} configurations, {sum('error' in r for r in rows)} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
