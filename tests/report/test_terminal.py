"""The terminal: tables that fit the console, times in µs / ms / s, a progress display only on a terminal, and
`--help` with examples and the build() contract."""

import io

import pytest
from rich.console import Console

from kernelcast import progress
from kernelcast.cli import build_parser, main
from kernelcast.report import ops_table, print_prediction
from kernelcast.report.format import short_source, si, tail, time_text
from report_records import small_record


@pytest.mark.parametrize("us, text", [
    (0.42, "0.4 µs"), (812.34, "812.3 µs"), (999.9, "999.9 µs"), (1000.0, "1.00 ms"),
    (31363.89, "31.36 ms"),  # the "31363.89 ms" was 31363890 µs: it reads 31.36 s now
    (31363890.0, "31.36 s"), (-1500.0, "-1.50 ms"),
])
def test_times_grow_their_unit(us, text):
    assert time_text(us) == text


def test_short_forms():
    assert si(1.3e12) == "1.3 T" and si(2.5e9, "B") == "2.5 GB" and si(12, "B") == "12 B"
    assert short_source("src/kernelcast/examples/gpt.py:37 in forward") == "gpt.py:37 in forward"
    assert tail("GPT2LMHeadModel.transformer.h.*.attn.c_attn", 16) == "…h.*.attn.c_attn"


def _render(width: int, top: int = 15) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    print_prediction(small_record(), console=console, top=top)
    return console.export_text()


def test_the_table_fits_80_columns_with_the_source_under_its_op():
    text = _render(80)
    assert max(len(line) for line in text.splitlines()) <= 80
    lines = text.splitlines()
    op_line = next(i for i, line in enumerate(lines) if line.lstrip().startswith("mm "))
    assert lines[op_line + 1].strip() == "train.py:10 in step"  # the source line, under its op
    header = next(line for line in lines if line.lstrip().startswith("op "))
    assert "time" in header and "% step" in header and "bound" in header
    assert "bytes" not in header and "source" not in header  # dropped first / moved under the op


def test_a_narrow_table_shows_the_module_where_the_source_line_cannot_tell_rows_apart():
    """A model called once from the step gives every op that call's source line; with the module column dropped,
    two addmm rows read alike unless the module goes under the op instead (a new user's TransformerEncoder)."""
    import dataclasses
    record = small_record()
    ops = list(record.ops)
    ops[2] = dataclasses.replace(ops[2], module="Encoder.layers.*.linear1", time_us=3.0)
    ops[5] = dataclasses.replace(ops[5], module="Encoder.layers.*.linear2", source=ops[2].source, time_us=4.0)
    console = Console(width=60, record=True, file=io.StringIO())  # too narrow for the module column
    print_prediction(dataclasses.replace(record, ops=tuple(ops)), console=console)
    lines = console.export_text().splitlines()
    assert "module" not in next(line for line in lines if line.lstrip().startswith("op "))
    under = [lines[i + 1].strip() for i, line in enumerate(lines) if line.lstrip().startswith("add.Tensor ")]
    assert len(set(under)) == 2 and all(u.endswith(("linear1", "linear2")) for u in under)
    mm = next(i for i, line in enumerate(lines) if line.lstrip().startswith("mm "))
    assert lines[mm + 1].strip() == "train.py:10 in step"  # one row of its op: its source line


def test_columns_come_back_as_the_console_widens():
    def header(width):
        return next(line for line in _render(width).splitlines() if line.lstrip().startswith("op ")).split()

    narrow, middle, wide = header(80), header(120), header(200)
    assert set(narrow) < set(middle) < set(wide)
    assert {"source", "FLOPs", "bytes", "FLOP/B", "phase", "module"} <= set(wide)
    for width in (60, 80, 100, 120, 160):
        assert max(len(line) for line in _render(width).splitlines()) <= width, width


def test_without_a_width_every_column_is_there():
    table = ops_table(small_record())
    assert [c.header for c in table.columns] == ["op", "phase", "module", "source", "calls", "kernels", "FLOPs",
                                                 "bytes", "FLOP/B", "bound", "time", "% step"]


def test_progress_display_only_on_a_terminal():
    piped = Console(file=io.StringIO())
    with progress.progress_display("capturing x", console=piped):
        assert not progress.active()
        progress.stage("recording the step", total=2)
        progress.advance()
    assert piped.file.getvalue() == ""
    tty = Console(file=io.StringIO(), force_terminal=True, width=100)
    with progress.progress_display("capturing x", console=tty):
        assert progress.active()
        progress.stage("recording the step", total=2)
        progress.advance()
    assert not progress.active()
    assert "capturing x: recording the step" in tty.file.getvalue()


def test_library_stages_are_silent_without_a_display():
    progress.stage("nothing shows this")
    progress.advance()
    assert not progress.active()


def test_a_piped_predict_prints_no_progress(tmp_path, capsys):
    (tmp_path / "step.py").write_text(
        "import torch\n\ndef build():\n    x = torch.randn(8, 8, device='cuda')\n    return (lambda x: x @ x), (x,)\n")
    assert main(["predict", f"{tmp_path / 'step.py'}:build", "--gpu", "h100"]) == 0
    out = capsys.readouterr()
    assert out.err == "" and "\x1b[" not in out.out and "step " in out.out


def test_help_has_examples_and_the_build_contract():
    text = build_parser().format_help()
    for shown in ("examples:", "kernelcast report train.py:build --gpu h100,a100,l4 -o report.html",
                  "kernelcast compare", "def build():", "return step, (x,)", "returns (step, args)",
                  "report", "compare"):
        assert shown in text, shown
    report_help = build_parser()._subparsers._group_actions[0].choices["report"].format_help()
    assert "--measured" in report_help and "kernelcast report prediction.json" in report_help


