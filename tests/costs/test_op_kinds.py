"""Work items of op kinds the zoo found uncosted (issue 9), captured on fake CUDA and costed: each expected count
is the H200's (torch 2.11, validation/zoo_measured.json.gz), named with the zoo workload it comes from."""

import pytest
import torch
import torch.nn.functional as F

from kernelcast.capture import capture
from kernelcast.costs import CostContext, cost_of


def _items(block) -> dict[str, int]:
    """Work items per op overload the step called (summed over calls); an op CUDA runs by calling others
    (capture/decompose.py) counts the items of the ops it called."""
    ops = block.capture.ops
    items: dict[str, int] = {}
    for op in ops:
        cost = cost_of(op)
        assert cost is not None, f"{op.op} is uncosted"
        root = op
        while root.parent >= 0:
            root = ops[root.parent]
        kernels = 0 if op.decomposed else cost.kernels
        items[root.op] = items.get(root.op, 0) + kernels
    return items


def test_huber_and_smooth_l1_loss_and_their_backward():
    # H200, torch 2.11: zoo losses_train, (1024, 128) fp32, mean: the loss kernel, the reduce's semaphore memset
    # and the mean (3); backward zeros_like then the gradient kernel (2).
    with capture("h200") as cap:
        out = torch.randn(1024, 128, device="cuda", requires_grad=True)
        target = torch.randn(1024, 128, device="cuda")
        with cap.paused():
            pass
        loss = F.huber_loss(out, target, delta=0.5) + F.smooth_l1_loss(out, target)
        loss.backward()
    items = _items(cap)
    assert items["aten.huber_loss.default"] == 3 and items["aten.smooth_l1_loss.default"] == 3
    assert items["aten.huber_loss_backward.default"] == 2 and items["aten.smooth_l1_loss_backward.default"] == 2


def test_stack_of_scalars_is_one_batched_cat():
    # H200, torch 2.11: zoo losses_train, four 0-d losses stacked: one CatArrayBatchedCopy.
    with capture("h200") as cap:
        with cap.paused():
            parts = [torch.randn((), device="cuda") for _ in range(4)]
        torch.stack(parts)
    assert _items(cap) == {"aten.stack.default": 1}


def test_pointwise_ops_torch_does_not_tag_are_one_kernel_each():
    # H200, torch 2.11: zoo mobilenet_train (hardswish, hardswish_backward, hardsigmoid_backward: 19, 19, 4 for as
    # many calls), mixtral_forward (floor_divide: 2 for 2) and bart_train (masked_fill_: 1 for 1).
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(8, 16, 32, 32, device="cuda", requires_grad=True)
            mask = torch.rand(8, 16, 32, 32, device="cuda") > 0.5
            idx = torch.randint(0, 100, (64,), device="cuda")
        (F.hardswish(x) + F.hardsigmoid(x)).sum().backward()
        idx // 7
        x.detach().masked_fill_(mask, 0.0)
    items = _items(cap)
    for name in ("aten.hardswish.default", "aten.hardswish_backward.default", "aten.hardsigmoid_backward.default",
                 "aten.floor_divide.default", "aten.masked_fill_.Scalar"):
        assert items[name] == 1, name


def test_stft_front_end_pad_and_fft():
    # H200, torch 2.11: zoo audio_spectrogram_forward, 8 x 160000 samples, n_fft 400: reflection_pad1d one
    # kernel, _fft_r2c one cuFFT kernel (regular_fft_r2c<400>).
    with capture("h200") as cap:
        with cap.paused():
            audio = torch.randn(8, 160000, device="cuda")
            window = torch.hann_window(400, device="cuda")
        torch.stft(audio, 400, 160, window=window, return_complex=True)
    items = _items(cap)
    assert items["aten.reflection_pad1d.default"] == 1 and items["aten._fft_r2c.default"] == 1


