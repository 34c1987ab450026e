"""Generated (Inductor Triton) kernel rates: points from a device run, the per-class fit, the model's lookup, and
the host-run merge that scales a case only some runs measured."""

import dataclasses
from pathlib import Path

import pytest
from helpers import contiguous

from kernelcast.calibrate.generated import (atomics_fit, fit_launch_and_bandwidth, generated_fits,
                                            generated_memory_points, grid_fits, kind_of)
from kernelcast.costs import Cost, cost_of
from kernelcast.costs.generated import atomics_time_us
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import GENERATED_FIT_NOTE, CalibratedModel
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings, OpRecord

ROOT = Path(__file__).resolve().parents[2]



def _workload(name, kernels, triton_bytes):
    return {"name": name, "variants": {"eager": {"kernels": [[[], "", "triton_poi_x_0", 99.0]]},
                                       "default": {"kernels": kernels, "triton_bytes": triton_bytes}}}


def test_points_come_from_generated_kernels_whose_bytes_are_unambiguous():
    kernels = [[[], "", "triton_poi_fused_add_0", 3.0], [[], "", "triton_red_fused_sum_1", 5.0],
               [[], "", "triton_per_fused_softmax_2", 4.0], [[], "", "triton_poi_fused_mul_3", 2.0],
               [["addmm"], "", "sm90_xmma_gemm", 30.0]]
    triton_bytes = {"triton_poi_fused_add_0": [1 << 20], "triton_red_fused_sum_1": [1 << 22],
                    "triton_per_fused_softmax_2": [1 << 21], "triton_poi_fused_mul_3": [1 << 20, 1 << 21]}
    points = generated_memory_points({"workloads": [_workload("w", kernels, triton_bytes)]})
    # the eager variant, the cuBLAS kernel and the kernel two graphs define with different bytes are left out
    assert points == {"triton_pointwise": [[1048576.0, 1, 3.0, 1, 4]],
                      "triton_reduction": [[4194304.0, 1, 5.0, 1, 4]],
                      "triton_persistent_reduction": [[2097152.0, 1, 4.0, 1, 4]]}
    assert kind_of("triton_tem_fused_mm_0") is None and kind_of("triton_poi_x") == "triton_pointwise"
    assert generated_memory_points({"workloads": [_workload("w", kernels, triton_bytes)]}, leave_out="w") == {}


def test_fit_recovers_a_launch_floor_and_a_bandwidth():
    launch_us, bytes_per_us = 2.0, 3.0e6  # 3 TB/s
    rows = [[float(b), 1, launch_us + b / bytes_per_us, 1, 4] for b in (2 ** k for k in range(14, 30))]
    fitted_launch, fitted_rate, error = fit_launch_and_bandwidth(rows)
    assert fitted_launch == pytest.approx(launch_us) and fitted_rate == pytest.approx(bytes_per_us, rel=1e-6)
    assert error < 1e-9
    with pytest.raises(ValueError):
        fit_launch_and_bandwidth(rows[:3])


def test_the_model_times_a_generated_kernel_by_its_class_fit_and_says_so():
    profile = load_profile("h200").data
    fits = profile["timings"]["generated"]
    assert {"triton_pointwise", "triton_reduction", "triton_persistent_reduction"} <= set(fits)
    model = CalibratedModel(get_gpu("h200"), CaptureSettings(), profile, get_gpu("h200"))
    nbytes = 64 * 2 ** 20
    est = model.estimate(Cost(bytes_read=nbytes / 2, bytes_written=nbytes / 2, kernels=1, kind="triton_pointwise",
                              key=(1, 4)))
    fit = fits["triton_pointwise"]
    assert est.time_us == pytest.approx(fit["launch_us"] + nbytes / fit["bytes_per_us"])
    assert est.source == "fitted (generated kernels)"
    # a kind without a fit (foreach) keeps its stand-in, and the capture's stand-in note is replaced
    assert model.estimate(Cost(bytes_read=nbytes, kernels=1, kind="triton_foreach", key=(1, 4))).source != \
        "fitted (generated kernels)"
    assert model.notes_for(("a", "stand-in"), "stand-in") == ("a", GENERATED_FIT_NOTE.format(gpu="H200"))


