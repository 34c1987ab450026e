"""Loops whose exit reads the GPU (issue 31): the capture runs them as the GPU does where host-known values
decide the read, says where it guessed, and takes the user's statement (--assume).

Expected values come from the H200 (torch 2.11, transformers 5.17): validation/zoo_issue31_measured.json.gz,
`PYTHONPATH=src python3 scripts/device/zoo_measure.py --only gpt2_generate_greedy gpt2_generate_beam ...`: greedy
generation of 16 new tokens ran 2401 work items per call, beam search 3937, both matched by the capture with the
device's torch version (validation/zoo_issue31_repredicted.json). The tests here check the same mechanism on
models small enough for a unit test: one decode step per new token.
"""

import pytest
import torch

from kernelcast.api import capture_file
from kernelcast.capture import capture_workload
from kernelcast.capture.host_reads import HostReads, StatedRead, parse_assume, stated_reads
from kernelcast.errors import CaptureError, KernelcastError


def _syncs(cap) -> int:
    return sum(1 for o in cap.ops if o.sync)


def test_parse_assume_reads_values_repeats_and_lists():
    read = parse_assume("train.py:40=True*3,False")
    assert read == StatedRead("train.py:40", (True, True, True, False))
    assert [read.value(i) for i in range(6)] == [True, True, True, False, False, False]
    assert parse_assume("a/b.py:7=2.5").values == (2.5,)
    assert parse_assume("a/b.py:7=12").values == (12,)


@pytest.mark.parametrize("bad", ["train.py=True", "train.py:40", "train.py:40=", "train.py:40=maybe",
                                 "train.py:40=True*0", "40=True"])
def test_parse_assume_refuses_malformed_statements_in_one_line(bad):
    with pytest.raises(KernelcastError) as info:
        parse_assume(bad)
    assert "\n" not in str(info.value) and "--assume" in str(info.value)


def test_a_stated_read_matches_a_path_suffix_and_counts_per_step():
    reads = HostReads((parse_assume("loop.py:5=True*2,False"),))
    source = "/home/me/project/loop.py:5 in step"
    assert [reads.value(source)[0] for _ in range(4)] == [True, True, False, False]
    reads.new_step()
    assert reads.value(source)[0] is True
    assert reads.value("/home/me/project/other_loop.py:5 in step") is None  # a suffix at a path boundary only
    assert reads.unused() == []


def _counter_loop_build():
    """The state of generate()'s loop: a flag tensor made by torch.ones, ANDed each pass with a torch.full of a
    host-known bool, read back by `.max() == 0`. The GPU runs the loop 7 times."""
    def step(x):
        unfinished = torch.ones(4, dtype=torch.long, device="cuda")
        passes = 0
        while True:
            x = x * 2
            passes += 1
            done = torch.full((4,), passes >= 7, dtype=torch.bool, device="cuda")
            unfinished = unfinished & ~done
            if unfinished.max() == 0:
                break
        return x

    return step, (torch.randn(64, device="cuda"),)


def test_a_loop_whose_exit_follows_from_host_values_runs_as_on_the_gpu():
    cap = capture_workload(_counter_loop_build, "h200")
    assert _syncs(cap) == 7
    assert sum(o.op == "aten.mul.Tensor" for o in cap.ops) == 7
    assert not any("read back from the GPU" in n for n in cap.notes)


def _eos_build():
    def step(x):
        eos = torch.tensor(50256, device="cuda")  # one host value moved to the GPU: FakeTensorMode drops it
        if (eos < 0).any():
            x = x + 1
        if torch.isin(eos.unsqueeze(0), torch.tensor(0, device="cuda")).any():
            x = x * 2
        return x

    return step, (torch.randn(8, device="cuda"),)


def test_one_element_host_values_keep_their_value_on_the_gpu():
    cap = capture_workload(_eos_build, "h200")
    assert not any("read back from the GPU" in n for n in cap.notes)
    assert not any(o.op in ("aten.add.Tensor", "aten.mul.Tensor") for o in cap.ops)


def _and_build():
    def step(x):
        unknown = x.sum() > 0  # the GPU's data decides it
        stop = torch.zeros((), dtype=torch.bool, device="cuda")
        if unknown & stop:  # False whatever `unknown` holds
            x = x + 1
        return x

    return step, (torch.randn(8, device="cuda"),)


def test_a_boolean_and_decided_by_one_operand_is_exact():
    cap = capture_workload(_and_build, "h200")
    assert not any("read back from the GPU" in n for n in cap.notes)


