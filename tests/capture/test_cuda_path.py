"""The CUDA path on a CPU-only torch: what a CUDA build keeps whole or decomposes, CUDA-only ops, attention
backends, modules copied under the capture, compiled steps. Expected counts come from the H200 (torch 2.11,
validation/zoo_measured.json.gz), named by zoo workload."""

import copy
import dataclasses
import json

import pytest
import torch
import torch.nn as nn

from helpers import contiguous, op
from kernelcast.capture import capture, capture_workload
from kernelcast.capture.attention import SdpaCall, mask_ok_for_cudnn, choose_backend
from kernelcast.capture.cuda_only import cuda_only_ops
from kernelcast.capture.cuda_path import load_op_table, ops_to_keep_whole
from kernelcast.costs import cost_of
from kernelcast.errors import CaptureError
from kernelcast.predict import predict_capture
from kernelcast.records import Capture, root_indices


def _small_transformer_build():
    # The zoo's small_transformer (examples/zoo/blocks.py): nn.TransformerEncoder deep-copies its layer.
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
    model = nn.ModuleDict({"emb": nn.Embedding(100, 64), "enc": nn.TransformerEncoder(layer, 2),
                           "head": nn.Linear(64, 100)}).cuda()
    ids = torch.randint(0, 100, (2, 16), device="cuda")

    def step(ids):
        model["head"](model["enc"](model["emb"](ids))).sum().backward()

    return step, (ids,)


@pytest.mark.slow
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


@pytest.fixture
def no_triton(monkeypatch):
    """The path of a machine without the triton package: Inductor cannot run, compiled code runs eager."""
    import importlib

    session = importlib.import_module("kernelcast.capture.session")  # kernelcast.capture is also a function
    monkeypatch.setattr(session, "triton_missing", lambda: "the triton package is not installed (test)")


@pytest.mark.parametrize("build, what", [
    (_compiled_mean_build, "torch.compile(_compiled_mean_build.<locals>.<lambda>)"),
    (_wrapped_step_build, "torch.compile(_wrapped_step_build.<locals>.step)"),
    (_compiled_module_build, "torch.compile(Linear)"),
    (_module_compiled_in_place_build, "0.compile()"),
])
@pytest.mark.slow
def test_compiled_step_is_said_to_be_predicted_as_eager(build, what, no_triton):
    cap = capture_workload(build, "h200")
    assert cap.compiled and cap.compiled_as == "eager"
    assert any(what in note and "predicted as eager" in note and "triton" in note for note in cap.notes)
    assert cap.ops  # the eager ops are there to predict
    pred = predict_capture(cap, "h200")
    assert pred.compiled and pred.summary().startswith("compiled step predicted as eager")
    assert Capture.from_json(cap.to_json()).compiled


def test_compiled_code_reached_only_at_run_time_is_noticed(no_triton):
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


# -- the CUDA op table and the ops a CUDA build keeps whole -------------------------------------------------
def _write_table(folder, version):
    doc = {"torch": f"{version}.0+cu130", "command": "test", "keys": ["CUDA", "CompositeImplicitAutograd"],
           "ops": {"aten::silu_backward": "01"}}
    (folder / f"cuda_ops_torch{version}.json").write_text(json.dumps(doc))


def test_op_table_for_this_torch_or_the_nearest_with_a_note(tmp_path):
    _write_table(tmp_path, "2.11")
    _write_table(tmp_path, "2.14")
    exact = load_op_table("2.11.0", tmp_path)
    assert exact.note == "" and exact.keys("aten::silu_backward") == {"CUDA", "CompositeImplicitAutograd"}
    near = load_op_table("2.13.0+cpu", tmp_path)  # 2.14 is one minor release away, 2.11 two
    assert near.torch_version == "2.14.0+cu130" and "torch 2.14.0+cu130" in near.note and "2.13" in near.note
    assert load_op_table("2.12.1", tmp_path).torch_version == "2.11.0+cu130"
    with pytest.raises(CaptureError, match="no CUDA op table"):
        load_op_table("2.11.0", tmp_path / "missing")


