"""Work items and peak memory per op, kernelcast against PyTorch's own OpInfo samples as the device ran them.

    python3 scripts/eval/opinfo_items_check.py validation/probes/opinfo_items/opinfo_items_run1.json.gz [--gpu ID]
        [--json F] [--worst N] [--shard I/N]
    python3 scripts/eval/opinfo_items_check.py RUN --merge shard0.json shard1.json   (the shards' summary)

About 30 minutes on one core for the 2318 calls of one run: `--shard 0/2` and `--shard 1/2` in parallel.

Each call scripts/device/probe_opinfo_items.py measured (an OpInfo sample, forward under no_grad or forward and
backward) is rebuilt here from what the probe wrote down (the same shapes, strides and values), captured as the
probe called it (a warm-up call first, outside the capture's step), and predicted on the GPU it ran on. Compared:
the work items one call ran (kernels, memsets, copies), the rise of the allocator's peak over the call, and the sync
points (the device's copies to the host against the prediction's sync points). Printed:
the share right, and the OpInfos wrong, grouped, with what the device ran. Nothing is fitted to these samples;
they are torch's test inputs, chosen by nobody on this project.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
from pathlib import Path

import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)

import torch

from kernelcast.capture import capture
from kernelcast.devices import get_gpu
from kernelcast.predict import predict_capture

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "device"))
from probe_opinfo_items import call, leaves_of, op_db  # noqa: E402  (the probe's own call)

GPU_OF_DEVICE = {"H100": "h100-sxm", "H200": "h200"}
MEMORY_SLACK_BYTES = 0  # the allocator's blocks are counted exactly on both sides


class Rebuilt:
    """A SampleInput's three parts, as the probe's call() reads them."""

    def __init__(self, spec: dict) -> None:
        self.input, self.args, self.kwargs = spec["input"], spec["args"], spec["kwargs"]


def decode(value):
    """The inverse of probe_opinfo_items.encode, tensors made on the (fake) CUDA device where they were there."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "tensor" in value:
        t = value["tensor"]
        dtype = getattr(torch, t["dtype"])
        device = "cuda" if t["device"] == "cuda" else "cpu"
        flat = torch.tensor(t["storage"], dtype=dtype, device=device) if t["storage"] else torch.empty(
            0, dtype=dtype, device=device)
        out = flat.as_strided(t["shape"], t["stride"]) if t["storage"] else flat.reshape(t["shape"])
        if t["requires_grad"]:
            out = out.detach().requires_grad_()
        return out
    if "float" in value:
        return float(value["float"])
    if "dtype" in value:
        return getattr(torch, value["dtype"])
    if "memory_format" in value:
        return getattr(torch, value["memory_format"])
    if "device" in value:
        return torch.device(value["device"])
    if "tuple" in value:
        return tuple(decode(v) for v in value["tuple"])
    if "dict" in value:
        return {k: decode(v) for k, v in value["dict"].items()}
    return value


def predicted(opinfo, spec: dict, backward: bool, gpu: str) -> tuple[int, int, int]:
    """(work items, peak growth bytes, sync points) kernelcast predicts for one call of the sample, after a warm-up
    call."""
    with capture(gpu) as cap:
        with cap.paused():
            sample = Rebuilt(decode(spec))
            warm = call(opinfo, sample, backward)
            del warm
            for t in leaves_of(sample):  # as the probe does before it reads memory_allocated()
                t.grad = None
        out = call(opinfo, sample, backward)
        del out
    pred = predict_capture(cap.capture, gpu)
    memory = pred.memory
    return pred.kernels, (memory.peak_bytes - memory.resident_bytes) if memory else 0, pred.sync_points


