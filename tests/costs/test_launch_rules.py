"""Kernel launch counts that PyTorch's CUDA host code decides by shape, dtype and alignment, and the in-place
backward work a GPU run does. Each expected count is what the workplace H200 ran (torch 2.11,
validation/zoo_measured.json.gz), with the zoo workload it comes from."""

import pytest
import torch
import torch.nn.functional as F

from helpers import contiguous, op
from kernelcast.capture import capture
from kernelcast.costs import DEFAULT_CONTEXT, cost_of
from kernelcast.costs.cub import (num_bits, radix_sort_keys_kernels, radix_sort_pairs_kernels,
                                 segmented_radix_sort_kernels, single_tile_keys)
from kernelcast.costs.data_dependent import stable_sort_kernels
from kernelcast.costs.norms import aligned, layer_norm_forward_kernels
from kernelcast.records import TensorMeta


def _kernels(cap, name, phase=None):
    """Work items per call of an op the step made (by overload packet name), in order; an op CUDA runs by calling
    others (capture/decompose.py) counts the work items of the ops it called."""
    ops = cap.capture.ops
    totals = {}
    for o in ops:
        root = o.index if o.parent < 0 else _root(ops, o)
        if ops[root].name == name and (phase is None or ops[root].phase == phase):
            cost = cost_of(o) if not o.tags or "decomposed" not in o.tags else None
            totals[root] = totals.get(root, 0) + (cost.kernels if cost else 0)
    return [totals[k] for k in sorted(totals)]


def _root(ops, o):
    while o.parent >= 0:
        o = ops[o.parent]
    return o.index


def _ops(cap, phase):
    return [o.op for o in cap.capture.ops if o.phase == phase]


def _loss(t):
    """A loss whose gradient is dense (.sum()'s is an expanded view, which CUDA kernels copy first)."""
    return t.square().mean()


# -- layer norm, RMS norm, group norm ------------------------------------------------------------------------

def test_layer_norm_vectorizes_only_widths_that_are_multiples_of_four():
    # H200: zoo layernorm_odd_widths, and the shared case (five calls over (4096, 2041) fp32: 10 kernels; 2040:
    # 5): RowwiseMomentsCUDAKernel + LayerNormForwardCUDAKernel for 2041, 770, 1023; vectorized_layer_norm_kernel
    # for 2040. Backward without weight: one input-gradient kernel (vectorized or not).
    with capture("h200") as cap:
        with cap.paused():
            xs = [torch.randn(4096, n, device="cuda", requires_grad=True) for n in (2041, 2040, 770, 1023)]
        sum(_loss(F.layer_norm(x, (x.shape[-1],))) for x in xs).backward()
    assert _kernels(cap, "native_layer_norm") == [2, 1, 2, 2]  # 7 in all, as measured
    assert _kernels(cap, "native_layer_norm_backward") == [1, 1, 1, 1]  # 4, as measured


def test_layer_norm_copies_a_strided_input_in_forward_and_backward():
    # H200: zoo convnext_train, LayerNorm over channels of a permuted NCHW tensor (16, 56, 56, 96): forward
    # contiguous() copy + vectorized kernel; backward X.expect_contiguous() copy + input gradient + one
    # GammaBetaBackward kernel (M = 50176 rows: no split).
    with capture("h200") as cap:
        with cap.paused():
            norm = torch.nn.LayerNorm(96).cuda()
            x = torch.randn(16, 96, 56, 56, device="cuda", requires_grad=True)
        _loss(norm(x.permute(0, 2, 3, 1))).backward()
    assert _kernels(cap, "native_layer_norm") == [2]
    assert _kernels(cap, "native_layer_norm_backward") == [3]


