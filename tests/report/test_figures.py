"""Roofline and timeline figures: from a record to a matplotlib Figure, with no global state."""

import dataclasses

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (only to check the figures stay out of pyplot's state)
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from kernelcast.report.memory import memory_series  # noqa: E402
from kernelcast.report.roofline import BOUND_COLOURS, plot_roofline, roofline_points, roofs  # noqa: E402
from kernelcast.report.timeline_plot import idle_gaps, lanes, phase_runs, plot_timeline  # noqa: E402
from report_records import ADD_BYTES, ADD_FLOPS, H100, MM_BYTES, MM_FLOPS, small_record  # noqa: E402


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]


def test_plots_are_figures_outside_pyplot():
    before = plt.get_fignums()
    rec = small_record()
    assert isinstance(plot_roofline(rec), Figure) and isinstance(plot_timeline(rec), Figure)
    assert plt.get_fignums() == before  # never registered with pyplot, never shown


def test_roofs_one_per_distinct_peak_with_tensor_cores_apart():
    drawn = roofs(H100)  # fp64 is not a usual roof and no op ran under it
    assert [(r.label, r.tensor_core) for r in drawn] == [
        ("FP8 tensor", True), ("BF16/FP16 tensor", True), ("TF32 tensor", True), ("FP32", False)]
    # 989.4e12 FLOP/s / 3.35e12 B/s = 295.3 FLOP/B
    assert drawn[1].ridge(H100.mem_bw_bytes_per_s) == pytest.approx(295.34, abs=0.01)
    assert "FP64" in [r.label for r in roofs(H100, used={"fp64"})]


def test_roofline_points_group_identical_ops_and_leave_out_those_without_flops():
    points, left_out = roofline_points(small_record())
    # ops 0 and 1 are one point; the two adds differ in source line; copy_ and the .item() read have no FLOPs
    assert [(p.label, p.count) for p in points] == [
        ("aten.mm.default", 2), ("aten.add.Tensor", 1), ("aten.add.Tensor", 1)]
    mm = points[0]
    assert mm.intensity == pytest.approx(MM_FLOPS / MM_BYTES)  # 2^31 / 6 MiB = 341.3 FLOP/B
    assert mm.flops_per_s == pytest.approx(2 * MM_FLOPS / 10e-6)  # two ops' FLOPs in 5 + 5 µs
    assert [op.index for op in left_out] == [3, 4]
    measured, _ = roofline_points(small_record(), measured={0: 6.0, 1: 6.0, 2: 4.0})
    by_time = {p.time_us: p.measured_us for p in measured}  # the points by predicted time: mm 10, adds 4 and 3
    assert by_time == {10.0: 12.0, 4.0: None, 3.0: 4.0}  # op 5 (the 4 µs add) has no measurement


def test_roofline_axes_roofs_ridges_and_colours():
    fig = plot_roofline(small_record())
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "arithmetic intensity (FLOP/byte)"
    assert ax.get_ylabel() == "achieved compute (TFLOP/s)"
    texts = _texts(fig)
    ridges = [t for t in texts if t.startswith("ridge ")]
    assert len(ridges) == 4 and "ridge 295 FLOP/B (BF16/FP16 tensor)" in ridges
    assert any(t.startswith("HBM 3.35 TB/s") for t in texts)
    assert any("not drawn: 2 ops with no FLOPs" in t and "4.0 µs of 21.0 µs" in t for t in texts)
    colours = {matplotlib.colors.to_hex(c.get_facecolors()[0]) for c in ax.collections if len(c.get_facecolors())}
    assert {BOUND_COLOURS["compute"], BOUND_COLOURS["memory"]} <= colours


def test_measured_points_are_drawn_hollow_beside_the_predicted():
    hollow = [c for c in plot_roofline(small_record()).axes[0].collections if not len(c.get_facecolors())]
    assert not hollow
    fig = plot_roofline(small_record(), measured={0: 6.0, 1: 6.0, 2: 4.0}, measured_label="measured (H100)",
                        caption="how the measured points were made")
    hollow = [c for c in fig.axes[0].collections if not len(c.get_facecolors())]
    assert sum(len(c.get_offsets()) for c in hollow) == 2  # the mm point and the first add
    assert "how the measured points were made" in "\n".join(_texts(fig))
    assert "measured (H100)" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_timeline_lanes_from_spans():
    bars = lanes(small_record())
    assert bars.python == [(0, 2.0)]  # op 0's model Python, then its launch
    assert bars.launch[0] == (2.0, 6.0)
    assert bars.sync == [(37, 2.0)] and bars.sync_ops == [4]  # host work ends at 32 + 5; waits 2
    assert sorted(bars.gpu) == [0, 1] and bars.gpu[1] == [(47, 4)]


def test_idle_gaps_between_kernels_on_any_stream():
    assert idle_gaps([(0, 2), (5, 1), (5.5, 1)], 10) == [(2, 3), (6.5, 3.5)]
    # the small record: kernels 8-13, 16-21, 24-27, 32-34, 37-39, 47-51 -> 30 µs idle of 51
    gaps = idle_gaps([b for bs in lanes(small_record()).gpu.values() for b in bs], 51)
    assert sum(w for _, w in gaps) == 30


