"""`kernelcast` command line. Each subcommand is a thin wrapper over one library call.

Bad input gets one line on stderr and exit status 2; never a traceback (set KERNELCAST_DEBUG=1 for one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from typing import NoReturn
from pathlib import Path

from kernelcast.devices import DEFAULT_GPU
from kernelcast.errors import DEBUG_ENV, KernelcastError
from kernelcast.whatif.fit import FIT_MARGIN
from kernelcast.outputs import check_writable, write_text_atomic

EXIT_BAD_INPUT = 2


def _cmd_devices(args: argparse.Namespace) -> int:
    from kernelcast.devices import all_gpus
    from kernelcast.predict import kernel_model_label
    from kernelcast.report import console_for_output
    from kernelcast.report.devices import print_devices

    labels = {} if args.interconnects else {g.id: kernel_model_label(g) for g in all_gpus().values()}
    print_devices(console_for_output(), labels, interconnects=args.interconnects)
    return 0


def _world_size(args: argparse.Namespace) -> int:
    if args.world_size < 1:
        raise KernelcastError(f"--world-size must be 1 or more (got {args.world_size})")
    return args.world_size


def _check_outputs(*flag_paths: tuple[str, str | None]) -> None:
    """Every output path given must be writable before any capture or measurement starts."""
    for flag, path in flag_paths:
        if path:
            check_writable(path, flag)


def _check_workload(workload: str) -> None:
    """Fail on a typo in the workload now, before torch is imported (seconds): the spec's form, the file or
    example it names, or the saved capture."""
    if workload.endswith(".json"):
        if not Path(workload).is_file():
            raise KernelcastError(f"capture file not found: {workload}")
        return
    from kernelcast.capture.workload import check_spec

    check_spec(workload)


def _build_args(workload: str, pairs: list[str] | None) -> dict:
    """--arg NAME=VALUE pairs as build()'s keyword arguments, checked against its signature before capturing."""
    if not pairs:
        return {}
    if workload.endswith(".json"):
        raise KernelcastError("--arg passes arguments to a workload's build(); a saved capture takes none")
    from kernelcast.capture.workload import build_kwargs, load_build

    build, _ = load_build(workload)
    return build_kwargs(build, pairs)


def _load_or_capture(workload: str, gpu: str, world_size: int = 1, build_args: dict | None = None,
                     compile_mode: str | None = None):
    """A saved capture (.json) is read as is; anything else is a workload to capture now."""
    from kernelcast.records import Capture

    if workload.endswith(".json"):
        try:
            cap = Capture.load(workload)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KernelcastError(f"could not read capture {workload}: {exc}") from exc
        if world_size != 1 and cap.world_size != world_size:
            raise KernelcastError(f"{workload} was captured with world size {cap.world_size}, not {world_size}; "
                                  "capture the workload again with --world-size")
        return cap
    from kernelcast.api import capture_file
    from kernelcast.progress import progress_display

    with progress_display(f"capturing {workload}"):
        return capture_file(workload, gpu, world_size, build_args, compile_mode=compile_mode)


def _compile_mode(args: argparse.Namespace) -> str | None:
    """--compile MODE, checked before the capture starts (and Inductor's prerequisite with it)."""
    mode = getattr(args, "compile", None)
    if mode is None:
        return None
    from kernelcast.capture.inductor import check_compile_mode, triton_missing

    check_compile_mode(mode)
    if args.workload.endswith(".json"):
        raise KernelcastError("--compile applies to a workload being captured, not to a saved capture "
                              f"({args.workload}): capture it again with --compile")
    missing = triton_missing()
    if missing is not None:
        raise KernelcastError(f"--compile needs Inductor, which cannot run here: {missing}")
    return mode


