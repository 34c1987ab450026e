"""Ops over the channel dim of NC(D)HW activations, measured on the H200 (issue 30): cuDNN's training batch norm
by channels and values per channel, softmax over a dim that is not the last, group norm at few groups over long
maps (calibrate/grids.py channel_grid, whose comment says why).

    PYTHONPATH=src python3 scripts/device/probe_channel_kinds.py --out-dir $OUT     # on the H200, about 2 minutes

Writes h200_channel_grid_raw.json.gz in the format scripts/fit/build_h200_profile.py merges, as `kernelcast
calibrate --sections channel_grid` runs it (CUDA events around each call, L2 flushed, kernels from
torch.profiler).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--quick", action="store_true", help="a third of the grid")
    args = parser.parse_args()
    from kernelcast.calibrate import require_gpu, run_meta, write_raw
    from kernelcast.calibrate.microbench import run_all

    require_gpu()
    t0 = time.perf_counter()
    cases = run_all(quick=args.quick, sections=["channel_grid"])
    command = "PYTHONPATH=src python3 scripts/device/probe_channel_kinds.py --out-dir ." + (" --quick" if args.quick else "")
    write_raw({"meta": run_meta(command, t0), "cases": cases, "host": {}},
              str(Path(args.out_dir) / "h200_channel_grid_raw.json.gz"))
    print(f"channel_grid: {len(cases)} cases, {sum('error' in c for c in cases)} errors, "
          f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
