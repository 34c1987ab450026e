"""A user's own CUDA graphs (torch.cuda.CUDAGraph, torch.cuda.graph) captured and replayed in a step.

Expected values are the H200's (torch 2.11, 2026-12-04): benchmarks/cases/cuda_graph_*.py measured by
scripts/device/measure_workloads.py (validation/cases/cuda_graph_cases_run*.json) and their GPU work listed by
scripts/device/probe_graph_launch.py --kernels (validation/cases/cuda_graph_kernels.json).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kernelcast  # noqa: F401  (before torch: the fake CUDA shim)
import torch

from kernelcast.api import capture_file
from kernelcast.capture import capture_workload
from kernelcast.predict import predict_capture
from kernelcast.predict.host import USER_GRAPH_REPLAY_OP

CASES = Path(__file__).resolve().parents[2] / "benchmarks" / "cases"


def test_an_inference_graph_replays_its_kernels_with_one_launch():
    cap = capture_file(f"{CASES / 'cuda_graph_inference.py'}:build", "h200")
    pred = predict_capture(cap, "h200")
    assert pred.kernels == 17  # the input copy and 8 x (GEMM, GELU), as the H200 ran them
    replays = [op for op in pred.ops if op.op == USER_GRAPH_REPLAY_OP]
    assert len(replays) == 1
    graphed = [op for op in cap.ops if "graphed" in op.tags]
    assert len([op for op in graphed if op.name == "addmm"]) == 8
    assert all(p.host_us == 0.0 for p, op in zip(pred.ops, cap.ops) if "graphed" in op.tags)
    # measured: 77661184 bytes allocated before and at the peak (weights, the static buffers, cuBLAS/cuBLASLt
    # workspaces of the warm-up's side stream and of the graph's capture stream)
    assert pred.memory.resident_bytes == pytest.approx(77661184, rel=0.01)


def test_a_whole_training_step_graph_has_the_kernels_the_h200_ran():
    cap = capture_file(f"{CASES / 'cuda_graph_train.py'}:build", "h200")
    # 44 work items: two input copies, forward, loss, backward, and a capturable Adam whose two
    # `_foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt)`-style list divisions by 0-d step tensors take the
    # slow route, one kernel per parameter (4 each)
    assert predict_capture(cap, "h200").kernels == 44
    assert cap.build_ops  # the side-stream warm-up, whose library workspaces stay allocated


def test_graph_api_answers_as_torch_does():
    seen = {}

    def build():
        x = torch.randn(64, device="cuda")
        graph = torch.cuda.CUDAGraph()
        with pytest.raises(RuntimeError, match="before the graph was captured"):
            graph.replay()
        with torch.cuda.graph(graph):
            seen["capturing"] = torch.cuda.is_current_stream_capturing()
            y = x * 2
        seen["after"] = torch.cuda.is_current_stream_capturing()
        return (lambda: graph.replay() or y), ()

    cap = capture_workload(build, "h200")
    assert seen == {"capturing": True, "after": False}
    assert [op.op for op in cap.ops if op.op != "host.step_end"] == [USER_GRAPH_REPLAY_OP, "aten.mul.Tensor"]
