"""Backward formulas captured as a GPU runs them, not by their branch for tensor subclasses (capture/real_backward.py).

Expected work items and sync points are the H100's (torch 2.11, validation/probes/opinfo_items/
opinfo_items_run1.json.gz: OpInfo cumprod and prod, 5 x 5 x 5 fp32, forward and backward, the backward seeded by
a gradient of ones: one fill kernel), counted here the same way."""

import pytest
import torch

from kernelcast.capture import capture
from kernelcast.costs import cost_of


def _forward_and_backward(f, shape=(5, 5, 5), index=()):
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(shape, device="cuda", requires_grad=True)
            args = (torch.tensor(index, device="cuda"),) if index else ()
        out = f(x, *args)
        out.backward(torch.ones_like(out))
    ops = cap.capture.ops
    items = sum(0 if op.decomposed else cost_of(op).kernels for op in ops)
    return ops, items, cap.capture.notes


@pytest.mark.parametrize("f, measured_items", [
    # scan; fill; mul, eq, any, the copy to the host, flip, scan, flip, div
    (lambda x: torch.cumprod(x, 1), 10),
    # prod; fill; eq, nonzero (cub reduce, the copy, compact init, select sweep), div, mul
    (lambda x: x.prod(), 9),
    # prod; fill; eq, the bool -> long copy and the sum along dim, the sum, the copy to the host, div, mul
    (lambda x: torch.prod(x, 1), 9),
])
def test_cumprod_and_prod_backward_run_the_branch_a_gpu_runs(f, measured_items):
    ops, items, notes = _forward_and_backward(f)
    assert items == measured_items
    assert [op.sync for op in ops if op.sync] in (["item"], ["nonzero"])
    assert any("assumed to hold no zero" in n and "test_real_backward.py" in n for n in notes)


def test_cumprod_backward_is_not_a_loop_over_the_dim():
    # the subclass branch runs about five ops per element along dim; the GPU's runs six whatever its length
    _, short, _ = _forward_and_backward(lambda x: torch.cumprod(x, 1), (4, 8))
    _, long, _ = _forward_and_backward(lambda x: torch.cumprod(x, 1), (4, 256))
    assert short == long


def test_calls_without_a_gradient_are_left_alone():
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(8, 8, device="cuda")
        torch.cumprod(x, 0)
        x.prod()
    assert [op.op for op in cap.capture.ops if op.op.startswith("aten.")] == [
        "aten.cumprod.default", "aten.prod.default"]
    assert not cap.capture.notes


@pytest.mark.parametrize("f, shape, index, measured_items, measured_syncs", [
    # index_select's backward: indexSelectSmallIndex; fill; new_zeros' fill, index_add_ in place (no copy first)
    (lambda x, i: x.index_select(0, i), (), [0], 4, 0),
    # take's backward: take; fill; zeros_like's fill, put_ in place
    (lambda x, i: x.take(i), (3, 3), [0, 4, 8], 4, 0),
    # trace's backward: the sum; fill; zeros' fill, arange, the gradient read to the host, index_fill_ with it
    (lambda x: x.trace(), (5, 5), (), 6, 1),
])
def test_index_backward_formulas_write_in_place_as_a_gpu_run_does(f, shape, index, measured_items, measured_syncs):
    # H100, torch 2.11, OpInfo index_select / take / trace backward (opinfo_items_run1.json.gz, sample 0)
    ops, items, notes = _forward_and_backward(f, shape, index)
    assert items == measured_items
    assert len([op for op in ops if op.sync]) == measured_syncs
    assert not notes


def test_a_gradient_penalty_through_modules_captures():
    # WGAN-GP: the critic's gradient with respect to its (leaf) input, then that gradient's norm trained; the
    # capture's module tracker had made torch.autograd.grad refuse a leaf (session.py _CountingTracker._enter)
    with capture("h200") as cap:
        with cap.paused():
            critic = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.LeakyReLU(0.2),
                                         torch.nn.Conv2d(8, 1, 3, padding=1)).cuda()
            x = torch.randn(4, 3, 16, 16, device="cuda", requires_grad=True)
        (grad,) = torch.autograd.grad(critic(x).sum(), x, create_graph=True)
        ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean().backward()
    backward = [op for op in cap.capture.ops if op.phase == "backward"]
    assert any(op.op == "aten.convolution_backward.default" for op in backward)
    assert not [op.op for op in cap.capture.ops if "host" not in op.tags and not op.decomposed and cost_of(op) is None]


def test_torch_func_transforms_are_left_to_torch():
    # under torch.func (per-sample gradients, MAML) the input is functorch's wrapper: not routed, it runs as torch
    # writes it
    with capture("h200") as cap:
        with cap.paused():
            x = torch.rand(4, 6, device="cuda") + 0.5
        torch.func.grad(lambda t: torch.cumprod(t, 1).sum() + t.prod())(x)
    assert any(op.op == "aten.cumprod.default" for op in cap.capture.ops)