def test_layer_norm_alignment_follows_the_storage_offset():
    # A view one fp32 element into its storage is 4 bytes past a 512-byte aligned allocation: not 16-byte
    # aligned, so the unvectorized pair of kernels (layer_norm_kernel.cu, can_vectorize).
    x = contiguous((64, 256))
    shifted = TensorMeta((64, 256), "float32", (256, 1), offset=1)
    assert aligned(x, 16) and not aligned(shifted, 16) and aligned(TensorMeta((4,), "float32", (1,), offset=4), 16)
    assert layer_norm_forward_kernels(x, 256, None, None) == 1
    assert layer_norm_forward_kernels(shifted, 256, None, None) == 2
    assert layer_norm_forward_kernels(contiguous((64, 256), "float64"), 256, None, None) == 2  # no double path
    assert TensorMeta.from_json(shifted.to_json()) == shifted  # the offset survives a saved capture


def test_rms_norm_stays_one_fused_op():
    # H200: zoo layernorm_odd_widths, nn.RMSNorm(2040): one vectorized_layer_norm_kernel<float, float, true>
    # forward; layer_norm_grad_input_kernel_vectorized + GammaBetaBackwardCUDAKernelTemplate backward.
    with capture("h200") as cap:
        with cap.paused():
            rms = torch.nn.RMSNorm(2040).cuda()
            x = torch.randn(4096, 2040, device="cuda", requires_grad=True)
        _loss(rms(x)).backward()
    assert _kernels(cap, "_fused_rms_norm") == [1]
    assert _kernels(cap, "_fused_rms_norm_backward") == [2]
    assert "aten.rsqrt.default" not in _ops(cap, "forward")


def test_group_norm_kernels_forward_and_backward():
    # H200: zoo unet_block_train, GroupNorm(32, C) over (8, C, 32, 32): RowwiseMoments, ComputeFusedParams and
    # the normalising kernel forward (3); backward ComputeInternalGradients, rstd*gamma, ComputeBackwardFused-
    # Params, the dX kernel and GammaBetaBackward (5), or 2 when the input needs no gradient.
    with capture("h200") as cap:
        with cap.paused():
            norm = torch.nn.GroupNorm(32, 128).cuda()
            x = torch.randn(8, 128, 32, 32, device="cuda")
            y = torch.randn(8, 128, 32, 32, device="cuda", requires_grad=True)
        (norm(x).sum() + norm(y).sum()).backward()
    assert _kernels(cap, "native_group_norm") == [3, 3]
    assert sorted(_kernels(cap, "native_group_norm_backward")) == [2, 5]


# -- indexing -----------------------------------------------------------------------------------------------

def test_radix_sort_pairs_single_tile_and_onesweep():
    assert single_tile_keys(8) == 256 * 9  # 19 * 4 / 8 = 9 items a thread for 64-bit keys or values
    assert radix_sort_pairs_kernels(36, 64) == 1  # H200, zoo dlrm_train_adagrad: DeviceRadixSortSingleTileKernel
    # H200, zoo gcn_train: 500000 keys below 2^16: 2 memsets + histogram + exclusive sum + 2 x (memset, onesweep)
    assert num_bits(49999) == 16 and radix_sort_pairs_kernels(500000, 16) == 8
    # H200, zoo dlrm_train_adagrad (embedding bag backward, all 64 bits): 2 + 8 memsets, 1 + 1 + 8 kernels
    assert radix_sort_pairs_kernels(40960, 64) == 20


def test_radix_sort_passes_follow_the_key_bytes():
    # Onesweep for keys of 4 bytes and more: 2 memsets + histogram + exclusive sum + (memset, onesweep) per byte.
    # H200 (validation/probes/cuda_path_probe.json): torch.sort of 4097 float32 keys ran 12 sort items (+ copy +
    # index fill = 14), int64 20 (22): with int64 values a tile holds only 256 * 9 keys, so 4097 is no single tile.
    assert radix_sort_pairs_kernels(4097, 32, key_bytes=4) == 4 + 2 * 4 == 12
    assert radix_sort_pairs_kernels(4097, 64, key_bytes=8) == 4 + 2 * 8 == 20
    # topk_large_k (validation/probes/launch_rules.json): the segment ids of 4 x 5000 keys, int64 over 2 bits: 6
    assert radix_sort_keys_kernels(20000, 2, 8) == 4 + 2 * 1 == 6
    # Keys under 4 bytes skip onesweep (CUB Policy800): upsweep, scan, downsweep per 7-bit pass; not measured.
    assert radix_sort_keys_kernels(1 << 20, 16, 2) == 3 * 3
    assert segmented_radix_sort_kernels(32, 4) == 6  # ceil(32 / 6) passes, one kernel each; not measured


