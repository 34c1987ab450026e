"""Stream-ordering hazards (predict/hazards.py): racy programs report what the CUDA semantics make racy, correct
ones nothing (the programs and their expected hazards: examples/stream_programs.py)."""

import inspect

import pytest
import torch

from kernelcast.capture import capture
from kernelcast.predict import predict_capture
from kernelcast.records import PredictionRecord
from stream_programs import CORRECT, RACY, read_without_wait

RACY_BY_NAME = {p.__name__: p for p in RACY}


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


@pytest.mark.slow
@pytest.mark.parametrize("program", list(RACY), ids=lambda p: p.__name__)
def test_racy_programs_report_their_hazard(program):
    pred, found = _hazards(program)
    assert found == RACY[program]
    (hazard,) = pred.hazards
    assert hazard.shape == (512, 512) and hazard.dtype == "float32" and hazard.fix


@pytest.mark.slow
@pytest.mark.parametrize("program", CORRECT, ids=lambda p: p.__name__)
def test_correct_programs_report_none(program):
    assert _hazards(program)[1] == []


@pytest.mark.slow
def test_each_wait_fix_is_re_predicted():
    """An unordered hazard's fix (the consumer's stream waits for the producer's) is applied to the capture and the
    step predicted again: the wait can only hold the consumer back; record_stream moves no kernel."""
    pred, _ = _hazards(read_without_wait)
    (hazard,) = pred.hazards
    assert hazard.step_with_fix_us is not None and hazard.step_with_fix_us >= pred.step_time_us - 0.5
    pred, _ = _hazards(RACY_BY_NAME["freed_without_record_stream"])
    assert pred.hazards[0].step_with_fix_us is None


def test_hazards_are_in_the_json_and_come_back():
    pred, _ = _hazards(read_without_wait)
    record = pred.record()
    data = record.to_json()
    assert data["hazards"][0]["kind"] == "unordered-read"
    assert data["hazards"][0]["producer"]["stream"] == 1 and data["hazards"][0]["consumer"]["stream"] == 0
    assert PredictionRecord.from_json(data).hazards == record.hazards
