"""Generated (Inductor Triton) kernel rates: points from a device run, the per-class fit, the model's lookup, and
the host-run merge that scales a case only some runs measured."""

import importlib.util
from pathlib import Path

import pytest

from kernelcast.calibrate.generated import (fit_launch_and_bandwidth, generated_fits, generated_memory_points,
                                            kind_of)
from kernelcast.costs import Cost
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import GENERATED_FIT_NOTE, CalibratedModel
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings

ROOT = Path(__file__).resolve().parent.parent


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


def test_a_fitted_profile_section_is_rebuilt_from_the_committed_device_run():
    import gzip
    import json

    measured = json.loads(gzip.open(ROOT / "validation/compile/compile_measured.json.gz").read())
    shipped = load_profile("h200").data["timings"]["generated"]
    for kind, fit in generated_fits(measured).items():
        assert fit == shipped[kind]


def _merge_module():
    spec = importlib.util.spec_from_file_location("merge_host_runs", ROOT / "scripts/merge_host_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_case_only_one_run_measured_is_carried_to_the_typical_host():
    merge = _merge_module().merge

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
