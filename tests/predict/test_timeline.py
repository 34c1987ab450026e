"""The CPU-queue / GPU-stream simulator."""

import pytest

from kernelcast.predict.timeline import Launch, simulate, steady_state_step_us


def test_seed_figure_ten_kernels():
    # 10 kernels of 50 us, 5 us to launch each: the GPU finishes at 5 + 10 * 50 = 505 us, while the CPU is
    # done after 10 * 5 = 50 us (what a host timer without a sync would read).
    timeline = simulate([Launch(host_us=5.0, gpu_us=50.0)] * 10)
    assert timeline.gpu_end_us == pytest.approx(505.0)
    assert timeline.cpu_end_us == pytest.approx(50.0)


def test_sync_drains_the_queue():
    launches = [Launch(5.0, 50.0)] * 3 + [Launch(5.0, 1.0, sync=True, sync_return_us=10.0), Launch(5.0, 50.0)]
    timeline = simulate(launches)
    # the GPU is done with 3 * 50 + 1 at 5 + 150 + 1 = 156 us; the CPU resumes at 166 and launches at 171
    assert timeline.spans[3].cpu_end_us == pytest.approx(166.0)
    assert timeline.spans[4].gpu_start_us == pytest.approx(171.0)


def test_steady_state_is_the_slower_side():
    assert steady_state_step_us([Launch(5.0, 50.0)] * 10) == pytest.approx(500.0)  # GPU-bound
    assert steady_state_step_us([Launch(20.0, 2.0)] * 10) == pytest.approx(200.0)  # host-bound


def test_side_stream_overlaps_until_an_event_joins_it():
    launches = [
        Launch(5.0, 100.0, stream=0, record_event=1),  # compute: GPU 5..105, event 1 at 105
        Launch(5.0, 0.0, stream=1, wait_event=1),  # the side stream waits for event 1
        Launch(5.0, 40.0, stream=1, record_event=2),  # starts at 105, ends at 145
        Launch(5.0, 30.0, stream=0),  # compute, no wait: runs 105..135, overlapping the side stream
        Launch(5.0, 0.0, stream=0, wait_event=2),  # compute waits for the side stream
        Launch(5.0, 10.0, stream=0),  # starts at 145 (not 135)
    ]
    timeline = simulate(launches)
    assert timeline.spans[2].gpu_start_us == pytest.approx(105.0)
    assert timeline.spans[3].gpu_start_us == pytest.approx(105.0)
    assert timeline.spans[5].gpu_start_us == pytest.approx(145.0)
    assert timeline.gpu_end_us == pytest.approx(155.0)
    # an event that was never recorded is complete: waiting on it costs nothing
    assert simulate([Launch(5.0, 0.0, wait_event=9), Launch(5.0, 10.0)]).gpu_end_us == pytest.approx(20.0)


def test_with_host_changes_only_the_host_times():
    import dataclasses

    from kernelcast.predict.timeline import Launch, with_host

    launch = Launch(1.0, 2.0, stream=3, sync=True, sync_return_us=4.0, record_event=5, wait_event=6)
    assert dataclasses.fields(Launch)[-1].name == "overlap_us"  # with_host passes every field: add new ones there
    assert with_host(launch, 7.0) == dataclasses.replace(launch, host_us=7.0)
    assert with_host(launch, 7.0, 8.0) == dataclasses.replace(launch, host_us=7.0, sync_return_us=8.0)
    # the overlapped part keeps its share of the host time
    assert with_host(dataclasses.replace(launch, overlap_us=0.5), 3.0).overlap_us == 1.5


def test_a_library_calls_later_launches_overlap_its_first_kernels():
    from kernelcast.predict.timeline import Launch, simulate

    # 10 µs of host, the last 6 launching later work items: the GPU starts at 4 µs, not after all 10
    tl = simulate([Launch(10.0, 20.0, overlap_us=6.0)])
    assert tl.spans[0].gpu_start_us == 4.0 and tl.end_us == 24.0
    # short kernels: the last one cannot end before its launch, when the host is done
    assert simulate([Launch(10.0, 2.0, overlap_us=6.0)]).end_us == 10.0
    assert simulate([Launch(10.0, 20.0)]).end_us == 30.0