def test_recorded_table_keeps_whole_what_cuda_runs_as_one_kernel():
    table = load_op_table("2.11.0")
    assert table.torch_version.startswith("2.11") and "cuda_op_table.py" in table.command
    whole = {"aten::_fused_rms_norm", "aten::silu_backward", "aten::mish_backward"}
    if torch.version.cuda is None:
        # A CUDA kernel and an implicit formula in the CUDA build; no CUDA kernel in this CPU-only one.
        assert whole <= set(ops_to_keep_whole(table))
    else:  # a CUDA build (with or without a GPU) has those kernels itself: nothing to stand in for
        assert ops_to_keep_whole(table) == []
        assert all(torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA") for name in whole)
    assert table.decomposes_below_autograd("aten::stack")  # CompositeExplicitAutograd, no CUDA kernel
    assert not table.decomposes_below_autograd("aten::cat")  # a CUDA kernel


def test_rms_norm_is_one_fused_kernel_as_on_cuda():
    # H200, torch 2.11: zoo layernorm_odd_widths, nn.RMSNorm runs _fused_rms_norm (1 kernel) and
    # _fused_rms_norm_backward (2 kernels) where a CPU-only capture recorded pow/mean/add/rsqrt/mul.
    with capture("h200") as block:
        with block.paused():
            norm = nn.RMSNorm(96).cuda().to(torch.bfloat16)
            x = torch.randn(37, 4, 96, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        norm(x.transpose(0, 1)).float().sum().backward()
    ops = {op.op: op for op in block.capture.ops}
    assert "aten.rsqrt.default" not in ops and "aten.pow.Tensor_Scalar" not in ops
    forward, backward = ops["aten._fused_rms_norm.default"], ops["aten._fused_rms_norm_backward.default"]
    # _fused_rms_norm_cuda: Y contiguous in the input's dtype; rstd in the accumulate type (float), the
    # normalized dims kept as 1.
    y, rstd = forward.outputs
    assert (y.shape, y.stride, y.dtype) == ((4, 37, 96), (37 * 96, 96, 1), "bfloat16")
    assert (rstd.shape, rstd.dtype) == ((4, 37, 1), "float32")
    assert backward.phase == "backward" and [t.shape for t in backward.outputs] == [(4, 37, 96), (96,)]
    pred = predict_capture(block.capture, "h200")
    kernels = {p.op: p.kernels for p in pred.ops}
    # the transposed input is not contiguous: the CUDA kernels' X.expect_contiguous() copies it first, forward
    # and backward (costs/norms.py), so 1 + 1 and 2 + 1 items here where the zoo's contiguous input ran 1 and 2
    assert kernels["aten._fused_rms_norm.default"] == 2 and kernels["aten._fused_rms_norm_backward.default"] == 3
    assert not pred.uncosted


def test_mish_backward_is_one_op_with_the_kernels_output():
    # mish_backward's CUDA kernel is one TensorIterator op: its gradient is laid out as its inputs.
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(8, 64, device="cuda", requires_grad=True)
        torch.nn.functional.mish(x).sum().backward()
    (mish,) = [op for op in block.capture.ops if op.phase == "backward" and "mish" in op.op]
    assert mish.op == "aten.mish_backward.default"
    assert [(t.shape, t.stride, t.dtype) for t in mish.outputs] == [((8, 64), (64, 1), "float32")]
    assert "aten.tanh.default" not in [op.op for op in block.capture.ops if op.phase == "backward"]


# -- ops that exist only as CUDA kernels -------------------------------------------------------------------
def test_ctc_loss_with_lengths_on_the_gpu_captures_as_cuda_runs_it():
    # zoo wav2vec2_train failed with "Could not run 'aten::empty_strided' with arguments from the 'CUDA'
    # backend": ctc_loss asks _use_cudnn_ctc_loss.Tensor, a CUDA-only op. H200, torch 2.11: the lengths are
    # read back to the host (4 device-to-host copies), then _ctc_loss runs 4 work items and its backward 8.
    with capture("h200") as block:
        with block.paused():
            logits = torch.randn(50, 4, 20, device="cuda", requires_grad=True)
            targets = torch.randint(1, 20, (4, 10), device="cuda")
            input_lengths = torch.full((4,), 50, device="cuda")
            target_lengths = torch.full((4,), 10, device="cuda")
        loss = torch.nn.functional.ctc_loss(logits.log_softmax(2), targets, input_lengths, target_lengths,
                                            reduction="sum")
        loss.backward()
    cap = block.capture
    (forward,) = [op for op in cap.ops if op.op.startswith("aten._ctc_loss.")]
    (backward,) = [op for op in cap.ops if op.op.startswith("aten._ctc_loss_backward")]
    assert forward.sync == "ctc lengths" and any("CTC lengths" in note for note in cap.notes)
    # log_alpha is (batch, time, 2 * longest target + 1): 2 * 10 + 1 = 21
    assert [t.shape for t in forward.outputs] == [(4,), (4, 50, 21)]
    assert backward.outputs[0].shape == (50, 4, 20)
    kernels = {p.op: p.kernels for p in predict_capture(cap, "h200").ops}
    assert kernels[forward.op] == 4 + 4 and kernels[backward.op] == 8


def test_grid_sample_takes_cudnn_as_on_cuda():
    # grid_sampler's implicit formula takes cudnn_grid_sampler (CUDA-only) for bilinear, zero-padded,
    # align_corners=True sampling of 4-D float inputs (GridSampler.cpp, cond_cudnn_grid_sampler).
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(2, 3, 8, 8, device="cuda", requires_grad=True)
            grid = torch.rand(2, 5, 6, 2, device="cuda") * 2 - 1
        torch.nn.functional.grid_sample(x, grid, align_corners=True).sum().backward()
    ops = {op.op: op for op in block.capture.ops}
    assert ops["aten.cudnn_grid_sampler.default"].outputs[0].shape == (2, 3, 5, 6)
    grad_input, grad_grid = ops["aten.cudnn_grid_sampler_backward.default"].outputs
    assert (grad_input.shape, grad_grid.shape) == ((2, 3, 8, 8), (2, 5, 6, 2))


def test_sync_batch_norm_ops_have_their_cuda_outputs():
    # SyncBatchNorm's CUDA-only kernels (Normalization.cu): statistics per channel in the accumulate type.
    aten = torch.ops.aten
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(8, 16, 4, 4, device="cuda", dtype=torch.float16)
            w = torch.ones(16, device="cuda", dtype=torch.float16)
        mean, invstd = aten.batch_norm_stats(x, 1e-5)
        all_mean = torch.stack([mean, mean])
        counts = torch.full((2,), 128.0, device="cuda")
        gmean, ginvstd = aten.batch_norm_gather_stats_with_counts(x, all_mean, all_mean, None, None, 0.1, 1e-5,
                                                                  counts)
        y = aten.batch_norm_elemt(x, w, w, gmean, ginvstd, 1e-5)
        sum_dy, sum_dy_xmu, gw, gb = aten.batch_norm_backward_reduce(y, x, gmean, ginvstd, w, True, True, True)
        dx = aten.batch_norm_backward_elemt(y, x, gmean, ginvstd, w, sum_dy, sum_dy_xmu, counts.int())
    assert (mean.shape, mean.dtype, gmean.shape) == ((16,), torch.float32, (16,))
    assert (y.shape, y.dtype, dx.shape) == (x.shape, torch.float16, x.shape)
    assert (sum_dy.dtype, gw.shape, gw.dtype) == (torch.float32, (16,), torch.float16)


def test_convolutions_cuda_runs_by_other_entry_points_have_convolutions_outputs():
    """cuDNN's, the slow and the depthwise convolutions (Convolution.cpp's backends, called directly by
    Inductor's code and by fusions) give what aten.convolution gives for their arguments."""
    aten = torch.ops.aten
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(2, 8, 6, 10, 10, device="cuda")
            w = torch.randn(8, 8, 3, 3, 3, device="cuda")
            w_dw = torch.randn(8, 1, 3, 3, 3, device="cuda")
        plain = aten.cudnn_convolution(x, w, [1, 1, 1], [2, 2, 2], [1, 1, 1], 1, False, False, True)
        transposed = aten.cudnn_convolution_transpose(x, w, [1, 1, 1], [1, 1, 1], [2, 2, 2], [1, 1, 1], 1, False,
                                                      False, True)
        slow = aten.slow_conv_transpose3d(x, w, [3, 3, 3], None, [2, 2, 2], [1, 1, 1], [1, 1, 1])
        depthwise = aten.conv_depthwise3d(x, w_dw, [3, 3, 3], None, [1, 1, 1], [1, 1, 1], [1, 1, 1])
    assert plain.shape == (2, 8, 3, 5, 5)
    assert transposed.shape == slow.shape == (2, 8, 12, 20, 20)
    assert depthwise.shape == x.shape


def test_an_out_variant_of_a_cuda_only_op_gets_its_functional_result():
    """Inductor's generated code calls out= overloads (`_scaled_mm.out` for an fp8 GEMM): the functional form's
    result on the same fakes, in the out tensor. A compiled fp8 step had stopped the capture (issue 32)."""
    aten = torch.ops.aten
    with capture("h200") as block:
        with block.paused():
            a = torch.randn(64, 128, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(32, 128, device="cuda").to(torch.float8_e4m3fn).t()
            one = torch.tensor(1.0, device="cuda")
            out = torch.empty(0, device="cuda", dtype=torch.bfloat16)
        result = aten._scaled_mm.out(a, b, one, one, out_dtype=torch.bfloat16, out=out)
    assert result is out and out.shape == (64, 32) and out.dtype == torch.bfloat16
    assert [op.op for op in block.capture.ops if "scaled_mm" in op.op] == ["aten._scaled_mm.out"]


def test_cuda_only_op_without_a_fake_stops_with_one_clear_line():
    with pytest.raises(CaptureError, match=r"aten::_aminmax runs only as a CUDA kernel"):
        with capture("h200") as block:
            with block.paused():
                x = torch.randn(8, device="cuda")
            torch.ops.aten._aminmax(x)


def test_cuda_only_ops_listed_from_the_table():
    table = load_op_table("2.11.0")
    listed = set(cuda_only_ops(table))
    assert {"aten::_use_cudnn_ctc_loss.Tensor", "aten::cudnn_grid_sampler", "aten::batch_norm_stats",
            "aten::_ctc_loss_backward"} <= listed  # _ctc_loss_backward: CPU and CUDA kernels, no Meta
    assert not any(name.startswith(("aten::_cudnn_rnn", "aten::bincount")) for name in listed)
    assert "aten::_fused_rms_norm_backward" not in listed  # a Meta kernel here


# -- ops CUDA runs by calling other ops below autograd ---------------------------------------------------------
def _kernels_by_root(cap):
    """Predicted kernels per op the step called (a decomposed op's children count as its own)."""
    pred = predict_capture(cap, "h200")
    roots = root_indices(cap.ops)
    out: dict[str, int] = {}
    for p, root in zip(pred.ops, roots):
        name = cap.ops[root].op
        out[name] = out.get(name, 0) + p.kernels
    return pred, out


def test_explicit_composite_ops_launch_what_their_decomposition_launches():
    with capture("h200") as block:
        with block.paused():
            logits = torch.randn(2048, device="cuda", requires_grad=True)
            labels = torch.rand(2048, device="cuda")
            feats = [torch.randn(2048, 64, device="cuda") for _ in range(9)]
            x = torch.randn(64, 49, device="cuda")
            mask = torch.rand(64, 49, device="cuda") > 0.5
            keys = torch.randn(2048, device="cuda")
        torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
        torch.stack(feats, dim=1)
        x.masked_fill(mask, -100.0)
        x.abs()
        torch.sort(keys)
    pred, kernels = _kernels_by_root(block.capture)
    # H200, torch 2.11, each launch chain from validation/zoo_measured.json.gz:
    # zoo dlrm_train_adagrad: binary_cross_entropy_with_logits -> log_sigmoid_forward, fill_, sub_, mul_, sub_,
    # mean = 6 kernels; stack -> cat = 1.
    assert kernels["aten.binary_cross_entropy_with_logits.default"] == 6
    assert kernels["aten.stack.default"] == 1
    # zoo losses_train, swin_forward: masked_fill -> clone (copy_) and masked_fill_ = 2.
    assert kernels["aten.masked_fill.Scalar"] == 2
    # zoo t5_forward: abs -> abs.out = 1.
    assert kernels["aten.abs.default"] == 1
    # zoo mixtral_forward: sort of 2048 -> sort.stable: copy, arange, copy, copy, bitonic sort = 5.
    assert kernels["aten.sort.default"] == 5
    assert not pred.uncosted


def test_decomposed_op_counts_its_children_once():
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(64, 32, device="cuda")
            mask = torch.rand(64, 32, device="cuda") > 0.5
        x.masked_fill(mask, 0.0)
    ops = block.capture.ops
    parent = ops[0]
    assert parent.op == "aten.masked_fill.Scalar" and parent.decomposed and parent.parent == -1
    assert [op.op for op in ops if op.parent >= 0] == [
        "aten.clone.default", "aten.empty_like.default", "aten.copy_.default", "aten.masked_fill_.Scalar"]
    assert all(root == 0 for root in root_indices(ops))
    pred = predict_capture(block.capture, "h200")
    assert pred.ops[0].kernels == 0 and pred.kernels == 2  # the parent launches nothing itself
    # Host: the parent is one op launching its children's two kernels; the children, called from C++, add none.
    assert pred.ops[0].host_us > 0 and all(p.host_us == 0 for p in pred.ops[1:])
    again = Capture.from_json(block.capture.to_json())
    assert [op.parent for op in again.ops] == [op.parent for op in ops]


def test_clone_decomposed_prices_as_the_whole_clone_did():
    # clone -> empty_like + copy_: the copy_ takes the kind, key, bytes and kernels the clone formula gave.
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(64, 128, device="cuda")
            images = torch.randn(8, 16, 32, 32, device="cuda")
        x.clone()
        x.t().contiguous()  # a transposing copy
        images.contiguous(memory_format=torch.channels_last)
        x[:, :100].clone()
    ops = block.capture.ops
    clones = [op for op in ops if op.op == "aten.clone.default" and op.decomposed]
    assert len(clones) == 4
    for clone in clones:
        (copy,) = [op for op in ops if op.parent == clone.index and op.op == "aten.copy_.default"]
        whole = cost_of(dataclasses.replace(clone, tags=()))  # the clone formula on the clone itself
        part = cost_of(copy)
        assert (part.kind, part.key, part.bytes_read, part.bytes_written, part.kernels) == \
            (whole.kind, whole.key, whole.bytes_read, whole.bytes_written, whole.kernels)
    assert cost_of(dataclasses.replace(clones[1], tags=())).kind == "copy_transpose"


def test_conversions_and_host_copies_stay_whole():
    # _to_copy is answered by the recorder (host transfers, pinned memory): one op, one copy, as before.
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(64, 128, device="cuda")
        x.to(torch.bfloat16)
        x.cpu()
    copies = [op for op in block.capture.ops if op.op == "aten._to_copy.default"]
    assert len(copies) == 2 and not any(op.decomposed for op in copies)
    assert [op.sync for op in copies] == [None, "cpu"]


# -- scaled_dot_product_attention: the backend CUDA picks -------------------------------------------------------
def _attention_ops(block):
    return [op.op.removeprefix("aten.").removesuffix(".default") for op in block.capture.ops
            if "attention" in op.op or op.op in ("aten.bmm.default", "aten._softmax.default")]


def test_transposed_qkv_run_the_math_path():
    # zoo unet_block_train / unet_block_forward_fp16: q, k, v are transposed views whose last dim has stride
    # != 1; the H200 ran bmm and _softmax (check_last_dim_stride_equals_1_dense fails every fused backend).
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(2, 4, 64, 256, device="cuda", dtype=torch.float16)  # (B, heads, head_dim, tokens)
        q = x.transpose(-1, -2)  # (B, heads, tokens, head_dim), stride(-1) = 256
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    ops = _attention_ops(block)
    assert "bmm" in ops and "_softmax" in ops and not any("cudnn" in op or "flash" in op for op in ops)


@pytest.mark.slow
def test_mask_with_a_strided_last_dim_runs_the_math_path():
    # zoo t5_forward (transformers 5.17 on the H200): the relative position bias comes out of a permute, its
    # last dim has stride = heads; those calls ran the math path, the contiguous-mask calls cuDNN.
    with capture("h200") as block:
        with block.paused():
            q = torch.randn(2, 8, 64, 64, device="cuda", dtype=torch.bfloat16)
            bias = torch.randn(64, 64, 8, device="cuda", dtype=torch.bfloat16).permute(2, 0, 1).unsqueeze(0)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=bias)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=bias.contiguous())
    ops = _attention_ops(block)
    assert ops.count("_scaled_dot_product_cudnn_attention") == 1 and "bmm" in ops


def test_cudnn_mask_shape_rules():
    # check_attn_mask_shape: a 4-D mask with batch and heads each 1 or full goes to cuDNN; a 3-D one does not
    # (efficient takes it), nor one that requires grad.
    q = torch.randn(2, 8, 64, 64, dtype=torch.bfloat16)

    def backend(mask_shape, requires_grad=False):
        call = SdpaCall(torch.bfloat16, 64, 64, 64, 64, 8, 8, 8, True,
                        mask_ok_for_cudnn(torch.zeros(mask_shape, requires_grad=requires_grad), q, q),
                        False, False, False, True, False)
        return choose_backend(call, "sm_90")

    assert backend((2, 1, 64, 64)) == "cudnn" and backend((1, 8, 1, 64)) == "cudnn" and backend((64, 64)) == "cudnn"
    assert backend((8, 64, 64)) == "efficient" and backend((2, 3, 64, 64)) == "efficient"
    assert backend((2, 1, 64, 64), requires_grad=True) == "efficient"


@pytest.mark.slow
def test_attention_inside_multihead_attention_is_routed():
    # zoo amp_bf16_clip_train: nn.TransformerEncoderLayer's MultiheadAttention calls SDPA from Python; the H200
    # ran cuDNN attention with dropout: philox unpack + memset + kernel = 3 items forward, 4 backward.
    with capture("h200") as block:
        with block.paused():
            layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.1, batch_first=True).cuda()
            x = torch.randn(4, 128, 512, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            layer(x).sum().backward()
    assert _attention_ops(block) == ["_scaled_dot_product_cudnn_attention",
                                     "_scaled_dot_product_cudnn_attention_backward"]
    kernels = {p.op: p.kernels for p in predict_capture(block.capture, "h200").ops}
    assert kernels["aten._scaled_dot_product_cudnn_attention.default"] == 3
    assert kernels["aten._scaled_dot_product_cudnn_attention_backward.default"] == 4


def test_cudnn_attention_launches_for_decode_and_grouped_heads():
    # zoo gpt2_decode_dynamic_cache: a single query takes cuDNN's sm80 kernel with no memset, 1 item per call
    # (12 for 12 layers); zoo qwen2_train: with fewer key/value heads, the backward adds two fmha_reduce_head
    # kernels (24 items for 4 calls: 6 each).
    with capture("h200") as block:
        with block.paused():
            q1 = torch.randn(1, 12, 1, 64, device="cuda", dtype=torch.float16)
            kv = torch.randn(1, 12, 300, 64, device="cuda", dtype=torch.float16)
            q = torch.randn(2, 8, 128, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k = torch.randn(2, 2, 128, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        torch.nn.functional.scaled_dot_product_attention(q1, kv, kv)
        torch.nn.functional.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True).sum().backward()
    pred = predict_capture(block.capture, "h200")
    cudnn = [(p.op, p.kernels) for p in pred.ops if "cudnn_attention" in p.op]
    assert cudnn == [("aten._scaled_dot_product_cudnn_attention.default", 1),
                     ("aten._scaled_dot_product_cudnn_attention.default", 2),
                     ("aten._scaled_dot_product_cudnn_attention_backward.default", 6)]


# H200, torch 2.11, cuDNN 9.19 (validation/probes/cuda_path_probe.json): _scaled_dot_product_cudnn_attention's
# work items for 16 query heads against 1024 keys (bf16, head dim 128): one (the sm80 fprop kernel, no memset)
# only for a single query with as many key/value heads; the memset and the kernel for every other shape.
CUDNN_FORWARD_ITEMS = [(1, 16, 1), (2, 16, 2), (8, 16, 2), (128, 16, 2), (1, 4, 2), (2, 4, 2), (128, 4, 2)]


@pytest.mark.parametrize("seq_q,kv_heads,items", CUDNN_FORWARD_ITEMS)
def test_cudnn_attention_forward_items_by_query_length_and_kv_heads(seq_q, kv_heads, items):
    q, k = contiguous((8, 16, seq_q, 128), "bfloat16"), contiguous((8, kv_heads, 1024, 128), "bfloat16")
    out = contiguous(q.shape, "bfloat16")
    record = op("aten._scaled_dot_product_cudnn_attention.default",
                {"query": q, "key": k, "value": k, "dropout_p": 0.0, "is_causal": False}, [out])
    assert cost_of(record).kernels == items


@pytest.mark.parametrize("d_qk,d_v", [(128, 128), (160, 160), (192, 128), (192, 192), (256, 256)])
def test_cudnn_takes_head_dims_up_to_256_on_sm90(d_qk, d_v):
    # H200 (validation/probes/cuda_path_probe.json): torch._fused_sdp_choice on (2, 8, 256, d) bf16 picked cuDNN
    # for every one of these head dims.
    call = SdpaCall(torch.bfloat16, d_qk, d_v, 256, 256, 8, 8, 8, False, True, False, False, False, True, False)
    assert choose_backend(call, "sm_90") == "cudnn"


@pytest.mark.slow
def test_ctc_loss_with_integer_lengths_and_the_mean():
    # ctc_loss's C++ formula turns integer target lengths into a tensor from host memory for the mean
    # reduction (LossCTC.cpp); the capture reduces in Python the same way. int32 targets on the host take
    # cuDNN's CTC loss (_use_cudnn_ctc_loss), others the native kernel.
    def run(targets):
        with capture("h200") as block:
            with block.paused():
                logits = torch.randn(50, 4, 20, device="cuda", requires_grad=True)
            loss = torch.nn.functional.ctc_loss(logits.log_softmax(2), targets(), [50] * 4, [10] * 4)
            loss.backward()
        return [op.op for op in block.capture.ops if "ctc" in op.op]

    assert "aten._cudnn_ctc_loss.default" in run(lambda: torch.randint(1, 20, (40,), dtype=torch.int32))
    assert "aten._ctc_loss.default" in run(lambda: torch.randint(1, 20, (4, 10), device="cuda"))


@pytest.mark.slow
def test_ctc_loss_with_lengths_as_host_tensors():
    # F.ctc_loss's documented form: the lengths as CPU tensors, which a GPU run reads to host memory and reduces
    # over as it does integer lengths (LossCTC.cpp); under the capture the subclass branch divided the CUDA losses
    # by the CPU lengths ("found at least two devices"): every such step failed.
    with capture("h200") as block:
        with block.paused():
            logits = torch.randn(50, 4, 20, device="cuda", requires_grad=True)
            targets = torch.randint(1, 20, (4, 10), device="cuda")
            lengths = torch.full((4,), 50, dtype=torch.long), torch.full((4,), 10, dtype=torch.long)
        torch.nn.functional.ctc_loss(logits.log_softmax(2), targets, *lengths).backward()
    ops = block.capture.ops
    assert {"aten._ctc_loss.Tensor", "aten._ctc_loss_backward.Tensor"} <= {op.op for op in ops}
    # the mean's lengths go to the device as the integer path's at::tensor does: one copy from the host
    assert [op.sync for op in ops if op.op == "aten._to_copy.default" and op.outputs[0].device == "cuda"] \
        == ["h2d pageable"]


def test_pointwise_losses_reduce_with_mean_as_cuda_does():
    # Loss.cpp: the loss per element, then at::mean_out over it (a global reduce zeroes its semaphores first).
    # H200, torch 2.11: zoo unet_block_train mse_loss 3 items, mse_loss_backward 2 (zeros_like, kernel); zoo
    # losses_train huber_loss and smooth_l1_loss 3 each, their backward 2 each (zeros_like, the .out kernel).
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(8, 4, 64, 64, device="cuda", requires_grad=True)
            y = torch.randn(8, 4, 64, 64, device="cuda")
        for loss in (torch.nn.functional.mse_loss, torch.nn.functional.huber_loss,
                     torch.nn.functional.smooth_l1_loss):
            loss(x, y).backward()
    _, kernels = _kernels_by_root(block.capture)
    for name in ("mse_loss", "huber_loss", "smooth_l1_loss"):
        assert kernels[f"aten.{name}.default"] == 3
        assert kernels[f"aten.{name}_backward.default"] == 2
