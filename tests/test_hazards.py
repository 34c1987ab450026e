"""Stream-ordering hazards (predict/hazards.py): racy programs report what the CUDA semantics make racy, correct
ones nothing. Each program's expected hazards are written beside it: (kind, line of the first access, line of the
second, first stream, second stream), lines counted from the program's `def`."""

import inspect

import pytest
import torch

from kernelcast.capture import capture
from kernelcast.predict import predict_capture
from kernelcast.records import PredictionRecord


def _hazards(program):
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(512, 512, device="cuda")
            w = torch.randn(512, 512, device="cuda")
            host = torch.randn(512, 512).pin_memory()
        program(x, w, host)
    pred = predict_capture(cap.capture, "h200")
    first_line = inspect.getsourcelines(program)[1]

    def line(source):
        return int(source.rsplit(":", 1)[1].split()[0]) - first_line

    return pred, [(h.kind, line(h.first_source), line(h.second_source), h.first_stream, h.second_stream)
                  for h in pred.hazards]


# -- racy -------------------------------------------------------------------------------------------------
def read_without_wait(x, w, host):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = x @ w
    y.sum()  # the default stream reads y with no wait for s
    y.record_stream(torch.cuda.current_stream())


def write_while_read(x, w, host):
    s = torch.cuda.Stream()
    y = x * 2
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        z = y @ w  # s reads y
        y.record_stream(s)
    y.add_(1)  # the default stream writes y while s may still read it
    return z


def freed_without_record_stream(x, w, host):
    s = torch.cuda.Stream()
    y = x * 2  # allocated on the default stream
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        z = y @ w  # used on s
    del y  # freed: the default stream may reuse the block while s reads it
    return z, x + 1


def prefetch_not_waited(x, w, host):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        batch = host.to("cuda", non_blocking=True)  # the copy runs on s
    batch.record_stream(torch.cuda.current_stream())
    return batch @ w  # no wait for s: the product may read the batch before it has arrived


def event_recorded_too_early(x, w, host):
    s = torch.cuda.Stream()
    done = torch.cuda.Event()
    done.record(s)  # recorded before the work it should mark
    with torch.cuda.stream(s):
        y = x @ w
    done.wait(torch.cuda.current_stream())
    y.record_stream(torch.cuda.current_stream())
    return y.sum()


RACY = {
    read_without_wait: [("unordered-read", 3, 4, 1, 0)],
    write_while_read: [("unordered-write", 5, 7, 1, 0)],
    freed_without_record_stream: [("freed-while-in-use", 5, 7, 1, 0)],
    prefetch_not_waited: [("unordered-read", 3, 5, 1, 0)],
    event_recorded_too_early: [("unordered-read", 5, 8, 1, 0)],
}


# -- correct ----------------------------------------------------------------------------------------------
def one_stream(x, w, host):
    y = x @ w
    y.add_(1)
    return y.sum()


def prefetch_waited(x, w, host):
    """The seed pattern: a pinned non_blocking copy on a side stream, wait_stream, record_stream."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        batch = host.to("cuda", non_blocking=True)
    torch.cuda.current_stream().wait_stream(s)
    batch.record_stream(torch.cuda.current_stream())
    return batch @ w


def event_ordered(x, w, host):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = x @ w
        done = torch.cuda.Event()
        done.record()
    done.wait(torch.cuda.current_stream())
    y.record_stream(torch.cuda.current_stream())
    return y.sum()


def synchronized(x, w, host):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = x @ w
    torch.cuda.synchronize()  # the host waits for every stream
    z = y.sum()
    s.wait_stream(torch.cuda.current_stream())  # s's next allocation waits for the default stream's read
    return z


def handed_back(x, w, host):
    s = torch.cuda.Stream()
    y = x * 2
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        z = y @ w
    torch.cuda.current_stream().wait_stream(s)  # the default stream waits for s before y is written or freed
    y.add_(1)
    del y
    z.record_stream(torch.cuda.current_stream())  # z, made on s, is read on the default stream
    return z.sum()


CORRECT = [one_stream, prefetch_waited, event_ordered, synchronized, handed_back]


@pytest.mark.parametrize("program", list(RACY), ids=lambda p: p.__name__)
def test_racy_programs_report_their_hazard(program):
    pred, found = _hazards(program)
    assert found == RACY[program]
    (hazard,) = pred.hazards
    assert hazard.shape == (512, 512) and hazard.dtype == "float32" and hazard.fix


@pytest.mark.parametrize("program", CORRECT, ids=lambda p: p.__name__)
def test_correct_programs_report_none(program):
    assert _hazards(program)[1] == []


def test_hazards_are_in_the_json_and_come_back():
    pred, _ = _hazards(read_without_wait)
    record = pred.record()
    data = record.to_json()
    assert data["hazards"][0]["kind"] == "unordered-read"
    assert data["hazards"][0]["producer"]["stream"] == 1 and data["hazards"][0]["consumer"]["stream"] == 0
    assert PredictionRecord.from_json(data).hazards == record.hazards
