"""torchvision's detection ops on fake CUDA: nms's data-dependent size and sync, RoI align's kernels.

Counted from torchvision's CUDA sources (costs/detection.py); runs where torchvision is installed (CI's torch
2.14.1 CUDA leg installs torchvision 0.29.1 beside it).
"""

import pytest
import torch

from kernelcast.capture import capture
from kernelcast.costs import cost_of
from kernelcast.predict import predict_capture

torchvision = pytest.importorskip("torchvision")


def _boxes(n: int) -> torch.Tensor:
    corners = torch.rand(n, 2, device="cuda") * 100
    return torch.cat([corners, corners + 10], dim=1)


def test_nms_keeps_an_upper_bound_of_boxes_with_its_sync_and_launches():
    with capture("h200") as cap:
        with cap.paused():
            boxes, scores = _boxes(1000), torch.rand(1000, device="cuda")
        keep = torchvision.ops.nms(boxes, scores, 0.5)
    assert keep.shape == (1000,) and keep.dtype == torch.long  # every box assumed kept
    (nms,) = [o for o in cap.capture.ops if o.op == "torchvision.nms.default"]
    assert nms.sync == "nms"
    assert any("every box assumed kept" in n for n in cap.capture.notes)
    # sort of 1000 float32 keys: values copy + in-place small sort (1 + 4); index_select, IoU mask, zeroed keep
    # flags, gather_keep_from_mask (4); masked_select: nonzero of 1000 flags (1 reduce + 2 select + 1 copy to
    # host) and its index (1): 5 + 4 + 4 + 1 = 14
    assert cost_of(nms).kernels == 14


def test_nms_of_boxes_the_host_knows_keeps_exactly_what_the_cpu_kernel_keeps():
    with capture("h200") as cap:
        boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [50.0, 50.0, 60.0, 60.0]]).cuda()
        scores = torch.tensor([0.9, 0.8, 0.7]).cuda()
        keep = torchvision.ops.nms(boxes, scores, 0.5)  # box 1 overlaps box 0 by IoU 81/119 > 0.5
    assert keep.shape == (2,) and not any("assumed kept" in n for n in cap.capture.notes)


def test_roi_align_forward_and_backward_are_costed():
    with capture("h200") as cap:
        with cap.paused():
            features = torch.randn(2, 256, 50, 50, device="cuda", requires_grad=True)
            rois = torch.cat([torch.zeros(128, 1, device="cuda"), _boxes(128)], dim=1)
        torchvision.ops.roi_align(features, rois, (7, 7), 0.25, 2).sum().backward()
    pred = predict_capture(cap.capture, "h200")
    assert not pred.uncosted
    by_op = {o.op: cost_of(o) for o in cap.capture.ops if o.op.startswith("torchvision.")}
    assert by_op["torchvision.roi_align.default"].kernels == 1
    assert by_op["torchvision._roi_align_backward.default"].kernels == 2  # zeroed grad_input, atomicAdd scatter
    # 128 RoIs x 256 channels x 7 x 7 outputs, 2 x 2 samples of 10 FLOPs each
    assert by_op["torchvision.roi_align.default"].flops == 10 * 4 * 128 * 256 * 49