def test_histc_with_a_range_is_a_fill_and_the_histogram():
    # H200, torch 2.11: zoo mixtral_forward, histc(bins=8, min=0, max=8): zeros, then kernelHistogram1D.
    with capture("h200") as cap:
        with cap.paused():
            experts = torch.randint(0, 8, (512,), device="cuda").to(torch.int32)
        torch.histc(experts, bins=8, min=0, max=8)
        torch.histc(experts.float(), bins=8)  # min == max: the range is read back to the host first
    histc = [op for op in cap.capture.ops if op.op == "aten.histc.default"]
    assert [cost_of(op).kernels for op in histc] == [2, 6]  # + min, .cpu(), max, .cpu()
    assert [op.sync for op in histc] == [None, "histc range"]


@pytest.mark.slow
def test_grouped_mm_cutlass_path_and_fallback():
    # H200, torch 2.11: zoo mixtral_forward, bf16 on sm_90: prepare_grouped_gemm_data and the CUTLASS grouped
    # GEMM, 8 items for 4 calls. Elsewhere (an A100) torch copies the offsets to the host and runs one mm per
    # group (_grouped_mm_fallback).
    def run(gpu):
        with capture(gpu) as cap:
            with cap.paused():
                tokens = torch.randn(64, 32, device="cuda", dtype=torch.bfloat16)
                weights = torch.randn(4, 32, 48, device="cuda", dtype=torch.bfloat16)
                offs = torch.tensor([16, 32, 48, 64], device="cuda", dtype=torch.int32)
            torch._grouped_mm(tokens, weights, offs=offs)
        return next(op for op in cap.capture.ops if op.op == "aten._grouped_mm.default")

    fast, fallback = run("h200"), run("a100")
    assert cost_of(fast).kernels == 2 and fast.sync is None
    assert cost_of(fast).flops == 2 * 64 * 48 * 32  # each token row meets one expert's (32, 48) weight
    assert cost_of(fallback, CostContext(capability=(8, 0))).kernels == 1 + 4  # offsets to the host, 4 mm
    assert fallback.sync == "grouped_mm offsets"
    # fp32 on the H200 takes the fallback too (transformers' MoE experts in an fp32 model), which torch's meta,
    # bf16 only, had refused: every fp32 Mixtral / Qwen2-MoE training step failed to capture
    with capture("h200") as cap:
        with cap.paused():
            tokens, weights = torch.randn(64, 32, device="cuda"), torch.randn(4, 32, 48, device="cuda")
            offs = torch.tensor([16, 32, 48, 64], device="cuda", dtype=torch.int32)
        out = torch._grouped_mm(tokens, weights, offs=offs)
    fp32 = next(op for op in cap.capture.ops if op.op == "aten._grouped_mm.default")
    assert out.shape == (64, 48) and out.dtype == torch.float32 and fp32.sync == "grouped_mm offsets"
    assert cost_of(fp32).kernels == 1 + 4


def test_linalg_solve_launches_and_syncs_on_its_info_check():
    # H200, torch 2.11: zoo linalg_solve, ten 30x30 fp32 solves, one right-hand side: _linalg_solve_ex 160 items
    # (per call: copy + cuSOLVER getrf 7; copy of B + info fill + getrs 6) and _linalg_check_errors 30 (any's
    # cast and copy, the device-to-host copy); 10 cudaStreamSynchronize per step.
    with capture("h200") as cap:
        with cap.paused():
            a = torch.rand(30, 30, device="cuda") + 30 * torch.eye(30, device="cuda")
            b = torch.rand(30, 1, device="cuda")
        for _ in range(10):
            torch.linalg.solve(a, b)
    items = _items(cap)
    assert items == {"aten._linalg_solve_ex.default": 160, "aten._linalg_check_errors.default": 30}
    syncs = [op.sync for op in cap.capture.ops if op.sync]
    assert syncs == ["linalg info"] * 10


