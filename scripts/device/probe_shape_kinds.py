"""The kinds KernelBench showed the H200 profile lacks (issue 30), measured on the H200.

    PYTHONPATH=src python3 scripts/device/probe_shape_kinds.py --out-dir $OUT     # on the H200, about 5 minutes

Writes two raw runs in the format scripts/fit/build_h200_profile.py merges:
- h200_conv_volumetric_raw.json.gz: the sweep section conv_volumetric (calibrate/sweep.py: 3-D convolutions and
  transposed 3-D and 2-D ones, forward and both gradients, every dtype and layout), timed as `kernelcast
  calibrate --sweep` times its cases (CUDA events around each call, L2 flushed, kernels from torch.profiler);
- h200_shape_kinds_grid_raw.json.gz: the microbenchmark section shape_kinds_grid (calibrate/grids.py: 3-D
  pooling, wide 2-D average pooling, layer norm over few long rows, group norm, scans), as `kernelcast calibrate
  --sections shape_kinds_grid` runs it;
- with --only conv_wide, h200_conv_volumetric_wide_raw.json.gz: the sweep section conv_volumetric_wide, a second
  draw of those convolutions at batches to 128 and sizes to 2 GiB (calibrate/sweep.py CONV_VOLUMETRIC_WIDE);
- with --only conv_pointwise, h200_conv_pointwise_raw.json.gz: 1x1 and 3x3 convolutions of few channels over
  large maps (calibrate/sweep.py conv_pointwise_cases), about a minute;
- with --only conv_stem, h200_conv_stem_raw.json.gz: stems and heads, 1-6 channels on one side over large maps
  (calibrate/sweep.py conv_stem_cases);
- with --only conv_upsample, h200_conv_upsample_raw.json.gz: stride-2 transposed 2-D and 3-D convolutions as
  decoders up-sample (calibrate/sweep.py conv_upsample_cases);
- with --only attention_fp32, h200_attention_fp32_raw.json.gz: fp32 scaled_dot_product_attention, forward and
  backward, on the memory-efficient backend PyTorch picks for fp32 (calibrate/sweep.py attention_fp32_cases).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--only", choices=("conv", "grid", "conv_wide", "conv_pointwise", "conv_stem", "conv_upsample",
                                           "attention_fp32"), help="run one of them")
    args = parser.parse_args()
    from kernelcast.calibrate import require_gpu, run_meta, write_raw
    from kernelcast.calibrate.microbench import run_all
    from kernelcast.calibrate.sweep import run_sweep, sweep_cases

    require_gpu()
    out = Path(args.out_dir)
    command = "PYTHONPATH=src python3 scripts/device/probe_shape_kinds.py --out-dir ."
    # one drawn or designed section of sweep.py
    if args.only in ("conv_pointwise", "conv_stem", "conv_upsample", "attention_fp32"):
        t0 = time.perf_counter()
        results = run_sweep(sweep_cases([args.only]))
        write_raw({"meta": run_meta(command + " --only " + args.only, t0), "cases": [], "sweep": results,
                   "host": {}}, str(out / f"h200_{args.only}_raw.json.gz"))
        print(f"{args.only}: {len(results)} cases, {sum('error' in r for r in results)} errors, "
              f"{time.perf_counter() - t0:.0f} s")
        return 0
    if args.only == "conv_wide":  # the second draw at larger batches and sizes (sweep.py CONV_VOLUMETRIC_WIDE)
        t0 = time.perf_counter()
        results = run_sweep(sweep_cases(["conv_volumetric_wide"]))
        write_raw({"meta": run_meta(command + " --only conv_wide", t0), "cases": [], "sweep": results, "host": {}},
                  str(out / "h200_conv_volumetric_wide_raw.json.gz"))
        print(f"conv_volumetric_wide: {len(results)} cases, {sum('error' in r for r in results)} errors, "
              f"{time.perf_counter() - t0:.0f} s")
        return 0
    if args.only != "grid":
        t0 = time.perf_counter()
        results = run_sweep(sweep_cases(["conv_volumetric"]))
        write_raw({"meta": run_meta(command + " (conv_volumetric)", t0), "cases": [], "sweep": results, "host": {}},
                  str(out / "h200_conv_volumetric_raw.json.gz"))
        print(f"conv_volumetric: {len(results)} cases, {sum('error' in r for r in results)} errors")
    if args.only != "conv":
        t0 = time.perf_counter()
        cases = run_all(sections=["shape_kinds_grid"])
        write_raw({"meta": run_meta(command + " (shape_kinds_grid)", t0), "cases": cases, "host": {}},
                  str(out / "h200_shape_kinds_grid_raw.json.gz"))
        print(f"shape_kinds_grid: {len(cases)} cases, {sum('error' in c for c in cases)} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