def device_syncs(names: list[str]) -> int:
    """Copies to the host among a call's work items: each one a point where the host waits for the GPU (an
    `.item()`, a size read back, a check's boolean)."""
    return sum("DtoH" in n for n in names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a probe_opinfo_items.py output")
    parser.add_argument("--gpu", help="kernelcast's id of the GPU it ran on (default: from the run's device name)")
    parser.add_argument("--json", help="write every call's comparison here")
    parser.add_argument("--worst", type=int, default=40, help="OpInfos listed per kind of miss")
    parser.add_argument("--shard", default="0/1", help="I/N: only every N-th call from the I-th (to run in parallel; "
                                                       "--merge puts the --json files together)")
    parser.add_argument("--merge", nargs="*", help="print the summary of these --json files instead")
    args = parser.parse_args()
    with gzip.open(args.run, "rt") as f:
        doc = json.load(f)
    gpu = args.gpu or next((g for k, g in GPU_OF_DEVICE.items() if k in doc["device"]), None)
    if gpu is None:
        print(f"opinfo_items_check: name the GPU of {doc['device']!r} with --gpu", file=sys.stderr)
        return 2
    get_gpu(gpu)
    if args.merge:
        return _summary(doc, gpu, [r for f in args.merge for r in json.loads(Path(f).read_text())["results"]],
                        args.worst)
    shard, shards = (int(v) for v in args.shard.split("/"))
    by_name = {(f"{o.name}.{o.variant_test_name}" if o.variant_test_name else o.name): o for o in op_db()}
    results = []
    for row in doc["rows"][shard::shards]:
        opinfo = by_name.get(row["op"])
        if "error" in row or opinfo is None:
            results.append({**_key(row), "not_compared": "device error" if "error" in row else "no such OpInfo"})
            continue
        try:
            items, growth, syncs = predicted(opinfo, row["spec"], row["mode"] == "backward", gpu)
        except Exception as e:  # a sample the capture cannot run: counted, listed in --json
            results.append({**_key(row), "not_compared": "capture failed",
                            "capture_error": f"{type(e).__name__}: {e}"[:200]})
            continue
        results.append({**_key(row), "items": [row["work_items"], items],
                        "growth": [row["peak_growth_bytes"], growth], "syncs": [device_syncs(row["names"]), syncs],
                        "device_items": row["names"]})
    if args.json:
        Path(args.json).write_text(json.dumps({"run": args.run, "gpu": gpu, "results": results}, indent=1))
    return _summary(doc, gpu, results, args.worst)


def _summary(doc: dict, gpu: str, results: list[dict], worst: int) -> int:
    compared = [r for r in results if "items" in r]
    not_compared = collections.Counter(r["not_compared"] for r in results if "not_compared" in r)
    print(f"{doc['device']}, torch {doc['torch']}, predicted as {gpu}: {len(compared)} calls of "
          f"{len({r['op'] for r in compared})} OpInfos compared; not compared: {dict(not_compared)}")
    for mode in ("forward", "backward", None):
        rows = [r for r in compared if mode is None or r["mode"] == mode]
        if not rows:
            continue
        items_right = sum(r["items"][0] == r["items"][1] for r in rows)
        memory_right = sum(abs(r["growth"][0] - r["growth"][1]) <= MEMORY_SLACK_BYTES for r in rows)
        syncs_right = sum(r["syncs"][0] == r["syncs"][1] for r in rows)
        print(f"  {mode or 'all':9s} {len(rows):5d} calls: work items right {items_right / len(rows):6.1%}, "
              f"peak growth to the byte {memory_right / len(rows):6.1%}, sync points {syncs_right / len(rows):6.1%}")
    _list("work items", [r for r in compared if r["items"][0] != r["items"][1]], "items", worst)
    _list("peak growth", [r for r in compared if abs(r["growth"][0] - r["growth"][1]) > MEMORY_SLACK_BYTES],
          "growth", worst)
    _list("sync points (device: copies to the host)", [r for r in compared if r["syncs"][0] != r["syncs"][1]],
          "syncs", worst)
    return 0


def _key(row: dict) -> dict:
    return {"op": row["op"], "mode": row["mode"], "sample": row["sample"]}


def _list(title: str, wrong: list[dict], field: str, worst: int) -> None:
    by_op = collections.defaultdict(list)
    for r in wrong:
        by_op[(r["op"], r["mode"])].append(r)
    print(f"\n{title} wrong on {len(wrong)} calls, {len(by_op)} OpInfo x mode (measured -> predicted, first sample):")
    for (op, mode), rows in sorted(by_op.items(), key=lambda kv: -abs(kv[1][0][field][1] - kv[1][0][field][0]))[
            :worst]:
        m, p = rows[0][field]
        print(f"  {op:40s} {mode:8s} {m:>10} -> {p:<10} ({len(rows)} calls)")


if __name__ == "__main__":
    sys.exit(main())
