"""Every command's output at 80 and 120 columns (issue 34): no line wider than the output, no name split over lines,
no number parted from its unit, rows of one op that still read apart when columns drop."""

import dataclasses
import io
import re
import subprocess
import sys

import pytest
from rich.console import Console

from kernelcast.cli import build_parser
from kernelcast.records.memory import MIB
from kernelcast.report import print_prediction
from kernelcast.report.compare import changes_table, summary_table
from kernelcast.report.whatif_text import fit_progress_line, fit_result_lines, fit_search_line
from helpers import subprocess_env
from report_records import small_record

WIDTHS = (80, 120)
# a number at a line's end whose unit starts the next line: "1.42" / "GiB ..."
UNIT_PARTED = re.compile(r"\d\s*\n\s*(µs|ms|s|GiB|MiB|KiB|B|%)\b")


def _fits(text: str, width: int) -> None:
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width, [line for line in lines if len(line.rstrip()) > width]
    assert not UNIT_PARTED.search(text), UNIT_PARTED.search(text).group(0)


def _rendered(width: int, *tables) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    for table in tables:
        console.print(table)
    return console.export_text()


def _two_records():
    """Two predictions of one step: the second on another GPU, each op 40% faster, one op run only by the first."""
    a = small_record()
    ops = list(a.ops)
    # one layer's forward and backward matmul: the same op from the same module, told apart only by the phase
    ops[1] = dataclasses.replace(ops[1], phase="backward")
    ops[2] = dataclasses.replace(ops[2], op="aten._scaled_dot_product_flash_attention_backward.default",
                                 module="GPT2LMHeadModel.transformer.h.3.attn")
    a = dataclasses.replace(a, ops=tuple(ops))
    faster = tuple(dataclasses.replace(op, time_us=op.time_us * 0.6) for op in ops[:2] + ops[3:])
    b = dataclasses.replace(a, gpu="a100-80gb", gpu_name="NVIDIA A100 SXM4 80GB", ops=faster, step_time_us=30.0)
    return a, b


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_fits_and_its_rows_read_apart(width):
    a, b = _two_records()
    names = ("gpt_h100_batch16_bf16_run", "gpt_a100_batch16_bf16_run")
    text = _rendered(width, summary_table(a, b, names, width=width), changes_table(a, b, names, width=width))
    _fits(text, width)
    rows = text.split("changed most")[1].splitlines()
    # every time and change is whole (only an op name may end in an ellipsis)
    cells = [c for line in rows for c in re.split(r"\s{2,}", line.strip())[1:]]
    assert cells and not any(c.endswith("…") for c in cells), cells
    # the two mm rows (forward and backward) and the op the second GPU does not run
    mm = [i for i, line in enumerate(rows) if line.strip().startswith("mm ")]
    assert len(mm) == 2
    if width < 120:  # the phase went under the op
        assert {rows[i + 1].strip().split(":")[0] for i in mm} == {"forward", "backward"}
    assert any(line.strip().startswith("_scaled_dot_product") and " - " in f" {line} " for line in rows)