@pytest.mark.parametrize("dtype,n,items", [("float32", 4096, 5), ("float32", 4097, 14), ("float32", 8192, 14),
                                           ("float32", 1 << 20, 14), ("int64", 4096, 5), ("int64", 4097, 22),
                                           ("int64", 65536, 22), ("int64", 1 << 20, 22)])
def test_sort_items_by_length_and_key_bytes(dtype, n, items):
    # H200, torch 2.11 (validation/probes/cuda_path_probe.json): torch.sort of a 1-D tensor, all work items. Up to
    # 4096: values copy, arange + copy, values copy, the in-place slice sort = 5. Beyond: values copy,
    # fill_reverse_indices_kernel and the onesweep sort of the pairs: 1 + 1 + 12 (float32) or 1 + 1 + 20 (int64).
    x = contiguous((n,), dtype)
    record = op("aten.sort.default", {"self": x, "dim": -1}, [x, contiguous((n,), "int64")])
    assert cost_of(record).kernels == items


def test_stable_sort_paths_by_segments():
    # SortStable.cu launch_stable_sort_kernel: one segment; < 128 segments by full sort (topk_large_k: 20);
    # 128 and more: the index fill + one segmented radix sort (not measured).
    assert stable_sort_kernels(4097, 1, 4) == 1 + 12
    assert stable_sort_kernels(5000, 4, 4) == 1 + 12 + 6 + 1
    assert stable_sort_kernels(5000, 256, 4) == 1 + 6
    assert stable_sort_kernels(1_000_000, 2, 4) == 1 + 2 * 12  # segments of 10**6 keys sorted one at a time


def test_index_put_accumulate_checks_the_index_range():
    # H200, torch 2.11 (validation/probes/launch_rules.json, index_put_accumulate_checked): target.index_put_((idx,),
    # vals, accumulate=True) with 5000 indices into 1000 rows: max, lt, _assert_async, min, ge, _assert_async (6),
    # remainder, mul, divide_, arange (4), a 10-bit onesweep sort (2 + 2 + 2 x 2 = 8) and indexing_backward (1) = 19
    with capture("h200") as cap:
        with cap.paused():
            target = torch.zeros(1000, 64, device="cuda")
            idx = torch.randint(0, 1000, (5000,), device="cuda")
            vals = torch.randn(5000, 64, device="cuda")
        target.index_put_((idx,), vals, accumulate=True)
    assert _kernels(cap, "index_put_") == [19]


def test_topk_with_large_k_sorts_the_k_values_with_cub():
    # H200, torch 2.11 (validation/probes/launch_rules.json, topk_large_k): topk(4 x 10000, k=5000): gatherTopK,
    # then sort_outf of the 4 x 5000 values: their copy, fill_index_and_segment, the pairs sort (12), the segment
    # ids' sort (6), sort_postprocess; then indices.gather, indices.copy_, values.copy_: 1 + 1 + 20 + 3 = 25.
    with capture("h200") as cap:
        with cap.paused():
            wide = torch.randn(4, 10_000, device="cuda")
        torch.topk(wide, 5000)
    assert _kernels(cap, "topk") == [25]


def test_indexing_backward_accumulates_in_place_with_a_sort():
    # H200, zoo gcn_train: the backward of h[src] (500000 rows into 50000 x 256): _index_put_impl_ with
    # remainder, mul, divide_, arange, an 8-item radix sort and indexing_backward_kernel: 13 work items.
    with capture("h200") as cap:
        with cap.paused():
            h = torch.randn(50000, 256, device="cuda", requires_grad=True)
            src = torch.randint(0, 50000, (500000,), device="cuda")
        _loss(h[src]).backward()
    backward = _ops(cap, "backward")
    assert "aten._index_put_impl_.default" in backward and "aten.index_put.default" not in backward
    assert _kernels(cap, "_index_put_impl_") == [13]