@pytest.mark.parametrize("call, synced", [
    (lambda a: torch.linalg.solve_ex(a, a[:, :1]), False),  # the *_ex ops leave info on the device
    (lambda a: torch.linalg.inv(a), True),
    (lambda a: torch.linalg.cholesky(a), True),
    (lambda a: torch.linalg.eigh(a), True),  # _linalg_eigh checks inside (TORCH_IMPL_FUNC(_linalg_eigh_out))
    (lambda a: torch.linalg.svdvals(a), True),
    (lambda a: torch.linalg.cholesky_ex(a, check_errors=True), True),
    (lambda a: torch.cholesky_inverse(a), False),  # its info is a CPU tensor
])
@pytest.mark.slow
def test_linalg_ops_sync_when_they_read_info_back(call, synced):
    with capture("h200") as cap:
        with cap.paused():
            a = torch.eye(16, device="cuda")
        call(a)
    assert any(op.sync == "linalg info" for op in cap.capture.ops) == synced
    assert all(cost_of(op) is not None for op in cap.capture.ops)


def test_zero_element_host_copies_are_not_syncs_and_launch_nothing():
    # aten/src/ATen/native/Copy.cpp (copy_impl) returns before any device work when there is nothing to copy.
    with capture("h200") as cap:
        torch.tensor([], device="cuda")
        torch.zeros(0, device="cuda").cpu()
        torch.tensor([1.0, 2.0], device="cuda")  # not empty: a pageable copy the host waits for
    ops = cap.capture.ops
    assert [op.sync for op in ops if op.sync] == ["h2d pageable"]
    assert sum(cost_of(op).kernels for op in ops) == 1


def test_dynamic_cache_starts_without_a_sync():
    transformers = pytest.importorskip("transformers")
    from transformers.cache_utils import DynamicLayer

    with capture("h200") as cap:
        with cap.paused():
            k = torch.randn(1, 2, 4, 8, device="cuda")
        layer = DynamicLayer()
        layer.lazy_initialization(k, k)  # torch.tensor([], device=...) for keys and values
    assert transformers and not [op for op in cap.capture.ops if op.sync]


@pytest.mark.slow
def test_host_reads_of_nanmedian_and_matrix_exp():
    # cuda/Sorting.cpp median_impl (NaN count .item()), LinearAlgebra.cpp mexp (norms to the host): each a sync;
    # median is not, nor multinomial under this torch (its checks are _assert_async: the test below).
    with capture("h200") as cap:
        with cap.paused():
            x = torch.rand(64, device="cuda")
            a = torch.rand(8, 8, device="cuda")
        torch.nanmedian(x)
        torch.median(x)
        torch.multinomial(x, 4)
        torch.multinomial(x, 4, replacement=True)
        torch.linalg.matrix_exp(a)
    assert [op.sync for op in cap.capture.ops if op.sync] == ["nanmedian count", "matrix_exp norm"]
    items = {op.op: cost_of(op).kernels for op in cap.capture.ops}
    assert items["aten.median.default"] == 3  # sort, isnan, where
    assert items["aten.nanmedian.default"] == 5  # sort, isnan, sum, .item() memcpy, clone


def test_multinomial_runs_its_checks_on_the_gpu_as_the_installed_torch_writes_them():
    # H100, torch 2.11 (validation/probes/opinfo_items/opinfo_items_run1.json.gz, OpInfo multinomial, 3 samples of
    # 10 without replacement): 14 work items and no copy to the host: max, lt, min, ge, and, _assert_async; sum,
    # eq, bitwise_not, _assert_async; exponential_, div, topk's gather and its sort of the 3 values. A later
    # torch (the one this test runs under may be) takes max and min as one aminmax: one item fewer.
    with capture("h200") as cap:
        with cap.paused():
            x = torch.rand(10, device="cuda")
        torch.multinomial(x, 3)
    ops = cap.capture.ops
    assert not [op for op in ops if op.sync]
    assert [op.op for op in ops].count("aten._assert_async.msg") == 2
    assert _items(cap)["aten.multinomial.default"] == 14 - any(op.op == "aten.aminmax.default" for op in ops)