def _cmd_capture(args: argparse.Namespace) -> int:
    from kernelcast.devices import get_gpu

    get_gpu(args.gpu)  # an unknown GPU fails before the (slower) capture
    _check_outputs(("-o/--output", args.output))
    _check_workload(args.workload)
    cap = _load_or_capture(args.workload, args.gpu, _world_size(args), _build_args(args.workload, args.arg),
                           _compile_mode(args))
    cap.save(args.output)
    print(f"captured {len(cap.ops)} ops from {args.workload} -> {args.output}")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from kernelcast.devices import get_gpu
    from kernelcast.predict import predict_capture
    from kernelcast.report import prediction_json, print_prediction

    gpu = get_gpu(args.gpu)
    world_size = _world_size(args)
    if args.interconnect:  # an unknown name fails before the (slower) capture
        from kernelcast.devices.interconnects import get_interconnect

        get_interconnect(args.interconnect)
    _check_outputs(("--json", args.json), ("--trace", args.trace), ("--save-capture", args.save_capture))
    _check_workload(args.workload)
    build_args = _build_args(args.workload, args.arg)
    cap = _load_or_capture(args.workload, args.gpu, world_size, build_args, _compile_mode(args))
    if args.save_capture:
        cap.save(args.save_capture)
    pred = predict_capture(cap, gpu, interconnect=args.interconnect, expandable_segments=args.expandable_segments)
    record = _with_memory_fixes(pred, args, build_args).record()
    print_prediction(record, top=args.top)
    if args.json:
        write_text_atomic(args.json, json.dumps(prediction_json(record), indent=1))
        print(f"wrote {args.json}")
    if args.trace:
        from kernelcast.report.trace import chrome_trace

        write_text_atomic(args.trace, json.dumps(chrome_trace(record)))
        print(f"wrote {args.trace} (open it in ui.perfetto.dev)")
    return 0


def _with_memory_fixes(pred, args: argparse.Namespace, build_args: dict):
    """A step that does not fit: each fix re-predicted (whatif/memory_fixes.py), when the workload can be built again."""
    mem = pred.memory
    if mem is None or mem.fit is None or mem.fit.fits or args.workload.endswith(".json"):
        return pred
    if args.no_fixes:
        import dataclasses

        return dataclasses.replace(pred, memory=dataclasses.replace(mem, fixes_skipped="--no-fixes"))
    import dataclasses

    from kernelcast.whatif.memory_fixes import memory_fixes

    print("the step does not fit: re-predicting each fix (one capture each) ...", file=sys.stderr)
    fixes = memory_fixes(args.workload, args.gpu, pred, build_args, _world_size(args), args.interconnect)
    return dataclasses.replace(pred, memory=dataclasses.replace(mem, fixes=fixes))


def _cmd_fit(args: argparse.Namespace) -> int:
    from kernelcast.devices import get_gpu
    from kernelcast.report.whatif_text import fit_json, fit_progress_line, fit_result_lines, fit_search_line
    from kernelcast.whatif.fit import check_margin, check_range, fit_workload, parse_range
    from kernelcast.whatif.transforms import BATCH_NAMES

    gpu = get_gpu(args.gpu)
    name, low, high = parse_range(args.arg_range)
    check_range(low, high)  # before the search line: an empty range is one error line, nothing else
    margin = args.margin / 100.0
    check_margin(margin)
    _check_outputs(("--json", args.json))
    build_args = _rebuilt_workload_args(args, "fit captures the workload at each value", (name, low))
    _say(fit_search_line(name, low, high, gpu.name, args.margin))
    result = fit_workload(args.workload, gpu.id, name, low, high, build_args, _world_size(args), args.interconnect,
                          args.expandable_segments,
                          lambda value, fits, pred: _say(fit_progress_line(name, value, fits, pred, args.margin)),
                          margin)
    unit = "samples" if name in BATCH_NAMES else name
    for line in fit_result_lines(result, name, low, high, gpu.name, args.margin, unit):
        _say(line)
    if args.json:
        write_text_atomic(args.json, json.dumps(fit_json(result, gpu.id, name, low, high, margin), indent=1))
        print(f"wrote {args.json}")
    return 0


def _percent(text: str) -> float:
    """A percentage as given on the command line: "5" or "5%"."""
    try:
        return float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (e.g. 5 or 5%)") from None


def _say(text: str) -> None:
    """One line of a command's output, wrapped to the output's width (COLUMNS, the terminal's, else the pipe's)
    with each number kept beside its unit; flushed, as a search prints while it runs."""
    from kernelcast.report import keep_units, output_width, wrap_lines

    print(wrap_lines(keep_units(text), output_width()), flush=True)


