"""scripts/device/validate_distributed.py on a CPU: its profile records and comparison on small hand-made inputs, and
its measuring path end to end under torchrun with gloo (--dry-run-cpu)."""

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("validate_distributed", ROOT / "scripts" / "device" / "validate_distributed.py")
vd = importlib.util.module_from_spec(_spec)
sys.modules["validate_distributed"] = vd  # dataclasses look their module up there
_spec.loader.exec_module(vd)


def _x(cat, name, ts, dur, tid=1, pid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid, "pid": pid, "args": args}


# Two steps. Step 1 (ts 1000-1100): aten::linear holding aten::addmm, then FSDP2's copy-in, each launching a
# kernel; step 2 (1100-1180): an aten::mm on the autograd thread launching a memcpy. The GPU ran a GEMM and
# a memcpy on stream 7 and an NCCL all-gather on stream 20.
TRACE = {"traceEvents": [
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "autograd"}},
    _x("user_annotation", "ProfilerStep#1", 1000.0, 100.0),
    _x("user_annotation", "ProfilerStep#2", 1100.0, 80.0),
    _x("user_annotation", "FSDP::pre_forward", 1005.0, 60.0),
    _x("user_annotation", "FSDP::pre_forward", 1105.0, 10.0),
    _x("cpu_op", "aten::linear", 1010.0, 30.0, **{"External id": 3, "Input Dims": [[4, 8], [8, 8]]}),
    _x("cpu_op", "aten::addmm", 1015.0, 20.0, **{"External id": 4}),
    _x("cpu_op", "fsdp::all_gather_copy_in", 1050.0, 10.0, **{"External id": 5}),
    _x("cpu_op", "aten::mm", 1120.0, 15.0, tid=2, **{"External id": 6}),
    _x("cuda_runtime", "cudaLaunchKernel", 1016.0, 5.0, correlation=1, **{"External id": 4}),
    _x("cuda_runtime", "cudaLaunchKernel", 1052.0, 4.0, correlation=2, **{"External id": 5}),
    _x("cuda_runtime", "cudaMemcpyAsync", 1121.0, 6.0, tid=2, correlation=3, **{"External id": 6}),
    _x("kernel", "sm90_gemm_bf16", 2000.0, 40.0, tid=7, pid=0, stream=7, correlation=1, grid=[4, 1, 1],
       block=[128, 1, 1]),
    _x("kernel", "ncclDevKernel_AllGather_RING_LL", 2050.0, 100.0, tid=20, pid=0, stream=20, correlation=2),
    _x("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 2200.0, 10.0, tid=7, pid=0, stream=7, correlation=3,
       bytes=4096),
]}


def test_compact_trace_keeps_every_event_relative_to_the_first_step():
    c = vd.compact_trace(TRACE)
    s = c["strings"]
    assert c["threads"] == ["main", "autograd"]
    assert c["steps"] == [[0.0, 100.0], [100.0, 80.0]]
    assert [(s[r[0]], r[1], r[2], r[3]) for r in c["cpu_ops"]] == [
        ("aten::linear", 10.0, 30.0, 0), ("aten::addmm", 15.0, 20.0, 0), ("fsdp::all_gather_copy_in", 50.0, 10.0, 0),
        ("aten::mm", 120.0, 15.0, 1)]
    assert s[c["cpu_ops"][0][5]] == [[4, 8], [8, 8]]
    assert [(r[0], s[r[1]], r[4], r[5], r[9]) for r in c["gpu"]] == [
        ("kernel", "sm90_gemm_bf16", 7, 1, None), ("kernel", "ncclDevKernel_AllGather_RING_LL", 20, 2, None),
        ("memcpy", "Memcpy DtoD (Device -> Device)", 7, 3, 4096)]
    assert len(c["runtime"]) == 3 and len(c["ranges"]) == 4  # the two ProfilerSteps are ranges too
    assert json.loads(json.dumps(c)) == c  # plain JSON