def test_a_generated_kernel_reading_what_the_step_left_in_l2_runs_at_the_l2_speed():
    """The grid times each kernel after the L2 flush; the share of its reads the L2 tracker holds runs at the
    profile's L2 speed-up, as an eager streaming kernel's (predict/calibrated.py _generated_time_us). Its writes
    do not; on another GPU the warm share is carried by SMs x clock, never slower than cold."""
    profile = load_profile("h200").data
    h200 = get_gpu("h200")
    model = CalibratedModel(h200, CaptureSettings(), profile, h200)
    nbytes = 4 * 2 ** 20
    cost = Cost(bytes_read=nbytes / 2, bytes_written=nbytes / 2, kernels=1, kind="triton_pointwise", key=(1, 4))
    cold = model.estimate(cost).time_us
    warm = model.estimate(cost, l2_warm=1.0).time_us
    assert warm == pytest.approx(cold * (0.5 + 0.5 / model.l2_speedup(nbytes)))
    assert model.l2_speedup(nbytes) > 1.4 and warm < cold
    l4 = get_gpu("l4")
    there = CalibratedModel(l4, CaptureSettings(), profile, h200)
    assert there.estimate(cost, l2_warm=1.0).time_us < there.estimate(cost).time_us
    # a kernel that adds atomically is priced by its atomics, warm or not
    atomic = dataclasses.replace(cost, key=("generated_atomics", 1 << 20, 1 << 20, 4e6))
    assert model.estimate(atomic, l2_warm=1.0).time_us == model.estimate(atomic).time_us


def test_a_fitted_profile_section_is_rebuilt_from_the_committed_device_run():
    """The shipped rates come from the grid of compiled microbenchmarks, not from the compiled zoo (the check)."""
    import gzip
    import json

    raw = json.loads(gzip.open(ROOT / "validation/h200_triton_grid_raw.json.gz").read())
    shipped = load_profile("h200").data["timings"]["generated"]
    fits = grid_fits(raw, get_gpu("h200").l2_bytes)
    assert set(fits) == {"triton_pointwise", "triton_reduction", "triton_persistent_reduction", "atomics"}
    for kind, fit in fits.items():  # to the 12 digits the profile keeps (scripts/fit/build_h200_profile.py rounded)
        assert fit == pytest.approx(shipped[kind], rel=1e-11, abs=0)
    measured = json.loads(gzip.open(ROOT / "validation/compile/compile_measured.json.gz").read())
    assert generated_fits(measured)["triton_pointwise"] != shipped["triton_pointwise"]


def test_atomic_adds_are_priced_by_the_elements_added_where_they_land_and_the_indices():
    l2_bytes = 50e6
    coef = (1.0, 2e-6, 4e-6, 2e-5)  # floor, per element in L2, per element in DRAM, per index
    points = []
    for elements, indices, destination in ((1e6, 1e6, 4e4), (3e7, 5e5, 1.2e7), (1.3e8, 5e5, 5e7),
                                           (5e7, 6.5e4, 1.5e8), (6.7e7, 1.6e4, 5.2e8), (4e6, 6.5e4, 2.6e5)):
        share = min(1.0, l2_bytes / destination)
        t = coef[0] + coef[1] * elements * share + coef[2] * elements * (1 - share) + coef[3] * indices
        points.append((elements, indices, destination, t))
    fit = atomics_fit(points, l2_bytes)
    assert fit["us_per_element_l2"] == pytest.approx(coef[1], rel=1e-6)
    assert fit["us_per_element_dram"] == pytest.approx(coef[2], rel=1e-6)
    assert fit["us_per_index"] == pytest.approx(coef[3], rel=1e-6) and fit["median_error"] < 1e-9
    assert atomics_fit(points[:3], l2_bytes) is None
    # a destination 4x the L2 adds three quarters of its elements at the DRAM rate
    assert atomics_time_us(fit, 1e6, 0, 2e8) == pytest.approx(1.0 + 1e6 * (0.25 * 2e-6 + 0.75 * 4e-6), rel=1e-6)


def test_a_generated_kernel_that_adds_atomically_is_timed_by_its_atomics():
    """Inductor's scatter-add (zoo gcn_train compiled): 128M fp32 atomic adds from 500k edges into a 51 MB
    table, counted by Inductor as 112 MB, ran 312 us on the H200, not the ~30 us its bytes take."""
    from kernelcast.costs.generated import GENERATED_ATOMICS_KEY

    edges, width, nodes = 500_000, 256, 50_000
    op = OpRecord(0, "triton.pointwise.triton_poi_fused_index_add_0",
                  {"kernel": "triton_poi_fused_index_add_0",
                   "reads": (contiguous((edges,), "int64"), contiguous((nodes, width)), contiguous((edges,))),
                   "xnumel": edges * width, "inductor_bytes": 112.4e6, "atomic_elements": edges * width},
                  (contiguous((nodes, width)),))
    cost = cost_of(op)
    assert cost.key == (GENERATED_ATOMICS_KEY, edges * width, edges, nodes * width * 4.0)
    profile = load_profile("h200").data
    model = CalibratedModel(get_gpu("h200"), CaptureSettings(), profile, get_gpu("h200"))
    est = model.estimate(cost)
    assert 250 < est.time_us < 400 and est.source == "fitted (generated kernels)"
    plain = model.estimate(dataclasses.replace(cost, key=(1, 4)))
    assert plain.time_us < est.time_us / 5


