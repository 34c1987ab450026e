"""Ops a training step reaches that CUDA runs with kernels of its own only (capture/cuda_only.py fakes) or that
torch decomposes into such (median along a dim): each captures on fake CUDA and is costed."""

import pytest
import torch
import torch.nn.functional as F

from kernelcast.capture import capture
from kernelcast.costs import cost_of


def _x():
    return torch.randn(8, 16, 32, device="cuda", requires_grad=True)


STEPS = {
    "logcumsumexp": lambda: torch.logcumsumexp(_x(), 1).sum(),
    "median_along_dim": lambda: torch.median(_x(), 1)[0].sum(),
    "multilabel_margin_loss": lambda: F.multilabel_margin_loss(
        torch.randn(8, 10, device="cuda", requires_grad=True), torch.randint(0, 10, (8, 10), device="cuda")),
    "multi_margin_loss": lambda: F.multi_margin_loss(
        torch.randn(8, 10, device="cuda", requires_grad=True), torch.randint(0, 10, (8,), device="cuda")),
    "fractional_max_pool3d": lambda: F.fractional_max_pool3d(
        torch.randn(2, 3, 8, 8, 8, device="cuda", requires_grad=True), 2, output_size=(4, 4, 4)).sum(),
    "ctc_loss": lambda: F.ctc_loss(torch.randn(50, 4, 20, device="cuda", requires_grad=True).log_softmax(-1),
                                   torch.randint(1, 20, (4, 10), device="cuda"), [50] * 4, [10] * 4),
}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_step_captures_and_every_op_is_costed(name):
    with capture("h200") as cap:
        STEPS[name]().backward()
    device_ops = [op for op in cap.capture.ops if "host" not in op.tags and not op.decomposed]
    assert device_ops and not [op.op for op in device_ops if cost_of(op) is None]


def test_quantization_aware_training_captures_with_its_fake_quantize_kernels():
    """torch.ao.quantization's QAT: the default qconfig's FusedMovingAvgObsFakeQuantize runs
    _fused_moving_avg_obs_fq_helper (FusedObsFakeQuant.cu: aminmax, the moving average, the qparams, the cachemask
    kernel; its flags read on the device) and the per-tensor / per-channel cachemask kernels, CUDA-only ops that
    had failed every capture; the learnable per-tensor form reads its scale and zero point to the host."""
    import torch.ao.quantization as tq
    from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize

    with capture("h200") as cap:
        with cap.paused():
            model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
            model.train()
            model.qconfig = tq.get_default_qat_qconfig("fbgemm")
            model = tq.prepare_qat(model).cuda()
            learnable = _LearnableFakeQuantize(observer=tq.MovingAverageMinMaxObserver, quant_min=0,
                                               quant_max=255).cuda()
            x = torch.randn(4, 16, device="cuda", requires_grad=True)
        (model(x).sum() + learnable(x).sum()).backward()
        torch.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127)
    ops = cap.capture.ops
    fused = [op for op in ops if op.op == "aten._fused_moving_avg_obs_fq_helper.default"]
    assert len(fused) == 2 and {cost_of(op).kernels for op in fused} == {4} and not any(op.sync for op in fused)
    cachemask = [op for op in ops if op.op == "aten.fake_quantize_per_tensor_affine_cachemask.default"]
    assert [cost_of(op).kernels for op in cachemask] == [1]
    per_tensor = [op.sync for op in ops if op.op.startswith("aten._fake_quantize_learnable_per_tensor_affine")]
    assert per_tensor == ["fake quant qparams", "fake quant qparams"]  # forward and backward
    device_ops = [op for op in ops if "host" not in op.tags and not op.decomposed]
    assert not [op.op for op in device_ops if cost_of(op) is None]


def test_an_embedding_with_max_norm_waits_for_its_unique_count():
    # Embedding.cu embedding_renorm_cuda_: sort, cub::unique, the unique count read to size the grid, renorm
    with capture("h200") as cap:
        with cap.paused():
            table = torch.nn.Embedding(1000, 32, max_norm=1.0).cuda()
            ids = torch.randint(0, 1000, (64,), device="cuda")
        table(ids).sum().backward()
    renorm = [op for op in cap.capture.ops if op.op == "aten.embedding_renorm_.default"]
    assert [op.sync for op in renorm] == ["embedding renorm"] and cost_of(renorm[0]).kernels == 5


@pytest.mark.parametrize("call", [lambda t: t.repeat(2, 1), lambda t: t.repeat(3, 1, 1), lambda t: t.tile((2, 2))])
def test_repeat_and_tile_capture_as_one_copy(call):
    # TensorShape.cpp repeat copies into an unfolded view of its result, which fake tensors could not run (GPT-J's,
    # ViTMAE's, DeBERTa's and Reformer's steps failed); H100, torch 2.11, OpInfo repeat and tile: one device copy
    with capture("h200") as cap:
        with cap.paused():
            t = torch.randn(4, 8, device="cuda")
        call(t)
    ops = [op for op in cap.capture.ops if op.op.startswith("aten.") and not op.decomposed]
    assert [op.op for op in ops] == ["aten.repeat.default"] and cost_of(ops[0]).kernels == 1