def test_multinomial_with_replacement_does_not_change_a_later_call():
    # with replacement it runs its own CUDA kernel (recorded whole); a later call without replacement still runs
    # its checks on the GPU
    with capture("h200") as cap:
        with cap.paused():
            x = torch.rand(10, device="cuda")
        torch.multinomial(x, 4, replacement=True)
        torch.multinomial(x, 3)
    ops = cap.capture.ops
    assert not [op for op in ops if op.sync]
    assert [op.op for op in ops].count("aten._assert_async.msg") == 2


@pytest.mark.parametrize("call, name, items", [
    # kernel counts from PyTorch's CUDA sources (module docstrings cite them); no device measurement
    (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic").sum().backward(), "aten.upsample_bicubic2d_backward",
     2),  # grad_input.zero_(), then the scatter kernel
    (lambda x: F.adaptive_max_pool2d(x, 3).sum().backward(), "aten.adaptive_max_pool2d_backward", 2),
    # cdist with p = 2 and more than 25 rows runs the matmul form as ops of its own; 20 rows: one distance kernel
    (lambda x: torch.cdist(x[:20].flatten(1), x[:20].flatten(1)), "aten._cdist_forward", 1),
    (lambda x: torch.mv(x.flatten(1), x.new_ones(48)), "aten.mv", 1),
    (lambda x: torch.addmv(x.new_ones(32), x.flatten(1), x.new_ones(48)), "aten.addmv", 2),  # copy of self, gemv
    (lambda x: x.flatten(1).index_reduce(0, torch.zeros(4, dtype=torch.long, device="cuda"), x.flatten(1)[:4],
                                         "mean"), "aten.index_reduce", 1 + 1 + 6),  # copy, reduce, the mean's counts
])
@pytest.mark.slow
def test_kinds_from_cuda_source(call, name, items):
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(32, 3, 4, 4, device="cuda", requires_grad=True)
        call(x)
    ops = [op for op in cap.capture.ops if op.packet == name and op.parent < 0]
    assert ops and _items(cap)[ops[0].op] == items


def test_grouped_mm_is_priced_by_the_grouped_gemm_fit():
    # H200, torch 2.11 (validation/h200_grouped_mm_grid_raw.json.gz): 8 experts of 16 tokens, K = 1024,
    # N = 2048, bf16: 20.8 us for the problem-table kernel and the CUTLASS grouped GEMM; its weights' 34 MB
    # decide, where the GEMM roofline of its 0.5 GFLOP gave ~7 us (zoo mixtral_forward: 24-30 us measured).
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    with capture("h200") as cap:
        with cap.paused():
            tokens = torch.randn(128, 1024, device="cuda", dtype=torch.bfloat16)
            weights = torch.randn(8, 2048, 1024, device="cuda", dtype=torch.bfloat16)
            offs = torch.arange(16, 129, 16, device="cuda", dtype=torch.int32)
        torch._grouped_mm(tokens, weights.transpose(-2, -1), offs=offs)
    record = next(op for op in cap.capture.ops if op.op == "aten._grouped_mm.default")
    cost = cost_of(record)
    assert cost.kind == "grouped_gemm"
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    assert model.estimate(cost).time_us == pytest.approx(20.8, rel=0.15)


