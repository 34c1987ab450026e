"""torchvision's detection ops on CUDA: non-maximum suppression and RoI pooling (torchvision/csrc/ops/cuda).

Counted from torchvision's CUDA sources (checked against torchvision 0.29); not yet timed on a GPU, so their
times come from the generic memory-bound kinds at these bytes ("select" for nms, "gather" for the RoI ops,
"fill" for the zeroed gradients):

- nms (nms_kernel.cu): `scores.sort(stable, descending)`, `dets.index_select(0, order)`, the IoU bitmask
  kernel (a ceil(N/64) x ceil(N/64) grid of 64 threads; each thread writes one 64-bit word per column block,
  N * ceil(N/64) words in all), the kept flags zeroed, `gather_keep_from_mask` (one block walks the mask), and
  `order.masked_select(keep)`, whose count the host reads back (the capture records that sync).
- roi_align / roi_pool forward: one kernel, a thread per output element; each reads the feature map at its
  bilinear sample points (roi_align: sampling_ratio^2 points of 4 reads each, adaptive when sampling_ratio
  <= 0) and the RoI row. The feature map is counted once: the samples of nearby outputs overlap, in L2.
- their backward: the gradient zeroed, then one kernel scattering with atomicAdd into it.
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord, TensorMeta

from .common import arg
from .data_dependent import nonzero_kernels, sort_kernels
from .registry import Cost, CostContext, register

NMS_THREADS_PER_BLOCK = 64  # nms_kernel.cu threadsPerBlock: one bit of a 64-bit mask word per box
NMS_MASK_WORD_BYTES = 8
NMS_OWN_KERNELS = 4  # index_select of the boxes, the IoU mask, the zeroed keep flags, gather_keep_from_mask
MASKED_SELECT_INDEX_KERNELS = 1  # masked_select's index() after its nonzero
IOU_FLOPS = 12  # per box pair: intersection (4 max/min, 2 sub, 1 mul), union (2 sub-mul areas, 1 add), compare
BILINEAR_READS = 4  # corners per sample point
BILINEAR_FLOPS = 10  # per sample point: the weights and the weighted sum
ROI_ADAPTIVE_SAMPLES = 2  # sampling_ratio <= 0: ceil(roi size / pooled size) per side; 2 stands in for it
ROI_BACKWARD_KERNELS = 2  # the zeroed grad_input and the atomicAdd scatter


def _roi_samples(op: OpRecord) -> int:
    ratio = int(op.args.get("sampling_ratio", 0) or 0)
    side = ratio if ratio > 0 else ROI_ADAPTIVE_SAMPLES
    return side * side


@register("torchvision.nms")
def nms(op: OpRecord, ctx: CostContext) -> Cost:
    dets, scores = arg(op, "dets"), arg(op, "scores")
    n = dets.shape[0] if dets.shape else 0
    col_blocks = math.ceil(n / NMS_THREADS_PER_BLOCK)
    kept = op.tensors_out()[0].numel if op.tensors_out() else n
    keep_flags = TensorMeta((n,), "bool", (1,), dets.device)
    mask_bytes = n * col_blocks * NMS_MASK_WORD_BYTES
    index_bytes = n * 8  # the sort's int64 order
    kernels = (sort_kernels(scores, 0) + NMS_OWN_KERNELS + nonzero_kernels(keep_flags, kept)
               + MASKED_SELECT_INDEX_KERNELS)
    read = (2 * scores.nbytes + index_bytes  # sort: keys in, order out then read by index_select
            + 2 * dets.nbytes  # index_select reads the boxes; the mask kernel reads the sorted copy
            + mask_bytes + index_bytes + n)  # gather_keep reads the mask; masked_select the order and flags
    written = 2 * scores.nbytes + index_bytes + dets.nbytes + mask_bytes + n + kept * 8
    return Cost(flops=IOU_FLOPS * n * n / 2, bytes_read=read, bytes_written=written, kernels=kernels,
                dtype=dets.dtype, kind="select")


def _roi_forward(op: OpRecord, samples: int, reads_per_sample: int) -> Cost:
    features, rois = arg(op, "input"), arg(op, "rois")
    outs = op.tensors_out()
    out_elements = outs[0].numel if outs else 0
    read = min(features.nbytes, out_elements * samples * reads_per_sample * features.itemsize) + rois.nbytes
    return Cost(flops=BILINEAR_FLOPS * samples * out_elements, bytes_read=read,
                bytes_written=sum(t.nbytes for t in outs), kernels=1, dtype=features.dtype, kind="gather")


@register("torchvision.roi_align")
def roi_align(op: OpRecord, ctx: CostContext) -> Cost:
    return _roi_forward(op, _roi_samples(op), BILINEAR_READS)


@register("torchvision.roi_pool")
def roi_pool(op: OpRecord, ctx: CostContext) -> Cost:
    """roi_pool's thread takes the max over its bin: every input element of the bin, read once."""
    return _roi_forward(op, 1, 1)


@register("torchvision._roi_align_backward", "torchvision._roi_pool_backward")
def roi_backward(op: OpRecord, ctx: CostContext) -> Cost:
    grad, rois = arg(op, "grad"), arg(op, "rois")
    outs = op.tensors_out()
    grad_input = outs[0].nbytes if outs else 0
    samples = _roi_samples(op) if op.packet == "torchvision._roi_align_backward" else 1
    argmax = op.args.get("argmax")
    read = grad.nbytes + rois.nbytes + (argmax.nbytes if isinstance(argmax, TensorMeta) else 0)
    # the zero fill writes grad_input once; the atomics read-modify-write it where samples land (counted once)
    return Cost(flops=BILINEAR_FLOPS * samples * grad.numel, bytes_read=read + grad_input,
                bytes_written=2 * grad_input, kernels=ROI_BACKWARD_KERNELS, dtype=grad.dtype, kind="gather")