def _rebuilt_workload_args(args: argparse.Namespace, why: str, arg_range: tuple[str, int] | None = None) -> dict:
    """build()'s keyword arguments (--arg) for a command that captures the workload again (fit, sweep, advise),
    checked before any capture: a saved capture cannot be built again (`why` says what the command does), and
    --arg-range's argument (NAME, LOW) must exist in build() and take whole numbers (the error names
    --arg-range)."""
    from kernelcast.capture.workload import build_kwargs, load_build

    _check_workload(args.workload)
    if args.workload.endswith(".json"):
        raise KernelcastError(f"{why}: give FILE.py:build or example:NAME")
    build, _ = load_build(args.workload)
    if arg_range is not None:
        try:
            build_kwargs(build, [f"{arg_range[0]}={arg_range[1]}"])
        except KernelcastError as exc:
            raise KernelcastError(str(exc).replace("--arg ", "--arg-range ", 1)) from None
    return build_kwargs(build, args.arg)


def _cmd_advise(args: argparse.Namespace) -> int:
    from kernelcast.whatif.advise import advice_json, advice_text, advise
    from kernelcast.devices import get_gpu

    gpu = get_gpu(args.gpu)
    _check_outputs(("--json", args.json))
    build_args = _rebuilt_workload_args(args, "advise captures the workload again with each fix")
    talk = sys.stderr.isatty()  # progress on a terminal only, as the other commands (nothing in a pipe or in CI)
    if talk:
        print(f"advising on {args.workload} for {gpu.name} (one capture per fix) ...", file=sys.stderr, flush=True)
    with warnings.catch_warnings():  # Inductor's advice to the user's own code (TF32 and the like) is not ours
        warnings.simplefilter("ignore", UserWarning)
        advice = advise(args.workload, gpu.id, build_args, _world_size(args),
                        (lambda what: print(f"  capturing: {what}", file=sys.stderr, flush=True)) if talk else None)
    _say(advice_text(advice))
    if args.json:
        write_text_atomic(args.json, json.dumps(advice_json(advice), indent=1))
        print(f"wrote {args.json}")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from kernelcast.devices import get_gpu
    from kernelcast.report.whatif_text import sweep_header, sweep_json, sweep_row, sweep_verdict
    from kernelcast.whatif.fit import parse_range
    from kernelcast.whatif.sweep import sweep, sweep_values, turns_gpu_bound
    from kernelcast.whatif.transforms import BATCH_NAMES

    gpu = get_gpu(args.gpu)
    name, low, high = parse_range(args.arg_range)
    values = sweep_values(low, high)
    _check_outputs(("--json", args.json))
    build_args = _rebuilt_workload_args(args, "sweep captures the workload at each value", (name, low))
    if sys.stderr.isatty():
        print(f"{name} {', '.join(map(str, values))} on {gpu.name} (one capture each)", file=sys.stderr, flush=True)
    print(sweep_header(name, "samples/s" if name in BATCH_NAMES else f"{name}/s"))
    points = sweep(args.workload, gpu.id, name, low, high, build_args, lambda p: print(sweep_row(p), flush=True))
    first = turns_gpu_bound(points)
    _say(sweep_verdict(name, low, high, first))
    if args.json:
        write_text_atomic(args.json, json.dumps(sweep_json(points, gpu.id, name, first), indent=1))
        print(f"wrote {args.json}")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from kernelcast.devices import get_gpu

    gpu = get_gpu(args.gpu)
    _check_outputs(("--out", args.out), ("--raw", args.raw))
    if args.from_raw:  # rebuild a profile from saved microbenchmark results: no GPU needed
        from kernelcast.calibrate import build_profile, read_raw

        try:
            raw = read_raw(args.from_raw)
        except (OSError, ValueError, EOFError) as exc:  # gzip's BadGzipFile is an OSError
            raise KernelcastError(f"could not read {args.from_raw}: {exc}") from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("cases"), list) or not isinstance(raw.get("meta"), dict):
            raise KernelcastError(f"could not read {args.from_raw}: not raw calibration results (an object with "
                                  "'meta' and 'cases', as `kernelcast calibrate --raw` writes)")
        try:
            profile = build_profile(raw, gpu.id)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # a case or field malformed
            raise KernelcastError(f"could not read {args.from_raw}: malformed raw results "
                                  f"({type(exc).__name__}: {exc})") from exc
        write_text_atomic(args.out, json.dumps(profile, separators=(",", ":")) + "\n")
    else:
        from kernelcast.calibrate import calibrate
        from kernelcast.progress import progress_display

        with progress_display(f"calibrating the {gpu.name}"):
            profile = calibrate(args.out, gpu.id, quick=args.quick, raw_out=args.raw, sweep=args.sweep,
                                sweep_budget_s=args.sweep_budget,
                                sections=args.sections.split(",") if args.sections else None)
    timings = profile["timings"]
    _say(f"profile for {gpu.name} ({profile['device_name']}, torch {profile['torch']}): "
         f"{len(timings['gemm'])} GEMM, {len(timings['conv'])} conv, {len(timings['attention'])} attention shapes, "
         f"{sum(len(v) for v in timings['memory'].values())} memory-bound points -> {args.out}")
    return 0