def test_launch_bound_advice_only_where_the_gpu_waits():
    # a fresh user's GPU-bound step (0% idle) was told "17 ops are launch-bound ... fuse them with torch.compile"
    from kernelcast.report import advice, host_line

    host_bound = small_record()
    assert any("finish on the GPU before" in line for line in advice(host_bound))
    gpu_bound = small_record(bound="gpu", gpu_idle_fraction=0.0)
    assert not any("finish on the GPU before" in line for line in advice(gpu_bound))
    assert "hidden here" in host_line(gpu_bound) and "torch.compile" not in host_line(gpu_bound)


def test_ops_that_launch_nothing_and_take_no_time_are_left_out_of_the_top_table():
    import dataclasses

    rec = small_record()
    view = dataclasses.replace(rec.ops[0], index=6, op="aten.detach.default", flops=0.0, bytes=0.0, intensity=0.0,
                               kernels=0, time_us=0.0, bound="none")
    table = ops_table(dataclasses.replace(rec, ops=(*rec.ops, view)))
    assert "detach" not in "".join(str(c) for c in table.columns[0]._cells)
    assert table.row_count == len(ops_table(rec).rows)


@pytest.mark.parametrize("columns", [80, 120])
def test_devices_fits_the_terminal_and_honours_columns_in_a_pipe(columns, monkeypatch, capsys):
    """`kernelcast devices` at COLUMNS wide in a pipe (capsys is one): every line within it, every GPU's id
    whole on one line (not folded into `NVID/IA/H100` cells), the legend wrapped at word boundaries."""
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns
    from kernelcast.devices import all_gpus
    for gpu in all_gpus():
        assert any(line.lstrip("│ ").startswith(gpu + " ") for line in lines), gpu
    assert "calibrated" in out and "id" in lines[1] + lines[2]


@pytest.mark.parametrize("columns", [80, 120])
def test_the_link_table_fits_the_terminal_with_its_headers_whole(columns, monkeypatch, capsys):
    """`kernelcast devices --interconnects` at COLUMNS wide: every line within it, no header folded mid-word (it
    had read `efficien` over `cy` at 80 columns), every link's id whole, columns dropped from the last."""
    from kernelcast.devices.interconnects import all_interconnects
    from kernelcast.report.devices import LINK_COLUMNS

    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["devices", "--interconnects"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= columns
    header = next(line for line in lines if line.startswith("┃"))
    shown = [h.strip() for h in header.strip("┃").split("┃")]
    assert shown == list(LINK_COLUMNS[:len(shown)]) and "bus efficiency" in shown
    for link in all_interconnects():
        assert any(line.lstrip("│ ").startswith(link + " ") for line in lines), link


def test_output_width_reads_columns_then_the_pipe_default(monkeypatch):
    from kernelcast.report import PIPE_WIDTH, output_width
    monkeypatch.setenv("COLUMNS", "93")
    assert output_width() == 93
    monkeypatch.delenv("COLUMNS")
    assert output_width() == PIPE_WIDTH  # pytest's stdout is not a terminal


def test_wrapped_lines_keep_words_whole_and_hang_under_their_item():
    from kernelcast.report import wrap_lines
    text = "  1. use torch.compile on this step: saves 797.5 µs, 13% of the step, by fusing launches"
    wrapped = wrap_lines(text, 40).splitlines()
    assert all(len(line) <= 40 for line in wrapped) and len(wrapped) > 1
    assert "13%" in " ".join(wrapped).split() and "µs," in " ".join(wrapped).split()
    assert all(line.startswith("     ") for line in wrapped[1:])  # under "use", not under "1."


@pytest.mark.parametrize("count, text", [(0, "0 syncs"), (1, "1 sync"), (2, "2 syncs")])
def test_counts_agree_with_their_noun(count, text):
    from kernelcast.report.format import plural
    assert plural(count, "sync") == text


def test_a_bare_file_means_its_build(tmp_path):
    from kernelcast.capture.workload import WorkloadError, check_spec
    work = tmp_path / "train.py"
    work.write_text("def build():\n    pass\n")
    assert check_spec(str(work)) == (str(work), "build")
    assert check_spec(f"{work}:make") == (str(work), "make")
    with pytest.raises(WorkloadError, match="not FILE.py:FUNCTION"):
        check_spec("train")  # neither a .py file nor FILE:FUNCTION


def test_an_output_that_cannot_be_created_is_refused_before_the_capture():
    """/proc passes os.access for root, but no file can be made there: refused up front, not after capturing."""
    from kernelcast.errors import KernelcastError
    from kernelcast.outputs import check_writable
    import os
    if not os.path.isdir("/proc"):
        pytest.skip("no /proc")
    with pytest.raises(KernelcastError, match="cannot create a file in /proc|not writable"):
        check_writable("/proc/out.json", "--json")


def test_the_host_block_is_one_item_a_line_and_no_number_loses_its_unit():
    """The host paragraph a new user called very hard to read (about 12 lines of nested colons) is a heading and
    one short item a line; wrapped text never leaves a number at the end of one line and its unit on the next."""
    import re
    from kernelcast.report import host_line, keep_units
    block = host_line(small_record()).splitlines()
    assert block[0].startswith("host: ") and all(line.startswith("  - ") for line in block[1:])
    assert any(line.startswith("  - another CPU: step ") for line in block)
    assert keep_units("peak 10.0 MiB at 1.03 ms") == "peak 10.0\u00a0MiB at 1.03\u00a0ms"
    for width in (60, 80):
        lines = _render(width).splitlines()
        for above, below in zip(lines, lines[1:]):
            assert not (re.search(r"\d$", above.rstrip()) and re.match(r"\s*(µs|ms|MiB|GiB|KiB)\b", below)), below
