"""The figures in docs/figures/, made with the committed code (no GPU needed):

    python3 scripts/eval/make_figures.py docs/figures

- the built-in GPT and CNN training steps (`example:gpt`, `example:cnn`) predicted on the H200: roofline and
  timeline, PNG;
- one measured-vs-predicted roofline from a device run: a zoo workload (default qwen2_train) captured here and
  predicted for the H200, with the H200's measured kernels from validation/zoo_measured.json.gz (torch 2.11)
  matched to the predicted ops as report/measured.py does (the outermost recorded aten op of each kernel's
  launch chain, then the ops of that op family in launch order). A point's measured FLOP/s is its predicted
  FLOPs over its matched kernels' measured time: the FLOPs are counted once, by kernelcast; only the time is
  measured.

The model's own Python between ops is timed on this machine while it captures; on a loaded machine a preempted
process shows up as a gap of milliseconds before some op (a long purple block in the timeline) that is the
machine's, not the model's. The examples are captured CAPTURES times and the capture with the least model Python
in all is drawn; the script prints each capture's total.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
from pathlib import Path

import kernelcast  # noqa: F401  (before torch)

import matplotlib

matplotlib.use("Agg")

from kernelcast.api import capture_file  # noqa: E402
from kernelcast.capture.workload import load_build, on_sys_path  # noqa: E402
from kernelcast.predict import predict_capture  # noqa: E402
from kernelcast.report.measured import kernels_of, match_kernels  # noqa: E402
from kernelcast.report.roofline import plot_roofline  # noqa: E402
from kernelcast.report.timeline_plot import plot_timeline  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GPU = "h200"
EXAMPLES = ("gpt", "cnn")
DPI = 110


def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=DPI)
    print(f"wrote {path}")


CAPTURES = 4


def quietest_capture(spec: str):
    """Of CAPTURES captures of `spec`, the one with the least model Python in all (the fewest preemptions)."""
    captures = [capture_file(spec, GPU) for _ in range(CAPTURES)]
    totals = [sum(op.python_us for op in cap.ops) for cap in captures]
    best = min(range(CAPTURES), key=totals.__getitem__)
    print(f"{spec}: model Python per capture {', '.join(f'{t / 1e3:.2f}' for t in totals)} ms; drawn: "
          f"{totals[best] / 1e3:.2f} ms")
    return captures[best]


def example_figures(out: Path, saved: dict[str, Path]) -> None:
    from kernelcast.records import Capture

    for name in EXAMPLES:
        cap = Capture.load(saved[name]) if name in saved else quietest_capture(f"example:{name}")
        record = predict_capture(cap, GPU).record()
        _save(plot_roofline(record), out / f"{name}_roofline_{GPU}.png")
        _save(plot_timeline(record), out / f"{name}_timeline_{GPU}.png")


def zoo_measured_roofline(out: Path, name: str, measured_path: Path) -> None:
    from kernelcast.capture import capture_workload

    doc = json.load(gzip.open(measured_path, "rt"))
    (entry,) = [w for w in doc["workloads"] if w["name"] == name]
    path, func = entry["workload"].split(":")
    build, folder = load_build(f"{ROOT / path}:{func}")
    with on_sys_path(folder):
        cap = capture_workload(build, GPU, workload=f"zoo {name}")
    # the device's torch version: its launch rules differ by version (as scripts/eval/zoo_validate.py does)
    cap = dataclasses.replace(cap, settings=dataclasses.replace(cap.settings, torch_version=doc["torch"]))
    record = predict_capture(cap, GPU).record()
    kernels, _ = kernels_of(entry)
    match = match_kernels(record, kernels, device=f"{doc['device']} (torch {doc['torch']})")
    caption = (f"{match.caption()} Source: validation/zoo_measured.json.gz, made with scripts/eval/make_figures.py.")
    fig = plot_roofline(record, measured=match.time_us_by_op, measured_label=f"measured ({doc['device']})",
                        caption=caption)
    _save(fig, out / f"zoo_{name}_roofline_measured_{GPU}.png")
    measured_total = sum(match.time_us_by_op.values())
    print(f"{name}: {match.matched_kernels} kernels matched ({measured_total:.0f} µs measured vs "
          f"{record.gpu_time_us:.0f} µs predicted), {match.unmatched_kernels} unmatched ({match.unmatched_us:.0f} µs)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--zoo", default="qwen2_train", help="the zoo workload of the measured roofline")
    parser.add_argument("--measured", type=Path, default=ROOT / "validation" / "zoo_measured.json.gz")
    parser.add_argument("--only", choices=("examples", "zoo"))
    parser.add_argument("--capture", action="append", default=[], metavar="NAME=PATH",
                        help="draw example NAME from a capture saved at a quiet moment (`kernelcast capture`)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    saved = {name: Path(path) for name, path in (c.split("=", 1) for c in args.capture)}
    if args.only != "zoo":
        example_figures(args.out, saved)
    if args.only != "examples":
        zoo_measured_roofline(args.out, args.zoo, args.measured)
    return 0


if __name__ == "__main__":
    sys.exit(main())