def test_a_cat_of_strided_inputs_reads_them_element_by_element():
    # H200, torch 2.11 (validation/h200_cat_strided_grid_raw.json.gz): rotate_half's cat of the two halves of a
    # heads-transposed (4, 16, 512, 128) bf16 tensor ran CatArrayBatchedCopy at 0.8 TB/s, 20.1 us; a copy of
    # the same bytes streams at ~3 TB/s (zoo gpt_neox_forward's 36 such cats: 374 us, 222 at the copy rate).
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(4, 512, 16, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        torch.cat((x[..., 64:], x[..., :64]), dim=-1)
        torch.cat((x.contiguous(), x.contiguous()), dim=-1)
    strided, contiguous = [cost_of(op) for op in cap.capture.ops if op.op == "aten.cat.default"]
    assert strided.kind == "cat_strided" and strided.kernels == 1
    assert contiguous.kind == "copy" and contiguous.kernels == 1
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    assert model.estimate(strided).time_us == pytest.approx(20.1, rel=0.15)


def _kernels_by_op(cap) -> dict[str, list[int]]:
    """Per op name, each call's kernel count, in capture order."""
    out: dict[str, list[int]] = {}
    for record in cap.capture.ops:
        cost = cost_of(record)
        if cost is not None:
            out.setdefault(record.op, []).append(cost.kernels)
    return out


def test_a_spectral_layers_complex_einsum_and_ffts():
    # H200, torch 2.11: zoo fft_layers_train, one FNO layer (32 channels, 16 modes, 16 x 128 x 128 fp32). The
    # einsum's bmm clones its permuted operand forward (2 kernels); backward one bmm clones an operand (2) and the
    # other conjugates one and clones another (3), as prepare_batch_matrix_for_cublas does. irfft2 clones its
    # input, runs two cuFFT kernels and the normalising mul_ (4); the 2-D c2c of its gradient is one cuFFT kernel
    # (vector_2d_fft<128, 128>).
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "zoo"))
    from program_kinds import _SpectralConv

    with capture("h200") as cap:
        with cap.paused():
            layer = _SpectralConv(32, 16).cuda()
            x = torch.randn(16, 32, 128, 128, device="cuda", requires_grad=True)  # a layer after another
        layer(x).sum().backward()
    kernels = _kernels_by_op(cap)
    assert sorted(kernels["aten.bmm.default"]) == [2, 2, 3]
    assert kernels["aten._fft_c2r.default"] == [4]
    assert kernels["aten._fft_c2c.default"] == [1]


def test_normal_with_a_tensor_std_checks_it_on_the_host_twice():
    # DistributionTemplates.h normal_impl and normal_out_impl: CHECK_NORMAL_TENSOR_STD, `std.min().ge(0).item()`
    # in each. An H100 (torch 2.11, validation/probes/opinfo_items/opinfo_items_run1.json.gz, OpInfo normal) ran 9
    # work items per call, two of them copies to the host: min, compare, copy, twice, then the sampling kernels.
    with capture("h100-sxm") as cap:
        with cap.paused():
            mean, std = torch.randn(20, device="cuda"), torch.rand(20, device="cuda")
        torch.normal(mean, std)
        torch.normal(mean, 1.0)  # a float std is checked on the host alone: no sync; normal_, then add_(mean)
    assert [op.sync for op in cap.capture.ops if op.sync] == ["normal std check"] * 2
    assert sum(cost_of(op).kernels for op in cap.capture.ops if op.parent < 0 and not op.op.startswith("host.")) \
        == 9 + 2


def test_masked_scatter_runs_a_prefix_sum_and_a_check():
    # IndexKernel.cu masked_scatter_cuda_impl: cub's scan (init, scan), masked_scatter_size_check, the scatter. An
    # H100 (torch 2.11, validation/probes/opinfo_items/opinfo_items_run1.json.gz): x.masked_scatter(mask, source)
    # ran 5 work items (clone's copy, then those four); masked_select's backward scatters into its zeros in place
    # (capture/cuda_inplace.py), 12 items for the OpInfo's first sample.
    with capture("h100-sxm") as cap:
        with cap.paused():
            x, source = torch.randn(20, device="cuda"), torch.randn(20, device="cuda")
            mask = torch.rand(20, device="cuda") > 0.5
        x.masked_scatter(mask, source)
    assert sum(cost_of(op).kernels for op in cap.capture.ops) == 5
