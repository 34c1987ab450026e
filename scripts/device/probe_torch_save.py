"""The host time of torch.save by storages and bytes, CUDA and CPU tensors, to memory and to a file (issue 31).

    PYTHONPATH=src python3 scripts/device/probe_torch_save.py --out $OUT/torch_save_probe.json

torch.save (torch/serialization.py `_save`, the zip format) copies each CUDA storage to the host (one blocking
device-to-host copy each), pickles the object, and writes each storage as a zip record (with its CRC32) through
PyTorchFileWriter. The probe_user_kinds.py run on an H100 host (2026-12-08) read 1.10 ms for 8 storages of 1 MB
in all and 52.1 ms for 24 storages of 50 MB: the copies were 2.6 ms of that. Here a grid of state dicts (storages
x bytes per storage) is saved from CUDA and from CPU tensors (the latter without the copies: the serialization
alone), to an io.BytesIO and to a file under the working directory; each case after warm-up, median and range of
REPEATS calls between synchronizes. No capture code runs.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile

import torch

from kernelcast.measure import synced_ms

WARMUP = 3
REPEATS = 9
STORAGES = (2, 8, 32, 128)
STORAGE_BYTES = (4 << 10, 256 << 10, 4 << 20)
MAX_TOTAL_BYTES = 256 << 20  # the grid's largest cases are left out above this


def host_ms_summary(call, warmup: int = WARMUP, repeats: int = REPEATS) -> dict:
    """After `warmup` calls, ms of `repeats` calls each between synchronizes: their median and range."""
    for _ in range(warmup):
        call()
    ms = synced_ms(call, repeats)
    return {"host_ms": round(statistics.median(ms), 4), "host_ms_range": [round(min(ms), 4), round(max(ms), 4)]}


def _state(storages: int, nbytes: int, device: str) -> dict:
    return {f"w{i}": torch.randn(nbytes // 4, device=device) for i in range(storages)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(dir=".") as folder:
        path = os.path.join(folder, "checkpoint.pt")
        for device in ("cuda", "cpu"):
            for storages in STORAGES:
                for nbytes in STORAGE_BYTES:
                    if storages * nbytes > MAX_TOTAL_BYTES:
                        continue
                    state = _state(storages, nbytes, device)
                    for target in ("memory", "file"):
                        def save(state=state, target=target):
                            torch.save(state, io.BytesIO() if target == "memory" else path)
                        rows.append({"device": device, "target": target, "storages": storages,
                                     "bytes": storages * nbytes, **host_ms_summary(save)})
                        print(json.dumps(rows[-1]), flush=True)
                    del state
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
           "command": "PYTHONPATH=src python3 scripts/device/probe_torch_save.py --out $OUT/torch_save_probe.json",
           "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
