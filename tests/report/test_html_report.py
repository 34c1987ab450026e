"""`kernelcast report`: one self-contained HTML file (figures inline, nothing loaded); `kernelcast compare`; the
notebook display of a prediction."""

import json
import re

import pytest
from matplotlib.figure import Figure

from kernelcast.cli import main
from kernelcast.records import PredictionRecord
from kernelcast.report.html import CSP, notebook_html, render_report
from report_records import small_record

# A training step with a sync point (.item()) on a source line the report must show.
TRAIN_PY = """\
import torch


def build():
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64, device="cuda")

    def step(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(loss.item())

    return step, (x,)
"""
URL = re.compile(r"""(?:src|href)\s*=\s*["'](?!data:|#)""", re.I)


def _figures(page: str) -> dict[str, int]:
    return {kind: page.count(f'<figure class="{kind}"') for kind in ("roofline", "timeline")}


def test_page_holds_everything_inline():
    page = render_report([small_record()])
    assert page.startswith("<!DOCTYPE html>") and f'content="{CSP}"' in page
    assert _figures(page) == {"roofline": 1, "timeline": 1}
    assert page.count('src="data:image/png;base64,') == 2
    assert not URL.search(page) and "<script" not in page  # loads nothing, runs nothing
    for shown in ("host-bound", "train.py:12 in step", "read it every N steps", "aten.foo.default: time unknown",
                  "a note the report must show", "Top ops by predicted time", "51.0 µs", "GPU idle"):
        assert shown in page, shown


def test_several_gpus_side_by_side():
    records = [small_record(), small_record(gpu="a100-80gb", gpu_name="NVIDIA A100 SXM4 80GB", step_time_us=90.0)]
    page = render_report(records)
    assert "Side by side" in page and "repeat(auto-fit, " in page
    assert _figures(page) == {"roofline": 2, "timeline": 2}
    assert 'id="roofline-h100-sxm"' in page and 'id="roofline-a100-80gb"' in page
    assert "<td>90.0 µs</td>" in page


def test_text_is_escaped():
    page = render_report([small_record(notes=("<script>alert(1)</script>",))])
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_notebook_display_and_plots(tmp_path):
    rec = small_record()
    fragment = notebook_html(rec)
    assert fragment.startswith('<div class="kernelcast"><style>.kernelcast ') and _figures(fragment)["roofline"] == 1


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    folder = tmp_path_factory.mktemp("workload")
    (folder / "train.py").write_text(TRAIN_PY)
    return folder


@pytest.fixture(scope="module")
def saved(workload):
    """A capture and its prediction on an H100, saved as the CLI saves them."""
    capture, prediction = workload / "step.json", workload / "h100.json"
    assert main(["predict", f"{workload / 'train.py'}:build", "--gpu", "h100", "--save-capture", str(capture),
                 "--json", str(prediction)]) == 0
    return capture, prediction


@pytest.mark.slow
def test_prediction_object_in_a_notebook(saved):
    from kernelcast.api import predict
    from kernelcast.records import Capture

    pred = predict(Capture.load(saved[0]), gpu="h100")
    html = pred._repr_html_()
    assert _figures(html) == {"roofline": 1, "timeline": 1} and "print(loss.item())" not in html  # not source text
    assert isinstance(pred.plot_roofline(), Figure) and isinstance(pred.plot_timeline(), Figure)


@pytest.mark.slow
def test_report_of_a_workload_on_three_gpus(workload, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", f"{workload / 'train.py'}:build", "--gpu", "h100,a100,l4", "-o", str(out),
                 "--figures", str(tmp_path)]) == 0
    page = out.read_text()
    assert _figures(page) == {"roofline": 3, "timeline": 3} and "Side by side" in page
    assert "train.py:14 in step" in page and "item" in page  # the sync point with its source line
    # what the CLI prints of memory and the fit, per GPU (issue 34: the report had no memory section)
    assert page.count("<h3>Memory</h3>") == 3 and "max_memory_allocated over the step" in page
    assert "fits on NVIDIA L4 24GB" in page
    assert page.count("<h3>Stream hazards</h3>") == 3
    for gpu in ("h100-sxm", "a100-80gb", "l4"):
        for kind in ("roofline", "timeline"):
            assert (tmp_path / f"{kind}_{gpu}.png").stat().st_size > 0
            assert (tmp_path / f"{kind}_{gpu}.svg").read_text().lstrip().startswith("<?xml")
    assert "wrote" in capsys.readouterr().out


