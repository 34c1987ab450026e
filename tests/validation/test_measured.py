"""Measured kernels matched to predicted ops (for measured points on the roofline)."""

import dataclasses

import pytest

from kernelcast.measure import KernelTime, Measurement
from kernelcast.report.measured import family, kernels_of, match_kernels, owner
from report_records import small_record


def _record():
    """mm, add, add_ (both "add" family), a decomposed clone (no kernels of its own) and the copy_ it calls."""
    rec = small_record()
    base = rec.ops[2]
    ops = (rec.ops[0],
           dataclasses.replace(base, index=1, op="aten.add.Tensor"),
           dataclasses.replace(base, index=2, op="aten.add_.Tensor"),
           dataclasses.replace(base, index=3, op="aten.clone.default", kernels=0),
           dataclasses.replace(base, index=4, op="aten.copy_.default", parent=3))
    return dataclasses.replace(rec, ops=ops, spans=())


def test_owner_is_the_outermost_recorded_op_of_the_chain():
    assert owner(["aten::linear", "aten::addmm"], {"addmm"}) == "addmm"
    assert owner(["clone", "copy_"], {"clone", "mm"}) == "clone"
    assert owner(["foo", "bar"], {"mm"}) == "bar"  # none recorded: the innermost
    assert family("aten.add_.Tensor") == "add" == family("add")


def test_kernels_match_ops_of_their_family_in_launch_order():
    kernels = [(["mm"], 10.0), (["add_"], 2.0), (["add"], 3.0), (["clone", "copy_"], 4.0), (["softmax"], 1.0)]
    match = match_kernels(_record(), kernels, device="H200")
    # add_ and add are one family: the first add-family kernel goes to the first add-family op (op 1)
    assert match.time_us_by_op == {0: 10.0, 1: 2.0, 2: 3.0, 4: 4.0}
    assert (match.matched_kernels, match.unmatched_kernels, match.unmatched_us) == (4, 1, 1.0)
    assert "on the H200" in match.caption() and "1 measured kernels (1 µs) matched no predicted op" in match.caption()


def test_measurement_json_keeps_the_launch_chain_and_reads_back():
    m = Measurement(device="NVIDIA H200", torch="2.11", step_ms=(1.0,), work_items=1,
                    kernels=(KernelTime("addmm", "Net", "sm90_gemm", 12.5, 0.0, ("linear", "addmm")),))
    d = m.to_json()
    assert d["kernels"] == [["addmm", "Net", "sm90_gemm", 12.5, ["linear", "addmm"]]]
    assert kernels_of(d) == ([(["linear", "addmm"], 12.5)], "NVIDIA H200")
    assert kernels_of({"measured": d})[1] == "NVIDIA H200"  # a validate JSON


def test_zoo_rows_start_with_the_chain():
    zoo_entry = {"measured": {"kernels": [[["linear", "addmm"], "Net", "gemm", 7.0]]}}
    assert kernels_of(zoo_entry) == ([(["linear", "addmm"], 7.0)], "")


def test_a_file_without_kernels_is_refused():
    with pytest.raises(ValueError, match="no measured kernels"):
        kernels_of({"step_ms": [1.0]})


def test_a_measurement_object_or_its_json_is_matched_for_the_roofline():
    from kernelcast.report.measured import measured_times
    from kernelcast.report.roofline import plot_roofline

    m = Measurement(device="NVIDIA H200", torch="2.11", step_ms=(1.0,), work_items=1,
                    kernels=(KernelTime("mm", "", "gemm", 10.0, 0.0, ("mm",)),))
    for given in (m, m.to_json(), {"measured": m.to_json()}):
        times, caption = measured_times(_record(), given)
        assert times == {0: 10.0} and "NVIDIA H200" in caption
    assert measured_times(_record(), {0: 4.0}) == ({0: 4.0}, "")
    fig = plot_roofline(_record(), measured=m)
    assert any(not len(c.get_facecolors()) for c in fig.axes[0].collections)  # a hollow, measured point
    with pytest.raises(TypeError):
        measured_times(_record(), 3.0)


def test_back_to_back_timing_divides_each_events_span_by_the_steps(monkeypatch):
    """The one CUDA-event timer `kernelcast measure` and the device scripts (zoo, compile, advise) share."""
    import torch

    from kernelcast.measure import back_to_back_ms, synced_ms

    clock = {"ms": 0.0}

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self):
            self.at = clock["ms"]

        def elapsed_time(self, other):
            return other.at - self.at

    def call():
        clock["ms"] += 2.0

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    after = []
    assert back_to_back_ms(call, steps=5, repeats=3, after_each=lambda: after.append(1)) == [2.0, 2.0, 2.0]
    assert len(after) == 3
    assert len(synced_ms(call, 4)) == 4


def test_profiler_spans_of_record_function_ranges_are_not_work_items():
    # Every training step with a torch.optim optimizer has the profiler's device-side span of
    # "Optimizer.step#SGD.step" (a gpu_user_annotation); the H200 zoo run of 2026-11-30 counted it as a 53rd
    # work item of optim_sgd, whose 52 kernels the profiler listed (validation/zoo_measured.json.gz).
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from kernelcast.measure import MODULE_PREFIX, is_work_item

    def event(name, device=DeviceType.CUDA, annotation=False):
        return SimpleNamespace(name=name, device_type=device, is_user_annotation=annotation)

    assert is_work_item(event("void at::native::vectorized_elementwise_kernel<4>"))
    assert is_work_item(event("Memcpy HtoD (Pageable -> Device)"))
    assert not is_work_item(event("Optimizer.step#SGD.step", annotation=True))
    assert not is_work_item(event(MODULE_PREFIX + "Sequential.0"))
    assert not is_work_item(event("aten::mm", device=DeviceType.CPU))
