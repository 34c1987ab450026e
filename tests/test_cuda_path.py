"""The CUDA path on a CPU-only torch: what a CUDA build keeps whole or decomposes, CUDA-only ops, attention
backends, modules copied under the capture, compiled steps. Expected counts come from the H200 (torch 2.11,
validation/zoo_measured.json.gz), named by zoo workload."""

import copy

import torch
import torch.nn as nn

from kernelcast.capture import capture, capture_workload
from kernelcast.predict import predict_capture


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