LOOP_SOURCE = '''import torch


def build():
    def step(x):
        loss = x.sum()
        while loss > 1e-3:
            x = x * 0.5
            loss = x.abs().sum()
        return x

    return step, (torch.randn(1024, device="cuda"),)
'''


@pytest.mark.slow
def test_a_guessed_read_is_a_note_with_its_line_and_the_user_can_state_it(tmp_path):
    path = tmp_path / "solver.py"
    path.write_text(LOOP_SOURCE)
    guessed = capture_file(f"{path}:build")
    note = next(n for n in guessed.notes if "read back from the GPU" in n)
    assert "solver.py:7" in note and "--assume" in note
    assert _syncs(guessed) == 1
    stated = capture_file(f"{path}:build", assume=["solver.py:7=True*9,False"])
    assert _syncs(stated) == 10
    assert sum(o.op == "aten.mul.Tensor" for o in stated.ops) == 9
    unused = capture_file(f"{path}:build", assume=["solver.py:99=True"])
    assert any("--assume solver.py:99: no host read" in n for n in unused.notes)


def test_a_loop_that_never_ends_under_the_statement_is_an_error(tmp_path, monkeypatch):
    from kernelcast.capture import host_reads

    monkeypatch.setattr(host_reads, "MAX_READS_PER_LINE", 50)
    path = tmp_path / "solver.py"
    path.write_text(LOOP_SOURCE)
    with pytest.raises(CaptureError, match="without its loop ending"):
        capture_file(f"{path}:build", assume=["solver.py:7=True"])


def test_the_cli_takes_assume_and_refuses_a_bad_one(tmp_path, capsys):
    from kernelcast.cli import main

    path = tmp_path / "solver.py"
    path.write_text(LOOP_SOURCE)
    assert main(["predict", f"{path}:build", "--assume", "solver.py:7=perhaps"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "perhaps" in err


def test_stated_reads_are_scoped_to_their_block():
    with stated_reads([parse_assume("x.py:1=True")]):
        assert HostReads().stated
    assert not HostReads().stated


transformers = pytest.importorskip("transformers")


def _tiny_gpt2(**generate_kwargs):
    from transformers import GPT2Config, GPT2LMHeadModel

    def build():
        cfg = GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=512, n_positions=64)
        model = GPT2LMHeadModel(cfg).to("cuda", torch.bfloat16).eval()
        ids = torch.randint(0, cfg.vocab_size, (2, 8), device="cuda")

        def step(ids):
            with torch.no_grad():
                return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5,
                                      eos_token_id=None, pad_token_id=0, **generate_kwargs)

        return step, (ids,)

    return build


def _lm_head_calls(cap) -> int:
    return sum(1 for o in cap.ops if o.module.endswith("lm_head") and o.op in ("aten.mm.default",
                                                                                  "aten.linear.default"))


@pytest.mark.parametrize("kwargs", [{"do_sample": False}, {"num_beams": 2, "do_sample": False,
                                                             "early_stopping": False}],
                         ids=["greedy", "beam"])
@pytest.mark.slow
def test_generate_runs_one_forward_per_new_token(kwargs):
    cap = capture_workload(_tiny_gpt2(**kwargs), "h200")
    assert _lm_head_calls(cap) == 5  # the prefill's and four decode steps' (the fifth token needs no forward)
    assert not any("assumed False" in n or "assumed True" in n for n in cap.notes)


def test_a_librarys_range_check_passes_so_istft_captures():
    """torch.istft checks `min(|window overlap|) < 1e-11` through ATen's is_scalar_tensor_true (an `equal` with a
    fresh one): answered True like a user's torch.equal, its check failed and its error message read the fake
    tensor's data. A one-value comparison against a constant now takes its value at a typical magnitude, and
    the check passes; a note says so, and the read is a sync point as on the GPU."""
    def build():
        spec = torch.randn(2, 201, 50, dtype=torch.complex64, device="cuda")
        window = torch.hann_window(400, device="cuda")

        def step():
            with torch.no_grad():
                torch.istft(spec, 400, hop_length=160, window=window)
        return step, ()

    cap = capture_workload(build, "h200")
    assert any("_fft_c2r" in o.op for o in cap.ops) and _syncs(cap) >= 1
    assert any("range check" in n for n in cap.notes)


def test_a_users_comparison_read_keeps_the_unknown_bools_placeholder():
    """`while loss > tol:` reads an unknown bool: False (the loop ends) as before, not the library check's
    typical-value answer (True would never leave the loop)."""
    def build():
        loss = torch.randn((), device="cuda")

        def step():
            n = 0
            while loss > 1e-3 and n < 5:
                n += 1
            return n
        return step, ()

    cap = capture_workload(build, "h200")
    assert _syncs(cap) == 1