def test_profile_summary_per_step():
    summary = vd.summarize_profile(vd.compact_trace(TRACE))
    assert summary["steps"] == 2 and summary["cpu_step_ms"] == [0.1, 0.08]
    # step 1: the last launch ends at 1052 + 4 = 1056, 56 us after its start; step 2: 1121 + 6 - 1100 = 27 us
    assert summary["last_launch_ms"] == [0.056, 0.027]
    gpu = summary["gpu_per_step"]
    assert gpu["compute_kernel_ms"] == pytest.approx(0.02)  # 40 us over 2 steps
    assert gpu["nccl_kernel_ms"] == pytest.approx(0.05)  # 100 us over 2 steps
    assert (gpu["kernels"], gpu["nccl_kernels"], gpu["memcpy"]) == (0.5, 0.5, 0.5)
    assert summary["gpu_by_stream_per_step"] == {"7": [1.0, 0.025], "20": [0.5, 0.05]}  # (40 + 10) / 2 us
    # main thread: linear (30 us, holding addmm) + copy-in (10 us) = 40 us over 2 steps; autograd: 15 / 2 us
    assert summary["in_aten_ops_ms_per_step_by_thread"] == {"main": 0.02, "autograd": 0.0075}
    assert summary["fsdp_ops"] == {"fsdp::all_gather_copy_in": [1, 0.01]}
    assert summary["ranges"] == {"FSDP::pre_forward": [2, 0.07]}  # 60 + 10 us; ProfilerStep# left out


def test_top_level_time_counts_nested_spans_once():
    assert vd._top_level_us([(0.0, 10.0), (2.0, 3.0), (12.0, 5.0)]) == 15.0  # 10 + 5; (2, 3) is inside
    assert vd._top_level_us([(0.0, 10.0), (5.0, 10.0)]) == 15.0  # overlapping, not nested: 0 to 15
    assert vd._top_level_us([]) == 0.0


def _measured_rank0(step_ms, compute_kernel_ms=30.0, nccl_kernel_ms=0.0, host_ms=20.0, spread_ms=1.0):
    gpu = {"compute_kernel_ms": compute_kernel_ms, "nccl_kernel_ms": nccl_kernel_ms, "kernels": 1000.0,
           "nccl_kernels": 0.0, "memcpy": 10.0, "memset": 5.0, "memcpy_ms": 1.0, "memset_ms": 0.5}
    rounds = [step_ms - spread_ms, step_ms, step_ms + spread_ms]
    return {"timed": {"median_ms": step_ms, "rounds_ms": rounds}, "host": {"issue_ms_median": host_ms},
            "profile": {"gpu_per_step": gpu}}


def test_compare_takes_exposed_communication_against_the_no_op_variant():
    configs = [vd.StepConfig("llama_fsdp", "llama", "llama_fsdp", "full"),
               vd.StepConfig("llama_fsdp.noop_comm", "llama", "llama_fsdp", "noop_comm"),
               vd.StepConfig("llama", "llama", "llama", "single")]
    measured = {"world_size": 2, "configs": [vars(c) for c in configs], "steps": {
        "llama_fsdp": {"ranks": [_measured_rank0(60.0, nccl_kernel_ms=12.0), {}]},
        "llama_fsdp.noop_comm": {"ranks": [_measured_rank0(55.0), {}]},
        "llama": {"ranks": [_measured_rank0(50.0), {}]}}}
    predicted = {"llama_fsdp": {"step_ms": 57.0, "compute_ms": 32.0, "comm_ms": 10.0, "kernels": 1000,
                                "host_time_ms": 22.0, "exposed_comm_ms": 4.0, "noop_saving_ms": 4.5,
                                "step_without_comm_ms": 53.0},
                 "llama": {"step_ms": 45.0, "compute_ms": 33.0, "comm_ms": 0.0, "kernels": 1015,
                           "host_time_ms": 18.0, "exposed_comm_ms": 0.0, "step_without_comm_ms": 45.0}}
    rows = vd.compare(measured, predicted)
    fsdp = rows["llama_fsdp"]
    assert fsdp["step_error"] == pytest.approx(-0.05) and fsdp["step_within_target"]  # (57 - 60) / 60
    assert fsdp["measured_exposed_comm_ms"] == 5.0 and fsdp["measured_exposed_against"] == "noop_comm"  # 60 - 55
    # against what a no-op variant saves (free on the GPU and to issue): (4.5 - 5) / 5
    assert fsdp["exposed_error"] == pytest.approx(-0.1) and fsdp["exposed_within_target"]
    # rounds 59-61 and 54-56: the exposed communication is somewhere in 59 - 56 = 3 to 61 - 54 = 7 ms
    assert fsdp["measured_exposed_band_ms"] == [3.0, 7.0] and fsdp["exposed_within_band"]
    assert fsdp["measured_rounds_ms"] == [59.0, 61.0] and not fsdp["step_within_rounds"]  # 57 is outside
    assert fsdp["measured_step_minus"] == {"noop_comm": 5.0, "single": 10.0}  # 60 - 55, 60 - 50
    # kernels, memcpys and memsets: 30 + 1 + 0.5 = 31.5 ms measured against 32 predicted
    assert fsdp["compute_kernel_error"] == pytest.approx(0.5 / 31.5)
    assert fsdp["host_error"] == pytest.approx(0.1)  # (22 - 20) / 20
    single = rows["llama"]
    assert single["world_size"] == 1 and "step_within_target" not in single
    assert single["step_error"] == pytest.approx(-0.1)  # (45 - 50) / 50