def test_report_of_a_saved_capture_and_a_saved_prediction(saved, tmp_path):
    capture, prediction = saved
    assert main(["report", str(capture), "--gpu", "b200", "-o", str(tmp_path / "b200.html")]) == 0
    assert "NVIDIA B200" in (tmp_path / "b200.html").read_text()
    assert main(["report", str(prediction), "-o", str(tmp_path / "h100.html")]) == 0
    assert _figures((tmp_path / "h100.html").read_text()) == {"roofline": 1, "timeline": 1}


def test_measured_points_from_a_measurement(saved, tmp_path):
    """A `kernelcast measure --json` result: [op, module, kernel, µs, launch chain] per kernel, in launch order."""
    record = PredictionRecord.load(saved[1])
    kernels = [[op.op.split(".")[1], "", "kernel", op.time_us * 1.5, ["aten::" + op.op.split(".")[1]]]
               for op in record.ops for _ in range(op.kernels)]
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "kernels": kernels}))
    assert main(["report", str(saved[1]), "--measured", str(measured), "-o", str(tmp_path / "m.html")]) == 0
    page = (tmp_path / "m.html").read_text()
    assert "Hollow points: measured." in page and "on the NVIDIA H100 80GB HBM3" in page


@pytest.mark.parametrize("argv, message", [
    (["report", "missing.json"], "not found: missing.json"),
    (["report", "example:gpt", "--gpu", "h1000"], "unknown GPU 'h1000'"),
    (["report", "example:gtp"], "unknown example 'gtp'"),
    (["report", "example:gpt", "-o", "no/such/folder/r.html"], "folder no/such/folder does not exist"),
    (["compare", "missing.json", "other.json"], "not found: missing.json"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_saved_prediction_is_for_its_own_gpu(saved, capsys):
    assert main(["report", str(saved[1]), "--gpu", "a100"]) == 2
    assert "is a prediction for the NVIDIA H100 SXM5 80GB, not the NVIDIA A100" in capsys.readouterr().err


def test_compare_shows_what_changed(saved, tmp_path, capsys):
    other = tmp_path / "l4.json"
    assert main(["predict", str(saved[0]), "--gpu", "l4", "--json", str(other)]) == 0
    capsys.readouterr()
    assert main(["compare", str(saved[1]), str(other), "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 SXM5 80GB" in out and "NVIDIA L4" in out and "other GPU" in out
    assert re.search(r"GPU time\s+\S+ [µm]?s\s+\S+ [µm]?s\s+\+\d", out)  # an L4's kernels are slower: a + change
    assert "Ops whose predicted time changed most (top 5)" in out


def test_compare_refuses_a_capture(saved, capsys):
    assert main(["compare", str(saved[0]), str(saved[1])]) == 2
    assert "is not a prediction" in capsys.readouterr().err


def test_a_long_workload_name_wraps_the_figure_titles():
    """Issue 34: the timeline's one-line title ran past the figure's edge for a long workload path."""
    import dataclasses

    from kernelcast.report.roofline import ROOFLINE_TITLE_CHARS, plot_roofline
    from kernelcast.report.timeline_plot import TITLE_CHARS, plot_timeline

    rec = dataclasses.replace(small_record(), workload="/home/someone/projects/a/long/path/to/train_resnet50.py:build")
    for fig, chars in ((plot_timeline(rec), TITLE_CHARS), (plot_roofline(rec), ROOFLINE_TITLE_CHARS)):
        title = fig.axes[0].get_title()
        assert "train_resnet50.py" in title.replace("\n", "") and "\n" in title
        assert all(len(line) <= chars for line in title.splitlines())
