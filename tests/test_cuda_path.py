"""The CUDA path on a CPU-only torch: what a CUDA build keeps whole or decomposes, CUDA-only ops, attention
backends, modules copied under the capture, compiled steps. Expected counts come from the H200 (torch 2.11,
validation/zoo_measured.json.gz), named by zoo workload."""

import copy

import pytest
import torch
import torch.nn as nn

from kernelcast.capture import capture, capture_workload
from kernelcast.predict import predict_capture
from kernelcast.records import Capture


def _small_transformer_build():
    # The zoo's small_transformer (examples/zoo/blocks.py): nn.TransformerEncoder deep-copies its layer.
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
    model = nn.ModuleDict({"emb": nn.Embedding(100, 64), "enc": nn.TransformerEncoder(layer, 2),
                           "head": nn.Linear(64, 100)}).cuda()
    ids = torch.randint(0, 100, (2, 16), device="cuda")

    def step(ids):
        model["head"](model["enc"](model["emb"](ids))).sum().backward()

    return step, (ids,)


def test_deep_copied_modules_move_to_cuda():
    # zoo amp_bf16_clip_train / amp_fp16_gradscaler_train failed in build() with "Couldn't swap ...weight":
    # copy.deepcopy gave the layer copies a FakeTensorMode of their own. H200, torch 2.11: zoo
    # amp_bf16_clip_train, one native_layer_norm kernel per norm of each of the 2 layers (norm1: 2, norm2: 2).
    cap = capture_workload(_small_transformer_build, "h200")
    norms = [op.module for op in cap.ops if op.op == "aten.native_layer_norm.default"]
    assert len(norms) == 4 and sum(m.endswith("layers.1.norm1") for m in norms) == 1
    with capture("h200") as block:
        with block.paused():
            model = copy.deepcopy(nn.Linear(8, 8)).cuda()  # an EMA-style copy of a model
            x = torch.randn(4, 8, device="cuda")
        model(x)
    assert model.weight.device.type == "cuda"
    assert [op.op for op in block.capture.ops] == ["aten.t.default", "aten.addmm.default"]


# -- compiled steps ---------------------------------------------------------------------------------------
def _compiled_mean_build():
    # zoo compiled_mean: the H200 ran Inductor's two Triton kernels and no aten mean; the capture records
    # eager ops, so the prediction must say it is eager.
    x = torch.randn(64, 32, device="cuda")
    compiled = torch.compile(lambda t: t.mean(dim=1), dynamic=False)
    return (lambda x: compiled(x)), (x,)


def _wrapped_step_build():
    x = torch.randn(64, 32, device="cuda")

    @torch.compile
    def step(x):
        return x.sum(dim=1)

    return step, (x,)


def _compiled_module_build():
    model = torch.compile(nn.Linear(32, 8).cuda())
    x = torch.randn(4, 32, device="cuda")
    return (lambda m, x: m(x)), (model, x)


def _module_compiled_in_place_build():
    model = nn.Sequential(nn.Linear(32, 8), nn.ReLU()).cuda()
    model[0].compile()
    x = torch.randn(4, 32, device="cuda")
    return (lambda x: model(x)), (x,)


@pytest.mark.parametrize("build, what", [
    (_compiled_mean_build, "torch.compile(_compiled_mean_build.<locals>.<lambda>)"),
    (_wrapped_step_build, "torch.compile(_wrapped_step_build.<locals>.step)"),
    (_compiled_module_build, "torch.compile(Linear)"),
    (_module_compiled_in_place_build, "0.compile()"),
])
def test_compiled_step_is_said_to_be_predicted_as_eager(build, what):
    cap = capture_workload(build, "h200")
    assert cap.compiled and any(what in note and "predicted as eager" in note for note in cap.notes)
    assert cap.ops  # the eager ops are there to predict
    pred = predict_capture(cap, "h200")
    assert pred.compiled and pred.summary().startswith("compiled step predicted as eager")
    assert Capture.from_json(cap.to_json()).compiled


def test_compiled_code_reached_only_at_run_time_is_noticed():
    compiled = torch.compile(lambda t: t * 2)
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(8, device="cuda")
        _GLOBAL_CALLS.append(compiled)
        _call_global(x)
    assert block.capture.compiled
    assert any("1 call of compiled code" in note for note in block.capture.notes)


_GLOBAL_CALLS: list = []


def _call_global(x):
    return _GLOBAL_CALLS[-1](x)


def test_eager_step_is_not_marked_compiled():
    cap = capture_workload(_small_transformer_build, "h200")
    assert not cap.compiled and not any("torch.compile" in note for note in cap.notes)
    assert not predict_capture(cap, "h200").summary().startswith("compiled")
