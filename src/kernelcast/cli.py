"""`kernelcast` command line. Each subcommand is a thin wrapper over one library call.

Bad input gets one line on stderr and exit status 2; never a traceback (set KERNELCAST_DEBUG=1 for one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from kernelcast.errors import KernelcastError

EXIT_BAD_INPUT = 2
DEFAULT_GPU = "h200"


def _cmd_devices(args: argparse.Namespace) -> int:
    from rich.table import Table

    from kernelcast.devices import all_gpus
    from kernelcast.report import _console

    table = Table(title="GPUs kernelcast knows (dense peaks from datasheets; see gpus.toml for sources)")
    for col in ("id", "name", "bf16/fp16 TFLOP/s", "fp32 TFLOP/s", "HBM TB/s", "L2 MB", "SMs", "mem GB", "ridge bf16"):
        table.add_column(col, justify="left" if col in ("id", "name") else "right")
    for gpu in all_gpus().values():
        bf16 = gpu.peak_flops.get("bf16_tensor") or gpu.peak_flops.get("fp16_tensor")
        ridge = f"{bf16 / gpu.mem_bw_bytes_per_s:.0f} FLOP/B" if bf16 else "-"
        table.add_row(
            gpu.id, gpu.name, f"{bf16 / 1e12:.0f}" if bf16 else "-", f"{gpu.peak_flops['fp32'] / 1e12:.1f}",
            f"{gpu.mem_bw_bytes_per_s / 1e12:.2f}", f"{gpu.l2_bytes / 1e6:.0f}", str(gpu.sm_count),
            f"{gpu.memory_bytes / 1e9:.0f}", ridge,
        )
    _console().print(table)
    return 0


def _load_or_capture(workload: str, gpu: str):
    """A saved capture (.json) is read as is; anything else is a workload to capture now."""
    from kernelcast.records import Capture

    if workload.endswith(".json"):
        try:
            return Capture.load(workload)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KernelcastError(f"could not read capture {workload}: {exc}") from exc
    from kernelcast.api import capture_file

    return capture_file(workload, gpu)


def _cmd_capture(args: argparse.Namespace) -> int:
    from kernelcast.devices import get_gpu

    get_gpu(args.gpu)  # an unknown GPU fails before the (slower) capture
    cap = _load_or_capture(args.workload, args.gpu)
    cap.save(args.output)
    print(f"captured {len(cap.ops)} ops from {args.workload} -> {args.output}")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from kernelcast.devices import get_gpu
    from kernelcast.predict import predict_capture
    from kernelcast.report import prediction_json, print_prediction

    gpu = get_gpu(args.gpu)
    cap = _load_or_capture(args.workload, args.gpu)
    if args.save_capture:
        cap.save(args.save_capture)
    pred = predict_capture(cap, gpu)
    print_prediction(pred, top=args.top)
    if args.json:
        Path(args.json).write_text(json.dumps(prediction_json(pred), indent=1))
        print(f"wrote {args.json}")
    return 0


def _cmd_examples(args: argparse.Namespace) -> int:
    from kernelcast.capture.workload import list_examples

    for name in list_examples():
        print(f"example:{name}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelcast", description="Predict what a PyTorch step costs on a GPU, without one.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("predict", help="capture a step and predict its kernels and wall time on a GPU")
    p.add_argument("workload", help="FILE.py:build, example:NAME, or a capture saved as .json")
    p.add_argument("--gpu", default=DEFAULT_GPU, help=f"target GPU (default {DEFAULT_GPU}; see `kernelcast devices`)")
    p.add_argument("--json", metavar="OUT", help="also write the prediction as JSON")
    p.add_argument("--top", type=int, default=15, help="rows in the table of top ops")
    p.add_argument("--save-capture", metavar="OUT", help="also save the capture (re-predict later without torch)")
    p.set_defaults(func=_cmd_predict)

    c = sub.add_parser("capture", help="capture a step's ops to a JSON file")
    c.add_argument("workload", help="FILE.py:build or example:NAME")
    c.add_argument("-o", "--output", required=True, help="where to write the capture")
    c.add_argument("--gpu", default=DEFAULT_GPU, help="target GPU (decides e.g. the attention backend)")
    c.set_defaults(func=_cmd_capture)

    d = sub.add_parser("devices", help="list the GPUs kernelcast has data for")
    d.set_defaults(func=_cmd_devices)

    e = sub.add_parser("examples", help="list the built-in example workloads")
    e.set_defaults(func=_cmd_examples)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KernelcastError as exc:
        if os.environ.get("KERNELCAST_DEBUG"):
            raise
        print(f"kernelcast: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