def test_compare_of_one_prediction_with_itself_says_nothing_changed(tmp_path):
    path = tmp_path / "p.json"
    import json
    path.write_text(json.dumps(small_record().to_json()))
    out = subprocess.run([sys.executable, "-m", "kernelcast", "compare", str(path), str(path)], capture_output=True,
                         text=True, env={**subprocess_env(), "COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    assert "no op's predicted time changed" in out.stdout
    _fits(out.stdout, 80)


@pytest.mark.parametrize("width", WIDTHS)
def test_predict_keeps_rows_of_one_op_apart_when_phase_and_module_drop(width):
    record = small_record()
    ops = list(record.ops)
    ops[1] = dataclasses.replace(ops[1], phase="backward")  # op 0's twin: same op, module and source
    console = Console(width=width, record=True, file=io.StringIO())
    print_prediction(dataclasses.replace(record, ops=tuple(ops)), console=console)
    text = console.export_text()
    _fits(text, width)
    lines = text.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("op "))
    mm = [i for i, line in enumerate(lines) if line.lstrip().startswith("mm ")]
    if "phase" not in header:
        assert len({lines[i + 1].strip() for i in mm}) == 2, [lines[i + 1] for i in mm]


def _oom_record():
    fix = {"name": "batch=21 (from 32; batch=22 does not fit with a 5% margin)", "peak_memory_bytes": 18954 * MIB,
           "reserved_memory_bytes": 20500 * MIB, "fits": True, "step_time_us": 558880.0, "note": ""}
    failed = {"name": "activation checkpointing of each layer", "peak_memory_bytes": 18534 * MIB,
              "reserved_memory_bytes": 21463 * MIB, "fits": False, "step_time_us": 952660.0,
              "note": "fails in nll_loss_backward at /home/someone/projects/models/train_gpt.py:63 in forward"}
    relative = {**failed, "name": "bf16 weights", "note": "fails in mm at src/models/llama_block.py:12 in forward"}
    fit = {"fits": False, "usable_bytes": 22374 * MIB, "capacity_bytes": 22886 * MIB, "cuda_context_bytes": 512 * MIB,
           "fixes": [fix, failed, relative],
           "oom": {"stage": "warmup", "op": None, "source": None, "segment_bytes": 6287 * MIB,
                   "allocated_bytes": 17561 * MIB, "reserved_bytes": 17571 * MIB}}
    mem = {"peak_memory_bytes": 27955 * MIB, "resident_memory_bytes": 1454 * MIB, "reserved_memory_bytes": 17571 * MIB,
           "peak_reserved_memory_bytes": 36536 * MIB, "fits": fit, "memory_by_category": {"parameters": 475 * MIB},
           "peak_op": None}
    return small_record(memory=mem, gpu_name="NVIDIA L4 24GB")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_out_of_memory_block_wraps_under_its_bullets(width):
    console = Console(width=width, record=True, file=io.StringIO())
    print_prediction(_oom_record(), console=console)
    text = console.export_text()
    _fits(text, width)
    block = text.split("What would make it fit")[1].split("Top ops")[0].splitlines()[1:]
    for line in block:  # a bullet, or a continuation under its words
        assert line.startswith("  - ") or line.startswith("    "), line
    assert "/home/someone" not in text and "train_gpt.py:63" in text  # a path said by its file and line
    assert "at llama_block.py:12 in forward" in text.replace("\n", " ").replace("    ", " ")  # a relative one too


class _Fit:
    def __init__(self, fits, oom=None):
        self.fits, self.usable_bytes, self.peak_reserved_bytes, self.oom = fits, 22374 * MIB, 17676 * MIB, oom


class _Pred:
    def __init__(self, fit, peak):
        self.memory = type("M", (), {"fit": fit, "peak_bytes": peak})()


def test_fit_says_which_request_fails_not_a_reserved_figure_below_the_peak():
    """`batch=32: out of memory (peak 27.30 GiB allocated, 17.26 GiB reserved at most ...)` read as a
    contradiction: the replay stops at the failing request, so its reserved figure is not the step's need."""
    from kernelcast.predict.memory import OutOfMemoryAt

    oom = OutOfMemoryAt("warmup", None, 6287 * MIB, 6287 * MIB, 17561 * MIB, 17571 * MIB)
    line = fit_progress_line("batch", 32, False, _Pred(_Fit(False, oom), 27955 * MIB), 5)
    assert "out of memory in the warmup: asks for 6.14 GiB with 17.15 GiB allocated and 17.16 GiB reserved" in line
    assert "reserved at most" not in line


def test_fit_lines_wrap_to_the_output(monkeypatch, capsys):
    from kernelcast.cli import _say

    monkeypatch.setenv("COLUMNS", "80")
    _say(fit_search_line("batch", 1, 1024, "NVIDIA L4 24GB", 5))
    _say(fit_progress_line("batch", 21, False, _Pred(_Fit(True), 18954 * MIB), 5))
    out = capsys.readouterr().out
    _fits(out, 80)
    lines = out.splitlines()
    second = next(i for i, line in enumerate(lines) if line.startswith("  - batch=21"))
    assert lines[second + 1].startswith("    ")  # a continuation hangs under the bullet's words
    result = type("R", (), {"search": type("S", (), {"max_fit": None})(), "prediction": None})()
    assert fit_result_lines(result, "batch", 1, 8, "NVIDIA L4 24GB", 5, "samples")[0].startswith("no batch in 1..8")


def _helps():
    parser = build_parser()
    yield "kernelcast", parser
    for name, sub in parser._subparsers._group_actions[0].choices.items():
        yield name, sub


@pytest.mark.parametrize("width", WIDTHS)
def test_every_help_fits(width, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(width))
    for name, parser in _helps():
        text = parser.format_help()
        assert max(len(line) for line in text.splitlines()) <= width, (name, [
            line for line in text.splitlines() if len(line) > width])


@pytest.mark.parametrize("width", WIDTHS)
def test_advise_wraps_at_word_boundaries_under_each_fix(width, monkeypatch, capsys):
    """advise had wrapped mid-word ("saves 797.5 µs, 1" / "3%")."""
    from kernelcast.cli import _say
    from kernelcast.whatif.advise import Advice, Fix, advice_text

    fixes = (Fix("torch.compile(mode=\"reduce-overhead\") (CUDA graphs)", "re-captured", 33610.0, 20550.0,
                 cost="compile time 45.6 s on this machine, plus Triton's on the device's host; the CUDA graph pool's "
                      "memory is not modelled; peak memory 8.11 GiB -> 4.80 GiB"),
             Fix("batch=16 (compared per 8 samples: the larger step's time / 2 against one of today's)", "re-captured",
                 33610.0, 26240.0, cost="the optimizer sees a 2x larger batch; peak memory 8.11 GiB -> 14.52 GiB"))
    advice = Advice("example:gpt", "h100-sxm", 33610.0, "gpu", fixes, (),
                    (("channels_last", "no 2-d convolutions in NCHW"),))
    monkeypatch.setenv("COLUMNS", str(width))
    _say(advice_text(advice))
    out = capsys.readouterr().out
    _fits(out, width)
    for line in out.splitlines()[2:]:  # every line under the header belongs to a numbered fix or hangs under one
        assert line.startswith(("  1. ", "  2. ", "     ", "  not tried")), line


def test_sweep_rows_fit_80_columns():
    from kernelcast.report.whatif_text import sweep_header, sweep_row, sweep_verdict

    point = type("P", (), {"value": 1024, "step_us": 1_234_567.0, "gpu_us": 987_654.0, "bound": "mixed",
                           "fits": False, "throughput": lambda self: 123_456.7})()
    text = "\n".join([sweep_header("batch", "samples/s"), sweep_row(point), sweep_verdict("batch", 1, 1024, None)])
    _fits(text, 80)
