"""The CLI's one-shot capture commands run without Python's automatic cyclic collector (gc_pause.py says why);
each capture after the first collects what the ones before it left; everything else keeps its collector."""

import gc

import pytest

from kernelcast import cli, gc_pause


@pytest.fixture
def policy(monkeypatch):
    """gc_pause's process state and the collector's, restored after the test."""
    was_enabled = gc.isenabled()
    monkeypatch.setattr(gc_pause, "_one_shot", False)
    monkeypatch.setattr(gc_pause, "_captures_started", 0)
    collections = []
    monkeypatch.setattr(gc_pause.gc, "collect", lambda *a: collections.append(a) or 0)
    yield collections
    (gc.enable if was_enabled else gc.disable)()


def test_a_one_shot_process_collects_only_before_its_second_and_later_captures(policy):
    gc_pause.collect_before_capture()
    assert policy == []  # a library caller: no policy, nothing collected by us
    gc_pause.one_shot_process()
    assert not gc.isenabled()
    gc_pause.collect_before_capture()
    assert len(policy) == 1  # the earlier capture's garbage, before this one
    gc_pause.collect_before_capture()
    assert len(policy) == 2


def test_the_first_capture_of_a_one_shot_process_collects_nothing(policy):
    gc_pause.one_shot_process()
    gc_pause.collect_before_capture()
    assert policy == []


def test_only_the_capturing_commands_run_one_shot(policy, capsys):
    assert cli.main(["devices"], one_shot=True) == 0
    assert gc.isenabled() and not gc_pause._one_shot  # not a capturing command
    assert cli.main(["capture", "no_such_file.py", "-o", "/tmp/x.json"], one_shot=True) == 2
    assert gc_pause._one_shot  # a capturing command (failed on its input: the process ends anyway)
    assert cli.main(["examples"]) == 0  # main() called from Python, as a test or a notebook does: no policy
