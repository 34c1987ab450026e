"""The one timing protocol every measurement on a GPU uses (kernelcast.measure): which calls sit between which CUDA
events, where the L2 flush goes, and when the host waits. No GPU here: torch.cuda's events and synchronize are
replaced by fakes that log what happened, in order."""

import pytest
import torch

from kernelcast import measure


class FakeEvent:
    clock = 0.0

    def __init__(self, log, enable_timing=True):
        self.log, self.at = log, None

    def record(self):
        self.at = FakeEvent.clock
        self.log.append("record")

    def elapsed_time(self, end):
        return end.at - self.at


@pytest.fixture
def log(monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=True: FakeEvent(events, enable_timing))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: events.append("sync"))
    FakeEvent.clock = 0.0
    return events


def _call(log, ms=2.0):
    def call():
        log.append("call")
        FakeEvent.clock += ms
    return call


def test_events_ms_flushes_outside_the_events_and_waits_once(log):
    times = measure.events_ms(_call(log), 3, flush=lambda: log.append("flush"))
    assert times == [2.0, 2.0, 2.0]
    assert log == ["flush", "record", "call", "record"] * 3 + ["sync"]


def test_back_to_back_divides_by_the_steps_and_waits_after_each_timing(log):
    after = []
    times = measure.back_to_back_ms(_call(log, 3.0), steps=4, repeats=2, after_each=lambda: after.append(1))
    assert times == [3.0, 3.0] and after == [1, 1]
    assert log == (["record"] + ["call"] * 4 + ["record", "sync"]) * 2


def test_no_gpu_is_one_clear_error(monkeypatch):
    from kernelcast.errors import KernelcastError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(KernelcastError, match="no CUDA GPU"):
        measure.require_gpu()
    from kernelcast.calibrate import require_gpu  # calibrate's callers get the same check

    assert require_gpu is measure.require_gpu