def test_two_index_backward_with_a_strided_value():
    # H200, zoo dlrm_train_adagrad: z[:, li, lj] backward over (2048, 9, 9) with 36 pairs and a strided
    # gradient: 2 x (remainder, mul), add_, contiguous(), divide_, arange, a single-tile sort, the kernel = 10.
    self_t = contiguous((2048, 9, 9))
    idx = contiguous((36,), "int64")
    values = TensorMeta((2048, 36), "float32", (100, 1))
    record = op("aten._index_put_impl_.default", {"self": self_t, "indices": (None, idx, idx), "values": values,
                                                  "accumulate": True, "unsafe": True}, [self_t])
    assert cost_of(record).kernels == 10


def test_scalar_into_a_mask_is_a_masked_fill_without_a_sync():
    # H200, zoo optim_rprop: grad[mask] = 0 ran masked_fill_ under index_put_ (48 kernels, no nonzero, no sync).
    with capture("h200") as cap:
        with cap.paused():
            g = torch.randn(256, 256, device="cuda")
            mask = torch.rand(256, 256, device="cuda") > 0.5
        g[mask] = 0
    puts = [o for o in cap.capture.ops if o.name == "index_put_"]
    assert len(puts) == 1 and puts[0].sync is None and cost_of(puts[0]).kernels == 1


def test_scatter_family_and_index_add():
    # H200, zoo gat_forward_scatter: scatter_reduce(amax) out of place = two DtoD copies + the kernel;
    # scatter_add_ and index_add_ one kernel each.
    with capture("h200") as cap:
        with cap.paused():
            score = torch.randn(2000, 4, device="cuda")
            dst = torch.randint(0, 100, (2000,), device="cuda")
            h = torch.randn(2000, 4, 32, device="cuda")
        full = torch.full((100, 4), float("-inf"), device="cuda")
        full.scatter_reduce(0, dst[:, None].expand(-1, 4), score, reduce="amax")
        torch.zeros(100, 4, device="cuda").scatter_add_(0, dst[:, None].expand(-1, 4), score)
        torch.zeros(100, 4, 32, device="cuda").index_add_(0, dst, h)
    assert _kernels(cap, "scatter_reduce") == [3]
    assert _kernels(cap, "scatter_add_") == [1] and _kernels(cap, "index_add_") == [1]


def test_backward_formulas_run_in_place_as_on_cuda():
    # H200, zoo moe_train: topk's backward ran zeros + scatter_ (value_selecting_reduction_backward); gather's
    # backward likewise scatter_add_ (FunctionsManual.cpp, the non-subclass branch).
    with capture("h200") as cap:
        with cap.paused():
            w = torch.randn(64, 16, device="cuda", requires_grad=True)
            idx = torch.randint(0, 16, (64, 4), device="cuda")
        (torch.topk(w, 2, dim=1).values.sum() + torch.gather(w, 1, idx).sum()).backward()
    backward = _ops(cap, "backward")
    assert "aten.scatter_.src" in backward and "aten.scatter.src" not in backward
    assert "aten.scatter_add_.default" in backward and "aten.scatter_add.default" not in backward


def test_gradients_meeting_at_a_tensor_add_in_place_unless_shared_or_expanded():
    # H200, zoo qwen2_train / bart_train: the residual stream's gradients were summed with add_ (45 and 34
    # calls); the first sum of a .sum()'s expanded gradient stays out of place (can_accumulate_inplace).
    with capture("h200") as cap:
        with cap.paused():
            lin1, lin2 = torch.nn.Linear(64, 64).cuda(), torch.nn.Linear(64, 64).cuda()
            x = torch.randn(8, 64, device="cuda", requires_grad=True)
        h = x + lin1(x)
        (h + lin2(h)).sum().backward()
    adds = [o.op for o in cap.capture.ops if o.phase == "backward" and o.name in ("add", "add_")]
    assert adds == ["aten.add.Tensor", "aten.add_.Tensor"]


# -- embedding bags ------------------------------------------------------------------------------------------