def _cmd_measure(args: argparse.Namespace) -> int:
    import contextlib

    from kernelcast.calibrate import require_gpu
    from kernelcast.capture.workload import load_build, on_sys_path
    from kernelcast.measure import measure_step

    _check_outputs(("--json", args.json), ("--trace", args.trace))
    _check_workload(args.workload)
    require_gpu()
    from kernelcast.progress import progress_display, stage
    from kernelcast.report.device_runs import measurement_lines

    build, folder = load_build(args.workload)
    with on_sys_path(folder) if folder else contextlib.nullcontext(), progress_display(f"measuring {args.workload}"):
        stage("build()")
        step, step_args = build()
        m = measure_step(step, tuple(step_args), trace_path=args.trace)
    for line in measurement_lines(m, args.workload, args.top):
        _say(line)
    if args.json:
        write_text_atomic(args.json, json.dumps(m.to_json(), indent=1))
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from kernelcast.devices import get_gpu
    from kernelcast.report import console_for_output
    from kernelcast.validate import validate_file

    get_gpu(args.gpu)
    _check_outputs(("--json", args.json))
    _check_workload(args.workload)
    from kernelcast.progress import progress_display
    from kernelcast.report.device_runs import validation_summary, validation_table

    with progress_display(f"validating {args.workload}"):
        v = validate_file(args.workload, args.gpu)
    console = console_for_output()
    console.print(validation_table(v, args.workload))
    for line in validation_summary(v):
        _say(line)
    if args.json:
        write_text_atomic(args.json, json.dumps(v.to_json(), indent=1))
    return 0


def _gpu_list(text: str | None) -> list:
    """--gpu h100,a100,l4 -> their catalogue entries (an unknown name fails here, before any capture)."""
    from kernelcast.devices import get_gpu

    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    gpus = []
    for name in names:
        gpu = get_gpu(name)
        if gpu not in gpus:
            gpus.append(gpu)
    return gpus


def _read_json(path: str, what: str):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise KernelcastError(f"{what} not found: {path}") from exc
    except (OSError, ValueError) as exc:
        raise KernelcastError(f"could not read {what} {path}: {exc}") from exc


def _prediction_from(doc, path: str):
    from kernelcast.records import PredictionRecord

    try:
        return PredictionRecord.from_json(doc)
    except (ValueError, KeyError, TypeError) as exc:
        raise KernelcastError(f"could not read prediction {path}: {type(exc).__name__}: {exc}") from exc


def _read_prediction(path: str):
    """A prediction saved with `predict --json` (reads no torch, predicts nothing)."""
    from kernelcast.records import is_prediction_json

    doc = _read_json(path, "prediction")
    if not is_prediction_json(doc):
        raise KernelcastError(f"{path} is not a prediction (write one with `kernelcast predict ... --json OUT`)")
    return _prediction_from(doc, path)


def _report_records(args: argparse.Namespace) -> list:
    """One prediction record per GPU asked for: read from a saved prediction, or predicted from a saved capture or
    a workload (captured once per CUDA arch the GPUs need: the attention backend depends on it)."""
    from kernelcast.records import is_prediction_json

    gpus = _gpu_list(args.gpu)
    saved = args.target.endswith(".json")
    if saved:
        doc = _read_json(args.target, "capture or prediction")
        if is_prediction_json(doc):
            record = _prediction_from(doc, args.target)
            others = [g.name for g in gpus if g.id != record.gpu]
            if others:
                raise KernelcastError(f"{args.target} is a prediction for the {record.gpu_name}, not the "
                                      f"{', '.join(others)}: to report other GPUs, give its capture or workload")
            return [record]
    else:
        _check_workload(args.target)
    from kernelcast.devices import get_gpu
    from kernelcast.predict import predict_capture

    captures: dict[str, object] = {}
    records = []
    for gpu in gpus or [get_gpu(DEFAULT_GPU)]:
        key = "saved" if saved else gpu.cuda_arch
        if key not in captures:
            captures[key] = _load_or_capture(args.target, gpu.id, args.world_size)
        records.append(predict_capture(captures[key], gpu, interconnect=args.interconnect).record())
    return records