def test_timeline_figure_marks_lanes_sync_and_the_naive_host_timer():
    fig = plot_timeline(small_record())
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["CPU: Python thread", "GPU: stream 0", "GPU: stream 1"]
    assert ax.get_xlabel() == "time from the step's start (µs)"
    texts = _texts(fig)
    assert "host timer without synchronize: 47.0 µs" in texts and "GPU done: 51.0 µs" in texts
    assert any(t.startswith("sync: item at train.py:12 in step") for t in texts)
    assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"] == [47.0, 51.0]
    assert "GPU idle 30.0 µs of 51.0 µs" in ax.get_title()
    assert phase_runs(small_record()) == [(0, 47, "forward")]


def test_timeline_picks_its_time_unit_by_the_steps_length():
    rec = small_record()
    ms = dataclasses.replace(rec, spans=tuple(dataclasses.replace(s, cpu_end_us=s.cpu_end_us * 100) for s in rec.spans),
                             first_step_us=5100.0)
    assert plot_timeline(ms).axes[0].get_xlabel() == "time from the step's start (ms)"


@pytest.mark.parametrize("raw", [
    [[0.0, 1e9], [20.0, 3e9], [40.0, 2e9]],
    [{"time_us": 0.0, "allocated_bytes": 1e9}, {"time_us": 20.0, "allocated_bytes": 3e9}],
    [{"op_index": 0, "allocated_bytes": 1e9, "reserved_bytes": 4e9}, {"op_index": 5, "allocated_bytes": 2e9,
                                                                       "reserved_bytes": 4e9}],
    {"time_us": [0.0, 20.0], "allocated_bytes": [1e9, 3e9]},
    {"points": [[0.0, 1e9], [20.0, 3e9]], "peak_bytes": 3e9},
])
def test_memory_panel_when_the_prediction_has_a_memory_series(raw):
    rec = small_record(memory_timeline=raw)
    series = memory_series(raw, rec.spans)
    assert series is not None and series.times_us == tuple(sorted(series.times_us))
    fig = plot_timeline(rec)
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "device memory (GB)"


def test_op_index_places_memory_at_the_ops_end():
    series = memory_series([{"op_index": 5, "allocated_bytes": 2.0}, {"op_index": 0, "allocated_bytes": 1.0}],
                           small_record().spans)
    assert series.times_us == (13, 51) and series.bytes_by_name == {"allocated_bytes": (1.0, 2.0)}


def test_no_memory_panel_without_a_series_and_a_note_for_one_it_cannot_read():
    assert len(plot_timeline(small_record()).axes) == 1
    fig = plot_timeline(small_record(memory_timeline={"unexpected": "layout"}))
    assert len(fig.axes) == 1
    assert any("memory_timeline present but not in a layout this report reads" in t for t in _texts(fig))


def test_a_record_without_spans_has_no_timeline():
    with pytest.raises(ValueError, match="without its timeline"):
        plot_timeline(small_record(spans=()))


def test_flops_per_s_of_the_add_point():
    (add,) = [p for p in roofline_points(small_record())[0] if p.time_us == 3.0]
    assert add.flops_per_s == pytest.approx(ADD_FLOPS / 3e-6)  # 2^20 FLOPs in 3 µs
    assert add.intensity == pytest.approx(ADD_FLOPS / ADD_BYTES)  # 1/12 FLOP/B


def test_the_row_after_the_last_op_is_placed_at_the_steps_end():
    """predict/memory.py writes what the step frees as it returns at op_index == len(ops): drawn at the end
    (every real prediction has that row; the figure once refused the whole series for it)."""
    rec = small_record()
    n = len(rec.spans)
    series = memory_series([{"op_index": 0, "allocated_bytes": 1.0}, {"op_index": n, "allocated_bytes": 0.5}],
                           rec.spans)
    assert series is not None and series.times_us[-1] == max(
        s.gpu_end_us if s.gpu_end_us is not None else s.cpu_end_us for s in rec.spans)
    assert memory_series([{"op_index": n + 1, "allocated_bytes": 1.0}], rec.spans) is None


def test_a_short_phase_at_the_end_is_labelled_inside_the_axes():
    """A post-backward run of a few ops at the step's end had its label centred on it, past the right edge."""
    rec = small_record()
    ops = list(rec.ops)
    ops[5] = dataclasses.replace(ops[5], phase="post-backward")  # the last op, 1 of the step's 51 µs
    spans = list(rec.spans)
    spans[5] = dataclasses.replace(spans[5], cpu_start_us=49.5, cpu_end_us=50.5, gpu_start_us=50.5, gpu_end_us=51.0)
    fig = plot_timeline(dataclasses.replace(rec, ops=tuple(ops), spans=tuple(spans)))
    fig.canvas.draw()
    ax = fig.axes[0]
    label = next(t for t in ax.texts if t.get_text() == "post-backward")
    box, axes_box = label.get_window_extent(), ax.get_window_extent()
    assert axes_box.x0 <= box.x0 and box.x1 <= axes_box.x1, (box, axes_box)