def test_a_kernel_storing_into_part_of_a_buffer_writes_what_inductor_counts():
    """An embedding's backward compiled: 2048 rows of 256 fp32 gradients added into a 50000 x 256 buffer. Inductor
    counts 4.2 MB; the whole 51.2 MB buffer is not written (a fresh user's LM step priced it as if it were)."""
    tokens, width, vocab = 2048, 256, 50_000
    op = OpRecord(0, "triton.pointwise.triton_poi_fused_embedding_dense_backward_0",
                  {"kernel": "triton_poi_fused_embedding_dense_backward_0",
                   "reads": (contiguous((tokens,), "int64"), contiguous((tokens, width))), "xnumel": tokens * width,
                   "inductor_bytes": 4210688.0, "atomic_elements": tokens * width},
                  (contiguous((vocab, width)),))
    cost = cost_of(op)
    assert cost.bytes_written + cost.bytes_read == 4210688.0


def test_a_case_only_one_run_measured_is_carried_to_the_typical_host():
    from kernelcast.calibrate.host_merge import merge

    def case(us):
        return {"median_us": us, "min_us": us, "max_us": us}

    runs = [{"run": "slow", "host": {"add (1 kernel)": case(10.0)}},
            {"run": "slow too", "host": {"add (1 kernel)": case(10.0)}},
            {"run": "fast", "host": {"add (1 kernel)": case(5.0), "conv2d 3x3 (cuDNN)": case(8.0),
                                     "cpu bench": {"python_bench_us": 1.0}}}]
    merged = merge(runs)
    assert merged["add (1 kernel)"]["median_us"] == 10.0
    # measured at 1.6x a launch on a host twice as fast: 16 µs on the typical one
    assert merged["conv2d 3x3 (cuDNN)"]["median_us"] == pytest.approx(16.0)
    assert "cpu bench" not in merged


def test_a_foreach_list_of_few_chunks_lasts_as_long_as_one_block():
    """multi_tensor_apply runs a block per 65536-element chunk: 39 chunks on 132 SMs take one block's time
    (validation/probes/foreach_probe.json), not the list's bytes at the GPU's bandwidth."""
    from kernelcast.costs.foreach import chunk_key

    assert chunk_key([802816, 1024]) == ("chunks", 65536, 14)
    assert chunk_key([1024, 100]) == ("chunks", 1024, 2)
    profile = load_profile("h200").data
    fit = profile["timings"]["foreach_blocks"]["cold"]
    model = CalibratedModel(get_gpu("h200"), CaptureSettings(), profile, get_gpu("h200"))
    few = Cost(bytes_read=10e6, bytes_written=10e6, kernels=1, kind="foreach", key=("chunks", 65536, 39))
    est = model.estimate(few)
    assert est.time_us == pytest.approx(fit["launch_us"] + 65536 * fit["us_per_element"])
    assert 12 < est.time_us < 18 and est.source == "fitted (multi_tensor_apply blocks)"
    # a list of many chunks streams at the pointwise rate: 1 GB over 4 launches is far above one block each
    many = Cost(bytes_read=0.5e9, bytes_written=0.5e9, kernels=4, kind="foreach", key=("chunks", 65536, 1024))
    assert model.estimate(many).time_us > 4 * est.time_us * 3


def test_a_foreach_block_runs_at_the_l2_line_only_when_every_list_is_resident():
    """A block walks its chunk of every list in step, so its coldest list sets its pace: the L2-resident line where
    the L2 tracker holds all of the op's inputs, the HBM line where any list is cold (the zoo's Adam steps on the
    H200: the add_ of eps over a list just written 8.4 µs, addcdiv_ over the cold parameters beside two warm lists
    22.9 µs; scripts/eval/foreach_warm_check.py)."""
    profile = load_profile("h200").data
    cold, warm = profile["timings"]["foreach_blocks"]["cold"], profile["timings"]["foreach_blocks"]["warm"]
    model = CalibratedModel(get_gpu("h200"), CaptureSettings(), profile, get_gpu("h200"))
    op = Cost(bytes_read=10e6, bytes_written=10e6, kernels=1, kind="foreach", key=("chunks", 65536, 39))
    assert model.estimate(op, 1.0).time_us == pytest.approx(warm["launch_us"] + 65536 * warm["us_per_element"])
    assert model.estimate(op, 2 / 3).time_us == model.estimate(op, 0.0).time_us == pytest.approx(
        cold["launch_us"] + 65536 * cold["us_per_element"])
    assert 7 < model.estimate(op, 1.0).time_us < 10 < 15 < model.estimate(op, 0.0).time_us
