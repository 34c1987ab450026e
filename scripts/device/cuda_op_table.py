"""Which aten ops a CUDA build runs as a kernel of their own, and which it decomposes: the dispatcher's own
registrations, read on a machine with the CUDA build of torch (no GPU work is done).

    PYTHONPATH=src python3 scripts/device/cuda_op_table.py --out src/kernelcast/capture/data/cuda_ops_torch2.11.json

For every aten operator (name.overload) it records the dispatch keys with a kernel among KEYS. The capture reads
the table for the torch version it runs under (the nearest one recorded) to follow the CUDA build's choices on a
CPU-only torch (capture/cuda_path.py). No GPU is needed: the dispatcher's registrations of a CUDA wheel are read
the same without one. The tables for torch 2.12-2.15 were read on a machine without a GPU (installed_as in each).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

KEYS = ("CUDA", "CPU", "Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
        "CompositeExplicitAutogradNonFunctional", "Autograd", "AutogradCUDA")


def table() -> dict[str, list[str]]:
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return {name: [key for key in KEYS if has(name, key)]
            for name in sorted(torch._C._dispatch_get_all_op_names()) if name.startswith("aten::")}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--installed-as", default="",
                        help="how the torch read here was installed, kept in the table (e.g. pip's CUDA wheel, no GPU)")
    args = parser.parse_args()
    ops = table()
    doc = {"torch": torch.__version__, "cuda": torch.version.cuda, "date": time.strftime("%Y-%m-%d"),
           "command": "PYTHONPATH=src python3 scripts/device/cuda_op_table.py --out " + args.out,
           "installed_as": args.installed_as, "keys": list(KEYS), "ops": {name: "".join(str(KEYS.index(k)) for k in keys) for name, keys in ops.items()}}
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"), sort_keys=True)
    print(f"{len(ops)} aten ops; {sum('CUDA' in k for k in ops.values())} with a CUDA kernel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
