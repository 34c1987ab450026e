"""Device probe: the bandwidth multi_tensor_apply reaches over optimizer-sized tensor lists (issue 31).

    PYTHONPATH=src python3 scripts/device/probe_foreach_stream.py --out $OUT/foreach_stream.json   # on a GPU

A Llama-7B-shaped AdamW step (zoo llama7b_adamw_step) measured 102 ms where its foreach ops were priced 70 ms:
the foreach kinds' rate comes from the eager pointwise curve's streaming rate. Here, lists of 4096 x 4096 and
4096 x 11008 tensors totalling 0.25-8 GiB per list, bf16 and fp32, run the foreach ops AdamW runs (_foreach_mul_,
_foreach_lerp_, _foreach_addcmul_, _foreach_sqrt, _foreach_div_, _foreach_add_, _foreach_addcdiv_), each timed
between CUDA events after a warm-up (median of REPS), with the bytes it reads and writes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from kernelcast.measure import back_to_back_ms

GIB = 1 << 30
LIST_GIB = (0.25, 1.0, 4.0, 8.0)
REPS = 3
SHAPES = ((4096, 4096), (4096, 11008))


def _lists(total_bytes: float, dtype, count: int):
    itemsize = torch.tensor([], dtype=dtype).element_size()
    shapes, size = [], 0
    while size < total_bytes:
        shape = SHAPES[len(shapes) % len(SHAPES)]
        shapes.append(shape)
        size += shape[0] * shape[1] * itemsize
    return [[torch.rand(s, device="cuda", dtype=dtype) + 0.5 for s in shapes] for _ in range(count)], size


def _time_ms(call) -> float:
    """One call between CUDA events from an idle GPU (kernelcast.measure back_to_back_ms at one step), after one
    untimed call; the median of REPS."""
    call()
    torch.cuda.synchronize()
    return statistics.median(back_to_back_ms(call, 1, REPS))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for gib in LIST_GIB:
            (p, g, m, v), size = _lists(gib * GIB, dtype, 4)
            ops = {  # name: (call, lists read, lists written)
                "_foreach_mul_": (lambda: torch._foreach_mul_(p, 0.999), 1, 1),
                "_foreach_lerp_": (lambda: torch._foreach_lerp_(m, g, 0.1), 2, 1),
                "_foreach_addcmul_": (lambda: torch._foreach_addcmul_(v, g, g, 0.001), 3, 1),
                "_foreach_sqrt": (lambda: torch._foreach_sqrt(v), 1, 1),
                "_foreach_div_": (lambda: torch._foreach_div_(m, 1.01), 1, 1),
                "_foreach_add_": (lambda: torch._foreach_add_(v, 1e-8), 1, 1),
                "_foreach_addcdiv_": (lambda: torch._foreach_addcdiv_(p, m, v, -0.001), 3, 1),
            }
            for name, (call, reads, writes) in ops.items():
                ms = _time_ms(call)
                moved = (reads + writes) * size
                rows.append({"op": name, "dtype": str(dtype).split(".")[-1], "list_bytes": size,
                             "tensors": len(p), "ms": ms, "bytes_moved": moved, "tb_per_s": moved / ms / 1e9})
                print(f"{rows[-1]['dtype']:8s} {gib:5.2f} GiB {name:18s} {ms:8.3f} ms {rows[-1]['tb_per_s']:5.2f} TB/s",
                      flush=True)
            del p, g, m, v
            torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                          "date": time.strftime("%Y-%m-%d"), "reps": REPS, "rows": rows,
                                          "command": "PYTHONPATH=src python3 scripts/device/probe_foreach_stream.py --out OUT"},
                                         indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