def test_compare_names_a_config_that_failed():
    cfg = vd.StepConfig("gpt_ddp", "gpt", "gpt_ddp", "full")
    measured = {"world_size": 2, "configs": [vars(cfg)],
                "steps": {"gpt_ddp": {"ranks": [{"error": "RuntimeError: out of memory"}, {}]}}}
    assert vd.compare(measured, {"gpt_ddp": {"step_ms": 1.0}})["gpt_ddp"]["measured_error"] == \
        "RuntimeError: out of memory"


def test_configs_cover_every_example_and_variant():
    assert {c.example for c in vd.CONFIGS} == {"gpt", "gpt_ddp", "gpt_fsdp", "llama", "llama_ddp", "llama_fsdp"}
    assert {c.variant for c in vd.CONFIGS} == set(vd.VARIANT_HOW)
    assert {c.parallel for c in vd.CONFIGS} == {"single", "ddp", "fsdp"}
    assert len({c.name for c in vd.CONFIGS}) == len(vd.CONFIGS) == 12


@pytest.mark.slow
def test_dry_run_on_cpu_under_torchrun(tmp_path):
    """The measuring path with gloo and tiny models: one FSDP2, one DDP and one single-GPU config."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    only = ["llama_fsdp.noop_comm", "gpt_ddp.noop_hook", "gpt"]
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(ROOT / "scripts" / "device" / "validate_distributed.py"), "--dry-run-cpu", "--out", str(tmp_path),
                           "--only", *only], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads((tmp_path / vd.MEASURED_FILE).read_text())
    assert measured["errors"] == [] and measured["world_size"] == 2
    assert {row["collective"] for row in measured["collectives"]} == set(vd.COLLECTIVES)
    for name in only:
        ranks = measured["steps"][name]["ranks"]
        assert len(ranks) == 2 and all("error" not in r for r in ranks), ranks
        assert ranks[0]["timed"]["median_ms"] > 0 and ranks[0]["profile"]["cpu_ops_per_step"] > 0
    fsdp = measured["steps"]["llama_fsdp.noop_comm"]["ranks"][0]["profile"]
    assert "fsdp::all_gather_copy_in" in fsdp["fsdp_ops"] and "FSDP::pre_backward" in fsdp["ranges"]
    assert not any(name.startswith("gloo:") for name in fsdp["ranges"])  # the no-op variant communicates nothing
    profiles = json.loads(gzip.decompress((tmp_path / vd.PROFILES_FILE).read_bytes()))
    assert set(profiles) == set(only)


def test_a_measured_cuda_trace_compacts_with_every_gpu_item_on_its_stream():
    """The H200 profile of example:cnn in docs/traces (kineto's format: kernels, runtime and driver calls)."""
    trace = json.loads((ROOT / "docs" / "traces" / "cnn_measured_h200.json").read_text())
    c = vd.compact_trace(trace)
    assert [len(c[k]) for k in ("cpu_ops", "runtime", "gpu", "gpu_ranges")] == [1446, 660, 390, 61]  # 657 + 3 driver
    assert c["threads"] == ["thread 524 (python3)", "thread 549 (pt_autograd_0)"]  # backward runs on its own thread
    gpu = vd.summarize_profile(c)["gpu_per_step"]  # no ProfilerStep in it: counted as one step
    assert (gpu["kernels"], gpu["memset"], gpu["memcpy"], gpu["nccl_kernels"]) == (358, 31, 1, 0)
    assert {row[4] for row in c["gpu"]} == {7}  # one stream
