"""Perfetto trace export, sync-point advice and the naive host timer."""

import dataclasses
import json

import pytest
import torch

from kernelcast.capture import capture
from kernelcast.predict import predict_capture
from kernelcast.report import prediction_json
from kernelcast.report.trace import GPU_PID, HOST_PID, chrome_trace


def _capture_with_item():
    with capture("h100") as cap:
        with cap.paused():
            model = torch.nn.Linear(256, 256).cuda()
            x = torch.randn(32, 256, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        loss.item()
    return cap.capture


@pytest.mark.slow
def test_trace_has_host_and_gpu_lanes_with_flows():
    pred = predict_capture(_capture_with_item(), "h200")
    trace = json.loads(json.dumps(chrome_trace(pred)))  # serialisable as it is written
    events = trace["traceEvents"]
    host = [e for e in events if e["ph"] == "X" and e["pid"] == HOST_PID and e["cat"] != "python"]
    python = [e for e in events if e["ph"] == "X" and e["cat"] == "python"]
    assert len(python) == sum(1 for p in pred.ops if p.python_us > 0)
    gpu = [e for e in events if e["ph"] == "X" and e["pid"] == GPU_PID]
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert len(host) == len(pred.ops)
    assert len(gpu) == sum(1 for p in pred.ops if p.time_us > 0) == len(starts) == len(ends)
    assert {e["id"] for e in starts} == {e["id"] for e in ends}
    for slice_ in gpu:
        assert {"flops", "bytes", "bound", "time_us"} <= set(slice_["args"])
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert "Python thread" in names and "stream 0" in names


@pytest.mark.slow
def test_item_is_listed_with_its_stall_and_saving():
    pred = predict_capture(_capture_with_item(), "h200")
    (group,) = pred.sync_groups
    assert group.kind == "item" and group.count == 1 and "test_trace_and_syncs.py" in group.source
    assert group.stall_us > 0 and group.saving_us > 0 and "every N steps" in group.advice
    assert prediction_json(pred)["sync_points_by_source"][0]["kind"] == "item"


def test_naive_host_timer_reads_the_cpu_side_only():
    with capture("h100") as cap:
        with cap.paused():
            a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        for _ in range(10):
            a @ a  # ~1 ms each on the GPU, ~9 us each to launch
    # The model Python timed on this machine is left out: a preempted CI runner could stretch a gap past 1 ms.
    ops = tuple(dataclasses.replace(op, python_us=0.0) for op in cap.capture.ops)
    pred = predict_capture(dataclasses.replace(cap.capture, ops=ops), "h200")
    assert pred.bound == "gpu"
    assert pred.naive_host_timer_us < pred.first_step_us / 10