def test_embedding_bag_forward_and_sorted_backward():
    # H200, zoo dlrm_train_adagrad: one EmbeddingBag_updateOutputKernel_sum_mean per table; backward 32 work
    # items: grad.contiguous(), arange, a 64-bit onesweep sort (20), unique_by_key (2), partials per segment,
    # an exclusive sum (2), partial-segment count and offsets, compute_grad_weight_bags, sum_and_scatter, zeros.
    with capture("h200") as cap:
        with cap.paused():
            bag = torch.nn.EmbeddingBag(100_000, 64, mode="sum").cuda()
            idx = torch.randint(0, 100_000, (40960,), device="cuda")
            offsets = torch.arange(0, 40960, 20, device="cuda")
            dense = torch.randn(2048, 64, device="cuda")
        _loss(torch.cat([bag(idx, offsets), dense], dim=1)).backward()  # a strided gradient, as in DLRM
    assert _kernels(cap, "_embedding_bag") == [1]
    assert _kernels(cap, "_embedding_bag_backward") == [32]


# -- scans, top-k, losses, roll ------------------------------------------------------------------------------

def test_scans_topk_roll_and_losses():
    with capture("h200") as cap:
        with cap.paused():
            mask = torch.ones(4, 128, dtype=torch.int32, device="cuda")
            flat = torch.ones(128, dtype=torch.int32, device="cuda")
            scores = torch.randn(2048, 8, device="cuda")
            img = torch.randn(8, 56, 56, 96, device="cuda", dtype=torch.bfloat16)
            a, b = torch.randn(4096, device="cuda", requires_grad=True), torch.randn(4096, device="cuda")
            big = torch.randn(1024, 128, device="cuda", requires_grad=True)
        mask.cumsum(-1)  # H200, zoo qwen2_train: int32 -> int64 copy + tensor_kernel_scan_innermost_dim
        flat.cumsum(0)  # H200, zoo mixtral_forward: one-dim scans are cub's DeviceScanInit + DeviceScan (+ copy)
        torch.topk(scores, 2, dim=-1)  # H200, zoo moe_train: sbtopk::gatherTopK + bitonicSortKVInPlace
        torch.roll(img, (3, 3), (1, 2))  # H200, zoo swin_forward: one roll_cuda_kernel per dim
        F.mse_loss(a, b).backward()  # H200, zoo sparse_embedding_sgd: mse kernel + mean (no semaphore: 4096)
        F.huber_loss(big, big.detach() * 2).backward()  # zoo losses_train: 131072 elements, mean with a memset
    assert _kernels(cap, "cumsum") == [2, 3]
    assert _kernels(cap, "topk") == [2]
    assert _kernels(cap, "roll") == [2]
    assert _kernels(cap, "mse_loss") == [2] and _kernels(cap, "mse_loss_backward") == [2]  # zeros_like + kernel
    assert _kernels(cap, "huber_loss") == [3] and _kernels(cap, "huber_loss_backward") == [2]


@pytest.mark.parametrize("name,args,kernels", [
    ("aten.tril_indices.default", {"row": 9, "col": 9, "offset": -1}, 1),  # H200, zoo dlrm: tril_indices_kernel
    ("aten.hardswish.default", {"self": contiguous((64, 16, 56, 56))}, 1),  # H200, zoo mobilenet: one kernel each
])
def test_single_kernel_ops(name, args, kernels):
    out = contiguous((2, 36), "int64") if "tril" in name else contiguous((64, 16, 56, 56))
    assert cost_of(op(name, args, [out]), DEFAULT_CONTEXT).kernels == kernels


def test_grad_scaler_unscale_and_update_are_costed():
    # H200, zoo amp_fp16_gradscaler_train: GradScaler.unscale_ ran one multi_tensor_apply launch
    # (_amp_foreach_non_finite_check_and_unscale_), update one kernel (_amp_update_scale_)
    with capture("h200") as cap:
        with cap.paused():
            model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8)).cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            x = torch.randn(8, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).float().square().mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert _kernels(cap, "_amp_foreach_non_finite_check_and_unscale_") == [1]
    assert _kernels(cap, "_amp_update_scale_") == [1]
    assert not cap.predict("h200").uncosted
