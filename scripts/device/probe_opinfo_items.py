"""Work items and peak memory of PyTorch's own OpInfo samples, measured on the device: every op, not only ours.

    (device) python3 scripts/device/probe_opinfo_items.py --out $OUT/opinfo_items.json.gz --budget-s 420

For each OpInfo in torch's op_db (torch.testing._internal.common_methods_invocations) that runs float32 on CUDA,
its first --samples sample inputs, each called twice as a measured mode: "forward" under torch.no_grad(), and
"backward" (the forward with grad-requiring inputs, then a backward from ones into every differentiable output).
Per call, after one warm-up call: the CUDA work items one call ran (torch.profiler's CUDA events: kernels,
memsets, copies) and the rise of max_memory_allocated() over memory_allocated() before it (input gradients set
to None first, so none accumulates). Each sample is written down exactly (shapes, strides, the values of its
storage, every other argument), so scripts/eval/opinfo_items_check.py can rebuild it on another torch and
compare kernelcast's prediction with these counts. A sample that cannot be written down (complex values, large
tensors, generators) is skipped and counted. Nothing here is kernelcast's: it does not import it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import signal
import sys
import time
import types
import unittest

import torch
from torch.utils._pytree import tree_flatten

MAX_STORAGE_ELEMENTS = 1 << 16  # a sample's tensors are written value by value: OpInfo's are small
SAMPLE_SECONDS = 10.0
DTYPE = torch.float32
NAME_CHARS = 100


class Unencodable(Exception):
    pass


def op_db():
    """op_db, importable without expecttest (torch's test utilities import it for a TestCase base class only)."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        sys.modules["expecttest"] = stub
    from torch.testing._internal.common_methods_invocations import op_db as db
    return db


def encode(value):
    """A JSON-able description of a sample argument (decode() in opinfo_items_check.py rebuilds it)."""
    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.layout != torch.strided or value.is_quantized:
            raise Unencodable(f"tensor {value.dtype} {value.layout}")
        if value.numel() == 0:
            extent = 0
        else:
            extent = 1 + sum((n - 1) * s for n, s in zip(value.shape, value.stride()))
        if extent > MAX_STORAGE_ELEMENTS:
            raise Unencodable(f"tensor of {extent} storage elements")
        flat = torch.as_strided(value.detach(), (extent,), (1,), value.storage_offset()) if extent else value
        values = flat.cpu().tolist() if extent else []
        return {"tensor": {"shape": list(value.shape), "stride": list(value.stride()),
                           "dtype": str(value.dtype).removeprefix("torch."), "device": value.device.type,
                           "requires_grad": value.requires_grad, "storage": values}}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": repr(value)} if not math.isfinite(value) else value
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": value.type}
    if isinstance(value, (list, tuple, torch.Size)):
        items = [encode(v) for v in value]
        return {"tuple": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise Unencodable("dict with non-str keys")
        return {"dict": {k: encode(v) for k, v in value.items()}}
    raise Unencodable(type(value).__name__)


def differentiable(out) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(out)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None]


def leaves_of(sample) -> list[torch.Tensor]:
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad and t.is_leaf]


def call(opinfo, sample, backward: bool):
    """One call of the sample: the forward (under no_grad for "forward"), then the backward from ones."""
    for t in leaves_of(sample):
        t.grad = None
    if not backward:
        with torch.no_grad():
            return opinfo(sample.input, *sample.args, **sample.kwargs)
    out = opinfo(sample.input, *sample.args, **sample.kwargs)
    outs = differentiable(out)
    if outs:
        torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
    return out


def measure(opinfo, sample, backward: bool) -> dict:
    out = call(opinfo, sample, backward)  # warm-up: library handles, the allocator's segments
    del out
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = call(opinfo, sample, backward)
        torch.cuda.synchronize()
    del out
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    for t in leaves_of(sample):
        t.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = call(opinfo, sample, backward)
    torch.cuda.synchronize()
    growth = torch.cuda.max_memory_allocated() - before
    del out
    return {"work_items": len(names), "names": [n[:NAME_CHARS] for n in names], "peak_growth_bytes": growth}


class SampleTimeout(Exception):
    pass


def _expire(signum, frame):
    raise SampleTimeout(f"no result after {SAMPLE_SECONDS:g} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--dry-run", action="store_true", help="make and write down the samples on the CPU only")
    args = parser.parse_args()
    device = "cpu" if args.dry_run else "cuda"
    start = time.time()
    signal.signal(signal.SIGALRM, _expire)
    rows, skipped, ops_done = [], {}, 0
    for opinfo in op_db():
        if time.time() - start > args.budget_s:
            break
        name = f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name
        if args.only and name not in args.only:
            continue
        if DTYPE not in opinfo.supported_dtypes("cuda"):
            continue
        ops_done += 1
        for backward in (False, True):
            if backward and not opinfo.supports_autograd:
                continue
            try:
                signal.setitimer(signal.ITIMER_REAL, SAMPLE_SECONDS)
                samples = list(opinfo.sample_inputs(device, DTYPE, requires_grad=backward))[:args.samples]
            except Exception as e:
                skipped[f"{name} samples"] = f"{type(e).__name__}: {e}"[:160]
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            for index, sample in enumerate(samples):
                row = {"op": name, "mode": "backward" if backward else "forward", "sample": index}
                try:
                    row["spec"] = encode({"input": sample.input, "args": list(sample.args),
                                          "kwargs": dict(sample.kwargs)})
                except Unencodable as e:
                    skipped[f"{name} {row['mode']} {index}"] = f"unencodable: {e}"
                    continue
                if args.dry_run:
                    rows.append(row)
                    continue
                try:
                    signal.setitimer(signal.ITIMER_REAL, SAMPLE_SECONDS)
                    row.update(measure(opinfo, sample, backward))
                except Exception as e:  # a sample the op rejects is a result too
                    row["error"] = f"{type(e).__name__}: {e}"[:200]
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                rows.append(row)
        if not args.dry_run:
            torch.cuda.empty_cache()
    doc = {"device": torch.cuda.get_device_name() if not args.dry_run else "cpu (dry run)", "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "command": "python3 scripts/device/probe_opinfo_items.py --out opinfo_items.json.gz",
           "seconds": round(time.time() - start, 1), "ops": ops_done, "skipped": skipped, "rows": rows}
    with gzip.open(args.out, "wt") as f:
        json.dump(doc, f)
    print(f"{ops_done} OpInfos, {len(rows)} calls, {len(skipped)} skipped, {doc['seconds']} s")


if __name__ == "__main__":
    main()