def _cmd_report(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")  # files only: no window, whatever the environment's backend

    _world_size(args)
    _check_outputs(("-o/--output", args.output))
    if args.figures and not Path(args.figures).is_dir():
        raise KernelcastError(f"--figures {args.figures}: not a folder")
    measured = None
    if args.measured:
        from kernelcast.report.measured import kernels_of

        try:
            kernels, device = kernels_of(_read_json(args.measured, "measurement"))
        except ValueError as exc:
            raise KernelcastError(f"could not read measurement {args.measured}: {exc}") from exc
    records = _report_records(args)
    if args.measured:
        from kernelcast.report.measured import match_kernels

        measured = match_kernels(records[0], kernels, device)
    from kernelcast.report.html import render_report

    page = render_report(records, top=args.top, measured=measured.time_us_by_op if measured else None,
                         measured_caption=measured.caption() if measured else "")
    write_text_atomic(args.output, page)
    print(f"wrote {args.output} ({', '.join(r.gpu_name for r in records)}; {len(page) // 1024} KB, self-contained)")
    if args.figures:
        from kernelcast.report.files import write_figures

        for path in write_figures(records, args.figures, measured.time_us_by_op if measured else None,
                                  measured.caption() if measured else ""):
            print(f"wrote {path}")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from kernelcast.report import console_for_output
    from kernelcast.report.compare import changes_table, op_changes, summary_table, sync_changes

    a, b = _read_prediction(args.a), _read_prediction(args.b)
    names = (Path(args.a).stem, Path(args.b).stem)
    if names[0] == names[1]:
        names = (f"{names[0]} (1)", f"{names[1]} (2)")
    console = console_for_output()
    if (a.workload or b.workload) and a.workload != b.workload:
        console.print(f"note: different workloads ({a.workload or '?'} and {b.workload or '?'})")
    console.print(summary_table(a, b, names, width=console.width))
    if any(c.delta_us for c in op_changes(a, b)):
        console.print(changes_table(a, b, names, args.top, width=console.width))
    else:
        console.print("no op's predicted time changed")
    for line in sync_changes(a, b):
        console.print(f"sync point {line}")
    return 0


def _cmd_examples(args: argparse.Namespace) -> int:
    from kernelcast.capture.workload import list_examples

    for name in list_examples():
        print(f"example:{name}")
    return 0


def version_line() -> str:
    """kernelcast's version and the torch it would use, read without importing torch (so it is instant)."""
    import platform

    from kernelcast import __version__, _fake_cuda

    torch = _fake_cuda.installed_torch()
    torch_text = "torch not installed" if torch is None else \
        f"torch {torch[0]} ({'CPU-only' if torch[1] else 'CUDA'} build)"
    return f"kernelcast {__version__}, {torch_text}, Python {platform.python_version()}"


# The epilogs are laid out by hand, each line within 80 columns (tests/report/test_widths.py checks it).
EXAMPLES = """\
examples:
  kernelcast predict train.py:build --gpu h100
      top ops, sync points and a summary for an H100
  kernelcast predict example:gpt --gpu a100 --json gpt_a100.json
      the built-in GPT on an A100, also saved as JSON
  kernelcast report train.py:build --gpu h100,a100,l4 -o report.html
      one HTML file: roofline, timeline, advice, 3 GPUs
  kernelcast report gpt_a100.json -o gpt.html
      a saved prediction (no torch needed)
  kernelcast compare gpt_a100.json gpt_h100.json
      what changed between two predictions
  kernelcast capture train.py:build -o step.json
      save the capture; predict it on other GPUs later
  kernelcast devices
      the GPUs kernelcast knows
"""

WORKLOAD_CONTRACT = """
the workload (FILE.py:build; a bare FILE.py means its build):
  A Python file with a function that returns (step, args); step(*args) runs
  one step (forward, backward, optimizer) on device "cuda". Its keyword
  arguments, if any, come from --arg NAME=VALUE. kernelcast runs build() and
  two steps on fake CUDA tensors (no GPU, no memory used) and records the
  second, so optimizer state exists. The file's folder is importable while it
  loads; example:NAME names a built-in one (`kernelcast examples`).

    import torch

    def build():
        model = torch.nn.Linear(4096, 4096).cuda()
        opt = torch.optim.AdamW(model.parameters())
        x = torch.randn(64, 4096, device="cuda")

        def step(x):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad()

        return step, (x,)
"""

REPORT_EXAMPLES = """\
examples:
  kernelcast report example:gpt --gpu h100 -o gpt.html
  kernelcast report train.py:build --gpu h100,a100,l4 -o report.html
      three GPUs side by side
  kernelcast report step.json --gpu b200
      a saved capture
  kernelcast report prediction.json -o prediction.html
      a saved prediction (no torch)
  kernelcast report train.py:build --gpu h200 --measured measured.json \\
      --figures docs/
"""


ASSUME_HELP = ("the value the step reads back from the GPU at PATH:LINE, where the capture cannot know it (a note "
               "names each such read): True, False or a number, or a list read in turn, e.g. "
               "train.py:40=True*9,False (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelcast", description="Predict what a PyTorch step costs on a GPU, without one.",
        epilog=EXAMPLES + WORKLOAD_CONTRACT, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("predict", help="capture a step and predict its kernels and wall time on a GPU")
    p.add_argument("workload", help="FILE.py:build, example:NAME, or a capture saved as .json")
    p.add_argument("--gpu", default=DEFAULT_GPU, help=f"target GPU (default {DEFAULT_GPU}; see `kernelcast devices`)")
    p.add_argument("--json", metavar="OUT", help="also write the prediction as JSON")
    p.add_argument("--top", type=int, default=15, help="rows in the table of top ops")
    p.add_argument("--save-capture", metavar="OUT", help="also save the capture (re-predict later without torch)")
    p.add_argument("--trace", metavar="OUT", help="also write the predicted timeline as a Perfetto/Chrome trace")
    p.add_argument("--world-size", type=int, default=1, metavar="N",
                   help="capture the step as rank 0 of N ranks (fake process group; default 1: one GPU)")
    p.add_argument("--interconnect", metavar="LINK",
                   help="GPU-to-GPU link for collectives, e.g. nvlink, pcie4, ib-ndr (default: the GPU's own)")
    p.add_argument("--arg", action="append", metavar="NAME=VALUE",
                   help="a keyword argument for build(), typed from its default (repeatable), e.g. --arg batch=16")
    p.add_argument("--assume", action="append", metavar="PATH:LINE=VALUE", help=ASSUME_HELP)
    p.add_argument("--expandable-segments", action="store_true",
                   help="predict memory with the allocator's expandable_segments:True")
    p.add_argument("--no-fixes", action="store_true",
                   help="when the step does not fit, do not re-predict what would make it fit")
    p.add_argument("--compile", metavar="MODE", choices=("default", "reduce-overhead", "max-autotune"),
                   help="predict the step as torch.compile(step, mode=MODE) runs it: default, reduce-overhead "
                        "(CUDA graphs) or max-autotune (needs the triton package)")
    p.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    p.set_defaults(func=_cmd_predict)

    f = sub.add_parser("fit", help="the largest batch (or other build() argument) whose step fits a GPU's memory")
    f.add_argument("workload", help="FILE.py:build or example:NAME (build() takes the argument)")
    f.add_argument("--gpu", default=DEFAULT_GPU, help=f"target GPU (default {DEFAULT_GPU})")
    f.add_argument("--arg-range", required=True, metavar="NAME=LOW..HIGH",
                   help="the build() argument to search and its range, e.g. batch=1..1024")
    f.add_argument("--arg", action="append", metavar="NAME=VALUE", help="other build() arguments (repeatable)")
    f.add_argument("--assume", action="append", metavar="PATH:LINE=VALUE", help=ASSUME_HELP)
    f.add_argument("--json", metavar="OUT", help="also write max_batch, first_oom_batch and the prediction there")
    f.add_argument("--world-size", type=int, default=1, metavar="N", help="capture as rank 0 of N ranks")
    f.add_argument("--interconnect", metavar="LINK", help="GPU-to-GPU link for collectives")
    f.add_argument("--expandable-segments", action="store_true",
                   help="predict memory with the allocator's expandable_segments:True")
    f.add_argument("--margin", type=_percent, default=FIT_MARGIN * 100, metavar="PCT",
                   help=f"the share of usable memory to leave free for what the prediction can miss "
                        f"(default {FIT_MARGIN * 100:g}%%)")
    f.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    f.set_defaults(func=_cmd_fit)

    a = sub.add_parser("advise", help="the fixes that would make a step faster, each applied and predicted again")
    a.add_argument("workload", help="FILE.py:build or example:NAME")
    a.add_argument("--gpu", default=DEFAULT_GPU, help=f"target GPU (default {DEFAULT_GPU})")
    a.add_argument("--arg", action="append", metavar="NAME=VALUE", help="build() arguments (repeatable)")
    a.add_argument("--assume", action="append", metavar="PATH:LINE=VALUE", help=ASSUME_HELP)
    a.add_argument("--json", metavar="OUT", help="also write the fixes, their predicted steps and costs there")
    a.add_argument("--world-size", type=int, default=1, metavar="N", help="capture as rank 0 of N ranks")
    a.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    a.set_defaults(func=_cmd_advise)

    w = sub.add_parser("sweep", help="step time and throughput against a build() argument (the batch size)")
    w.add_argument("workload", help="FILE.py:build or example:NAME (build() takes the argument)")
    w.add_argument("--gpu", default=DEFAULT_GPU, help=f"target GPU (default {DEFAULT_GPU})")
    w.add_argument("--arg-range", required=True, metavar="NAME=LOW..HIGH",
                   help="the build() argument and its range, e.g. batch=1..256 (low, powers of two, high)")
    w.add_argument("--arg", action="append", metavar="NAME=VALUE", help="other build() arguments (repeatable)")
    w.add_argument("--assume", action="append", metavar="PATH:LINE=VALUE", help=ASSUME_HELP)
    w.add_argument("--json", metavar="OUT", help="also write the points there")
    w.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    w.set_defaults(func=_cmd_sweep)

    c = sub.add_parser("capture", help="capture a step's ops to a JSON file")
    c.add_argument("workload", help="FILE.py:build or example:NAME")
    c.add_argument("-o", "--output", required=True, help="where to write the capture")
    c.add_argument("--gpu", default=DEFAULT_GPU, help="target GPU (decides e.g. the attention backend)")
    c.add_argument("--world-size", type=int, default=1, metavar="N",
                   help="capture the step as rank 0 of N ranks (fake process group; default 1: one GPU)")
    c.add_argument("--arg", action="append", metavar="NAME=VALUE",
                   help="a keyword argument for build(), typed from its default (repeatable), e.g. --arg batch=16")
    c.add_argument("--assume", action="append", metavar="PATH:LINE=VALUE", help=ASSUME_HELP)
    c.add_argument("--compile", metavar="MODE", choices=("default", "reduce-overhead", "max-autotune"),
                   help="predict the step as torch.compile(step, mode=MODE) runs it: default, reduce-overhead "
                        "(CUDA graphs) or max-autotune (needs the triton package)")
    c.set_defaults(func=_cmd_capture)

    k = sub.add_parser("calibrate", help="measure this machine's GPU with microbenchmarks -> device profile (GPU)")
    k.add_argument("--gpu", required=True, help="which catalogue GPU this is (e.g. h200)")
    k.add_argument("--out", required=True, help="where to write the profile JSON")
    k.add_argument("--quick", action="store_true", help="fewer shapes (a smoke test)")
    k.add_argument("--raw", metavar="OUT", help="also save the raw microbenchmark results")
    k.add_argument("--from-raw", metavar="RAW", help="rebuild the profile from saved raw results (no GPU needed)")
    k.add_argument("--sweep", action="store_true",
                   help="also the designed sweep of GEMM, conv and attention shapes (a few minutes)")
    k.add_argument("--sweep-budget", type=float, metavar="S", help="stop the sweep after S seconds")
    k.add_argument("--sections", metavar="A,B", help="only these microbenchmark sections (e.g. extras2), no host "
                   "costs: a supplement to a full profile's raw results")
    k.set_defaults(func=_cmd_calibrate)

    m = sub.add_parser("measure", help="time a step on this machine's GPU: step time, kernels per op (GPU)")
    m.add_argument("workload", help="FILE.py:build or example:NAME")
    m.add_argument("--json", metavar="OUT", help="also write the measurement as JSON")
    m.add_argument("--top", type=int, default=15, help="ops to list")
    m.add_argument("--trace", metavar="OUT", help="also save the profiled step as a Perfetto/Chrome trace")
    m.set_defaults(func=_cmd_measure)

    v = sub.add_parser("validate", help="predict and measure a step, side by side per op class (GPU)")
    v.add_argument("workload", help="FILE.py:build or example:NAME")
    v.add_argument("--gpu", default=DEFAULT_GPU, help="the catalogue GPU this machine has")
    v.add_argument("--json", metavar="OUT", help="also write the comparison as JSON")
    v.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    v.set_defaults(func=_cmd_validate)

    r = sub.add_parser("report", help="one self-contained HTML report: summary, roofline, timeline, top ops, advice",
                       epilog=REPORT_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("target", help="FILE.py:build, example:NAME, a capture saved as .json, or a prediction saved "
                                  "with --json (no torch needed for that one)")
    r.add_argument("--gpu", help=f"target GPU, or several side by side: h100,a100,l4 (default {DEFAULT_GPU}; "
                                 "a saved prediction's own GPU)")
    r.add_argument("-o", "--output", default="report.html", help="the HTML file to write (default report.html)")
    r.add_argument("--measured", metavar="JSON", help="a `kernelcast measure --json` or `validate --json` result: "
                                                      "measured points beside the predicted ones on the roofline")
    r.add_argument("--figures", metavar="DIR", help="also write the roofline and timeline as PNG and SVG into DIR")
    r.add_argument("--top", type=int, default=15, help="rows in the table of top ops")
    r.add_argument("--world-size", type=int, default=1, metavar="N",
                   help="capture the step as rank 0 of N ranks (fake process group; default 1: one GPU)")
    r.add_argument("--interconnect", metavar="LINK", help="GPU-to-GPU link for collectives (see predict)")
    r.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    r.set_defaults(func=_cmd_report)

    cmp = sub.add_parser("compare", help="what changed between two saved predictions (summary, ops, sync points)")
    cmp.add_argument("a", help="a prediction saved with `kernelcast predict ... --json`")
    cmp.add_argument("b", help="another one")
    cmp.add_argument("--top", type=int, default=15, help="ops to list, largest change first")
    cmp.set_defaults(func=_cmd_compare)

    d = sub.add_parser("devices", help="list the GPUs kernelcast has data for, and how each is modelled")
    d.add_argument("--interconnects", action="store_true", help="list the GPU-to-GPU links instead")
    d.set_defaults(func=_cmd_devices)

    e = sub.add_parser("examples", help="list the built-in example workloads")
    e.set_defaults(func=_cmd_examples)
    return parser


PROFILE_HELP = ("a device profile from `kernelcast calibrate --out FILE` on your own GPU: its GPU's kernels and host "
                "costs are predicted from it in place of the shipped data")


# Commands that capture on fake CUDA and exit: run() switches the automatic cyclic collector off for them
# (gc_pause.one_shot_process). The GPU commands (calibrate, measure, validate) keep it: their cycles may hold real
# CUDA memory.
ONE_SHOT_COMMANDS = ("predict", "capture", "fit", "advise", "sweep", "report")


def main(argv: list[str] | None = None, one_shot: bool = False) -> int:
    """The CLI; one_shot: this process ends after the command (run()), so a capturing command may leave its
    cycles uncollected."""
    args = build_parser().parse_args(argv)
    if one_shot and args.command in ONE_SHOT_COMMANDS:
        from kernelcast.gc_pause import one_shot_process

        one_shot_process()
    try:
        if getattr(args, "profile", None):
            from kernelcast.profiles import use_profile

            use_profile(args.profile)
        from kernelcast.capture.host_reads import parse_assume, stated_reads

        with stated_reads([parse_assume(spec) for spec in getattr(args, "assume", None) or ()]):
            return args.func(args)
    except KernelcastError as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"kernelcast: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


def run() -> NoReturn:
    """The `kernelcast` command: main(), then exit without tearing the interpreter down. A capture leaves
    millions of objects (torch's, the model library's, fake tensors) whose one-by-one destruction at exit took
    1.8 s of a 13 s Llama-7B prediction (benchmarks/capture_speed.py); everything kernelcast writes is closed
    by then (outputs are written atomically), so only the standard streams need flushing."""
    code = main(one_shot=True)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    os._exit(code)
