"""Capture on fake CUDA without a GPU: what CUDA would dispatch, sync points, backward, optimizers."""

import pytest
import torch
import torch.nn.functional as F

from kernelcast.capture import capture, capture_workload
from kernelcast.capture.attention import SdpaCall, choose_backend
from kernelcast.costs import cost_of
from kernelcast.predict import predict_capture
from kernelcast.records import root_indices


def _ops(cap):
    return [op.op for op in cap.ops]


def _mlp_build():
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(64, 8)).to("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 32, device="cuda"), torch.randint(0, 8, (16,), device="cuda")

    def step(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step, (x, y)


def test_training_step_records_forward_backward_optimizer():
    cap = capture_workload(_mlp_build, "h100")
    ops = _ops(cap)
    assert "aten.addmm.default" in ops and "aten.native_dropout.default" in ops
    # loss.item() after the optimizer is post-backward: no new forward has begun
    assert {op.phase for op in cap.ops} == {"forward", "backward", "optimizer", "post-backward"}
    assert any(op.startswith("aten._foreach_") for op in ops), "AdamW must take its CUDA default (foreach) path"
    # autocast casts the fp32 weights to bf16 as it would on CUDA
    casts = [op for op in cap.ops if op.op == "aten._to_copy.default" and op.outputs[0].dtype == "bfloat16"]
    assert casts
    mm = next(op for op in cap.ops if op.op == "aten.addmm.default")
    assert mm.args["mat1"].dtype == "bfloat16" and mm.module.endswith("Sequential.0")


def _accumulating_build():
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to("cuda")
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(16, 32, device="cuda")

    def step():
        for _ in range(2):  # two micro-batches, gradients accumulated
            loss = model(x).square().mean()
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        return loss.item()

    return step, ()


def test_phases_follow_the_step_after_backward():
    """The second micro-batch's forward is forward again; gradient clipping between the last backward and the
    optimizer, and the .item() after it, are post-backward (issue 34: they read `forward`)."""
    cap = capture_workload(_accumulating_build, "h100")
    runs = []
    for op in cap.ops:
        if op.parent < 0 and (not runs or runs[-1][0] != op.phase):
            runs.append((op.phase, op.op))
    assert [phase for phase, _ in runs] == ["forward", "backward", "forward", "backward", "post-backward",
                                            "optimizer", "post-backward"]
    assert runs[4][1].startswith("aten._foreach_norm")
    assert next(op for op in cap.ops if op.sync == "item").phase == "post-backward"


def test_item_is_a_sync_point_with_source_line():
    cap = capture_workload(_mlp_build, "h100")
    syncs = [op for op in cap.ops if op.sync]
    assert [op.sync for op in syncs] == ["item"]
    assert "test_capture.py" in syncs[0].source


def test_backward_ops_name_their_forward_line():
    cap = capture_workload(_mlp_build, "h100")
    backward_mm = [op for op in cap.ops if op.phase == "backward" and op.op == "aten.mm.default"]
    assert backward_mm and all("test_capture.py" in op.source for op in backward_mm)


def test_data_dependent_ops_get_placeholders():
    with capture("h100") as cap:
        x = torch.randn(100, device="cuda")
        kept = x[x > 0]  # boolean mask: a nonzero on CUDA, so a sync
        idx = torch.nonzero(x)
        values = x.tolist()
        torch.cuda.synchronize()
    kinds = [op.sync for op in cap.capture.ops if op.sync]
    assert kinds == ["boolean mask", "nonzero", "tolist", "synchronize"]
    assert kept.shape == (100,) and idx.shape == (100, 1) and len(values) == 100
    assert any("every element assumed selected" in note and "test_capture.py" in note for note in cap.capture.notes)


def test_cpu_copy_and_print_are_sync_points():
    with capture("h100") as cap:
        x = torch.randn(8, device="cuda")
        x.cpu()
        x.to("cpu", non_blocking=True)  # a non-blocking copy does not make the host wait
        text = repr(x)
    assert [op.sync for op in cap.capture.ops if op.sync] == ["cpu", "print"]
    assert "shape=(8,)" in text


def test_host_only_ops_are_not_gpu_work():
    with capture("h100") as cap:
        a = torch.ones(4) + 1  # CPU tensors
        b = torch.arange(8, device="cuda")  # a factory on the GPU
    ops = cap.capture.ops
    kernels: dict = {}
    for op, root in zip(ops, root_indices(ops)):  # arange runs as arange.start_out on CUDA: one kernel
        kernels[ops[root].op] = kernels.get(ops[root].op, 0) + cost_of(op).kernels
    assert kernels == {"aten.ones.default": 0, "aten.add.Tensor": 0, "aten.arange.default": 1}


@pytest.mark.slow
def test_sdpa_goes_to_the_fused_backend_per_arch():
    def run(gpu, dtype=torch.bfloat16, mask=False):
        with capture(gpu) as cap:
            q = torch.randn(2, 4, 64, 64, device="cuda", dtype=dtype, requires_grad=True)
            m = torch.ones(64, 64, dtype=torch.bool, device="cuda") if mask else None
            F.scaled_dot_product_attention(q, q, q, attn_mask=m, is_causal=not mask).sum().backward()
        return [op.op for op in cap.capture.ops if "attention" in op.op]

    assert run("h100") == ["aten._scaled_dot_product_cudnn_attention.default",
                           "aten._scaled_dot_product_cudnn_attention_backward.default"]
    assert run("a100")[0] == "aten._scaled_dot_product_flash_attention.default"
    assert run("a100", mask=True)[0] == "aten._scaled_dot_product_efficient_attention.default"
    assert run("h100", dtype=torch.float32)[0] == "aten._scaled_dot_product_efficient_attention.default"


@pytest.mark.parametrize("head_dim,dtype,expected", [(64, torch.bfloat16, "cudnn"), (320, torch.bfloat16, "efficient"),
                                                     (66, torch.float32, "math"), (64, torch.float64, "math")])
def test_sdpa_rules_match_h200_probe(head_dim, dtype, expected):
    # The expected backends are what torch._fused_sdp_choice returned on the H200 (validation/probe.json).
    call = SdpaCall(dtype, head_dim, head_dim, 256, 256, 8, 8, 8, False, True, False, False, False, True, False)
    assert choose_backend(call, "sm_90") == expected


def test_batch_norm_picks_cudnn_for_fp32_and_native_for_bf16():
    with capture("h100") as cap:
        bn32, bn16 = torch.nn.BatchNorm2d(8).cuda(), torch.nn.BatchNorm2d(8).cuda().to(torch.bfloat16)
        x = torch.randn(4, 8, 6, 6, device="cuda")
        bn32(x)
        bn16(x.bfloat16())
    ops = _ops(cap.capture)
    assert "aten.cudnn_batch_norm.default" in ops and "aten.native_batch_norm.default" in ops


def test_model_to_cuda_and_dtype_and_device_context():
    with capture("h100") as cap:
        with torch.device("cuda"):
            a = torch.nn.Linear(4, 4)
        b = torch.nn.Linear(4, 4).cuda().to(torch.bfloat16)
        assert a.weight.device.type == "cuda" and b.weight.dtype == torch.bfloat16
    assert cap.capture.ops


def test_capture_roundtrips_through_json(tmp_path):
    cap = capture_workload(_mlp_build, "h100")
    path = tmp_path / "cap.json"
    cap.save(path)
    from kernelcast.records import Capture

    again = Capture.load(path)
    assert again.ops == cap.ops and again.settings == cap.settings


def test_silu_backward_is_one_op_as_on_a_cuda_build():
    # A CPU-only torch would run silu_backward's CompositeImplicitAutograd formula on fake CUDA tensors (seven
    # ops); a CUDA build runs its one kernel.
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(8, 64, device="cuda", requires_grad=True)
        torch.nn.functional.silu(x).sum().backward()
    backward = [o.op for o in cap.capture.ops if o.phase == "backward"]
    assert "aten.silu_backward.default" in backward and "aten.sigmoid.default" not in backward
    pred = predict_capture(cap.capture, "h200")
    assert not pred.uncosted
    x = torch.randn(4, requires_grad=True)  # after the capture, CPU autograd is untouched
    torch.nn.functional.silu(x).sum().backward()
    assert x.grad.shape == (4,)


def test_failed_capture_mutes_torch_error_log_only_while_it_runs(caplog):
    import logging

    from kernelcast.capture.session import RERAISING_TORCH_LOGGERS

    def build():
        x = torch.randn(4, 4, device="cuda")
        return (lambda x: x @ torch.randn(5, 3, device="cuda")), (x,)

    with caplog.at_level(logging.ERROR), pytest.raises(RuntimeError, match="same reduction dim"):
        capture_workload(build, "h100")
    assert caplog.records == []  # fake_tensor.py logs this error with its traceback before re-raising it
    assert not any(logging.getLogger(name).disabled for name in RERAISING_TORCH_LOGGERS)


def test_a_zero_dim_parameter_moves_with_the_module():
    # nn.Parameter(torch.tensor(2.0)): a fake tensor that keeps its value, listed by FakeTensorMode for
    # invalidation; Module._apply's swap_tensors had refused it (KernelBench level 2 programs 3, 50 and 68).
    from kernelcast.capture import capture_workload

    def build():
        scale = torch.nn.Parameter(torch.tensor(2.0))
        lin = torch.nn.Linear(4, 4)
        model = torch.nn.ModuleDict({"lin": lin}).cuda()
        model.scale = scale
        model.cuda()
        x = torch.randn(2, 4, device="cuda")
        return (lambda x: (model["lin"](x) * model.scale).sum().backward()), (x,)

    cap = capture_workload(build, "h200")
    assert any(o.op == "aten.mul.Tensor" for o in cap.ops)


def test_parametrized_modules_move_and_capture():
    """torch.nn.utils.parametrizations, built and moved where users build them: spectral_norm inside a
    `with kernelcast.capture()` block (its power iteration left a reference cycle holding the weight, and
    Module._apply's swap_tensors refused it: "Couldn't swap ParametrizationList.original") and orthogonal in a
    workload's build (its right_inverse checks `torch.allclose(Q.mH @ Q, I)` on the CPU, which FakeTensor refuses
    as data-dependent: every capture failed). The check is answered as passing, with a note."""
    with capture("h200") as block:
        model = torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(16, 16)).cuda()
        model(torch.randn(4, 16, device="cuda")).sum().backward()
    assert any(op.op == "aten.mv.default" for op in block.capture.ops)  # the power iteration, on the GPU

    def build():
        model = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(16, 16)).cuda()
        x = torch.randn(4, 16, device="cuda")
        return (lambda x: model(x).sum().backward()), (x,)

    cap = capture_workload(build, "h200")
    assert any(op.op == "aten.linalg_matrix_exp.default" for op in cap.ops)  # its default map for a square weight
    assert any("torch.allclose" in note and "assumed True" in note for note in cap.notes)


def test_a_script_module_moves_and_runs_as_its_aten_ops():
    """A torch.jit.script'ed module moved with `.to()` / `.half()`: its C++ object holds every parameter, so
    Module._apply's swap of a fake parameter was refused ("Couldn't swap RecursiveScriptModule.weight"); its slots
    are set instead. The compiled forward then runs the moved tensors, and the capture names the module."""
    def build():
        model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.BatchNorm1d(16))
        model = torch.jit.script(model).to("cuda").half()
        return (lambda x: model(x).float().sum().backward()), (torch.randn(4, 16, device="cuda").half(),)

    cap = capture_workload(build, "h200")
    addmm = next(op for op in cap.ops if op.op == "aten.addmm.default")
    assert {(t.device, t.dtype) for t in addmm.args.values() if hasattr(t, "device")} == {("cuda", "float16")}
    assert any(op.op == "aten.native_batch_norm_backward.default" for op in cap.ops)
    assert any(note.startswith("TorchScript module Sequential ran") for note in cap.notes)


class _SigmoidChain(torch.nn.Module):
    def forward(self, x):
        for _ in range(3):
            x = torch.sigmoid(x) * 2.0 + 1.0
        return x


def test_a_script_modules_elementwise_chains_run_as_one_fused_kernel_each():
    """After its profiling calls TorchScript's fuser (NNC) runs each chain of elementwise ops as one kernel: an H100
    ran 12 work items for 4 blocks of Linear(256) + (sigmoid, x 2, + 1) x 3 at batch 64 (each block a GEMM, a
    split-K reduction and one fused_sigmoid_mul kernel) and 40 for 8 blocks at width 1024 (scal, memset, GEMM,
    epilogue, fused), where the aten ops launch 9 elementwise kernels a block (validation/h100/user_kinds_dec08,
    scripts/device/probe_user_kinds.py scripted_chain). The group reads the GEMM's output and writes its result."""
    from kernelcast.costs import cost_of

    def build():
        model = torch.jit.script(torch.nn.Sequential(*[
            torch.nn.Sequential(torch.nn.Linear(256, 256), _SigmoidChain()) for _ in range(4)])).cuda()
        return (lambda x: model(x)), (torch.randn(64, 256, device="cuda"),)

    cap = capture_workload(build, "h200")
    groups = [op for op in cap.ops if "nnc_group" in op.tags]
    assert len(groups) == 4
    assert [cost_of(op).kernels for op in cap.ops if "torchscript" in op.tags and "pointwise" in op.tags
            and not op.decomposed].count(1) == 4  # the group's kernel; its 8 other members launch none
    cost = cost_of(groups[0])
    assert (cost.bytes_read, cost.bytes_written) == (64 * 256 * 4, 64 * 256 * 4)
    pred = predict_capture(cap, "h100-sxm")
    assert sum(op.kernels for op in pred.ops if op.op != "aten.addmm.default") == 4
    # no Python runs inside the graph: what the capture read between its ops was its own interpreter on fake tensors
    # (the H100 ran the held-out torchscript_mlp_forward GPU-bound, 0.40 ms a step; priced so: host-bound, 1.25 ms)
    inside = [op for op in cap.ops if "torchscript" in op.tags and op.parent < 0][1:]
    assert inside and all(op.python_us == 0 and op.python_lines == 0 for op in inside)

    def build_traced():  # a traced module's graph runs under the same executor and fuser
        model = torch.nn.Sequential(torch.nn.Linear(256, 256), _SigmoidChain()).cuda()
        traced = torch.jit.trace(model, torch.randn(64, 256, device="cuda"))
        return (lambda x: traced(x)), (torch.randn(64, 256, device="cuda"),)

    traced = capture_workload(build_traced, "h200")
    assert len([op for op in traced.ops if "nnc_group" in op.tags]) == 1

    def build_twice():  # two calls of a script module: two graphs, a group each, none across them; the module
        # traced from stays eager
        chain = torch.jit.script(_SigmoidChain())
        model = torch.nn.Sequential(torch.nn.Linear(256, 256), _SigmoidChain()).cuda()
        torch.jit.trace(model, torch.randn(64, 256, device="cuda"))
        return (lambda x: chain(chain(x)) + model(x)), (torch.randn(64, 256, device="cuda"),)

    twice = capture_workload(build_twice, "h200")
    assert len([op for op in twice.ops if "nnc_group" in op.tags]) == 2
    assert [op.module for op in twice.ops if "torchscript" in op.tags and op.op == "aten.addmm.default"] == []


def test_torch_save_in_the_step_copies_each_cuda_storage_once_and_writes_nothing(tmp_path):
    """torch.save of CUDA tensors copies every storage to the host first, each once however many tensors view it
    (torch/serialization.py); fake tensors do not pickle, and every step that saved a checkpoint failed. The copies
    are sync points labelled torch.save; the file is not written."""
    with capture("h200") as block:
        with block.paused():
            model = torch.nn.Linear(64, 32).cuda()
            shared = torch.randn(128, device="cuda")
        torch.save({"model": model.state_dict(), "views": [shared[:64], shared[64:]], "step": 3},
                   tmp_path / "ckpt.pt")
    copies = [op for op in block.capture.ops if op.op == "aten._to_copy.default"]
    assert [op.sync for op in copies] == ["torch.save"] * 3  # weight, bias, one storage behind both views
    assert sorted(op.outputs[0].shape for op in copies) == [(32,), (128,), (2048,)]
    assert any(note.startswith("torch.save at") and "3 CUDA storage(s)" in note for note in block.capture.notes)
    assert not (tmp_path / "ckpt.pt").exists()
    assert predict_capture(block.capture, "h200").sync_points == 3
    # then the serialization on the host: every storage written (the step's int is pickled, not a storage)
    saves = [op for op in block.capture.ops if op.op == "host.torch_save"]
    assert [op.args for op in saves] == [{"bytes": (2048 + 32 + 128) * 4, "storages": 3}]


def test_torch_save_serialization_is_priced_on_the_host_by_its_bytes():
    """torch.save's serialization (pickling, a zip record per storage with its CRC32) costs the host about 1 ms per
    MB: an H100 machine's host ran a 12-layer 1024-wide MLP's state_dict (24 storages, 50.4 MB) 52.1 ms a call to a
    buffer, 2.6 ms of it the copies (validation/h100/user_kinds_dec08, scripts/device/probe_user_kinds.py). Saved
    from the CPU it is the serialization alone."""
    import io

    from kernelcast.predict.host import torch_save_us

    with capture("h200") as block:
        with block.paused():
            model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(12)])
        torch.save(model.state_dict(), io.BytesIO())
    pred = predict_capture(block.capture, "h200")
    saves = [op for op in pred.ops if op.op == "host.torch_save"]
    assert len(saves) == 1 and pred.sync_points == 0
    # the marker also carries the Python before it (the state_dict call)
    assert saves[0].host_us == pytest.approx(torch_save_us({"bytes": 50380800, "storages": 24}), rel=0.01)
    assert 40_000 < saves[0].host_us < 60_000


def test_torch_save_of_a_compressed_sparse_tensor_is_one_clear_error():
    """A CSR tensor has no storage of its own (untyped_storage() raises) and a capture records no CSR op: torch.save
    of one in the step is a CaptureError naming the line, not a NotImplementedError from inside pickle."""
    import io

    from kernelcast.errors import CaptureError

    csr = torch.eye(8).to_sparse_csr()
    with pytest.raises(CaptureError, match="sparse_csr tensor: compressed sparse layouts are not modelled"):
        with capture("h200"):
            torch.save({"cpu": csr}, io.BytesIO())


def test_the_torch_save_fix_saves_its_serialization_too():
    """The advice for a torch.save in the step (save every N steps, or from pinned copies on another thread) takes
    its copies' waits and its serialization off the step: the saving counts both, and the host lines name the
    serialization."""
    import io

    from kernelcast.report import host_line

    with capture("h200") as block:
        with block.paused():
            model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
        torch.save(model.state_dict(), io.BytesIO())
    pred = predict_capture(block.capture, "h200")
    save = next(op for op in pred.ops if op.op == "host.torch_save")
    (group,) = pred.sync_groups
    assert group.kind == "torch.save" and group.saving_us > save.host_us - save.python_us
    assert "torch.save's serialization" in host_line(pred)


def test_a_traced_cnn_runs_as_its_module_and_loading_what_the_capture_saved_is_one_clear_error():
    """torch.jit.trace turns sizes and strides into traced values that FakeTensor's meta kernels cannot compare
    (a traced CNN failed every capture): in a capture it returns the module, with a note. Files a capture saves are
    not written, so loading one back is a CaptureError naming where it was saved, not an EOFError."""
    import io

    from kernelcast.errors import CaptureError

    def build():
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).cuda().eval()
        traced = torch.jit.trace(model, torch.randn(2, 3, 8, 8, device="cuda"))
        return (lambda x: traced(x).sum()), (torch.randn(2, 3, 8, 8, device="cuda"),)

    cap = capture_workload(build, "h200")
    assert any(op.op == "aten.convolution.default" for op in cap.ops)
    assert any(note.startswith("torch.jit.trace at") and "Sequential" in note for note in cap.notes)

    with pytest.raises(CaptureError, match="torch.load of a buffer, which this capture saved"):
        with capture("h200"):
            buffer = io.BytesIO()
            torch.save({"w": torch.randn(4, device="cuda")}, buffer)
            buffer.seek(0)
            torch.load(buffer)


def test_a_script_module_keeps_its_parameters_when_moved_and_writes_nothing(tmp_path):
    """An optimizer built before a script module's `.cuda()` holds the same parameters after it (as Module._apply's
    set_data keeps them on a GPU): its step is recorded. ScriptModule.save, torch.jit.freeze of a traced module
    and a torch.save of a sparse CUDA tensor write nothing and record what a GPU would do; loading a path the
    capture saved, by name or through an open file, is the CaptureError."""
    from kernelcast.errors import CaptureError

    def build():
        model = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model = model.cuda()
        x = torch.randn(4, 16, device="cuda")

        def step(x):
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
        return step, (x,)

    cap = capture_workload(build, "h200")
    assert any(op.phase == "optimizer" and "foreach" in op.op for op in cap.ops)

    target = tmp_path / "model.pt"
    target.write_bytes(b"a checkpoint of the user's")
    with capture("h200") as block:
        scripted = torch.jit.script(torch.nn.Linear(4, 4)).cuda()
        scripted.save(str(target))
        frozen = torch.jit.freeze(torch.jit.trace(torch.nn.Linear(4, 4).cuda().eval(), torch.randn(2, 4)))
        assert isinstance(frozen, torch.nn.Linear)
        with block.paused():
            sparse = torch.sparse_coo_tensor(torch.tensor([[0, 2]], device="cuda"), torch.ones(2, device="cuda"), (4,))
        torch.save(sparse, target)
        with pytest.raises(CaptureError, match="which this capture saved"):
            with open(target, "rb") as f:
                torch.load(f)
    assert target.read_bytes() == b"a checkpoint of the user's"
    saves = [op for op in block.capture.ops if op.sync == "torch.save"]
    assert [op.outputs[0].dtype for op in saves] == ["int64", "float32"]  # the indices' storage, the values'


def test_a_cuda_tensor_indexed_by_a_host_index_copies_it_first():
    """CUDA's advanced indexing copies an index tensor on the host to the device (TensorAdvancedIndexing.cpp
    make_info), in the forward and again in the backward's index_put; FakeTensor had refused the backward's
    mixed devices (HF BEiT's relative position bias: every training capture failed)."""
    with capture("h200") as block:
        with block.paused():
            table = torch.randn(50, 4, device="cuda", requires_grad=True)
        index = torch.arange(10)  # built on the host, as BEiT builds its relative position index
        table[index].sum().backward()
    ops = block.capture.ops
    copies = [op.sync for op in ops if op.op == "aten._to_copy.default"]
    assert copies == ["h2d pageable", "h2d pageable"]
    assert any(op.op == "aten._index_put_impl_.default" for op in ops)


def test_a_host_boolean_mask_into_a_cuda_tensor_copies_its_indices():
    """A boolean mask on the host indexing a CUDA tensor: its nonzero runs on the host (no GPU sync) and the
    indices are copied to the device, in the forward and in the backward's index_put; an assignment through it
    is not the masked_fill_ path, which needs the mask on self's device (TensorAdvancedIndexing.cpp
    canDispatchToMaskedFill). The backward and the assignment failed on mixed devices."""
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(50, 4, device="cuda", requires_grad=True)
        mask = torch.rand(50) > 0.5
        x[mask].sum().backward()
        with torch.no_grad():
            x[mask] = 0.0
    ops = block.capture.ops
    assert [op.sync for op in ops if op.sync] == ["h2d pageable"] * 3
    assert not any(op.op in ("aten.nonzero.default", "aten.masked_fill_.Scalar", "aten.masked_fill_.Tensor")
                   for op in ops)


def test_tensor_split_by_a_host_tensor_of_indices():
    """tensor_split's tensor overload reads its indices on the host (TensorShape.cpp), which a fake tensor does not
    hold: every such call failed ("data is not allocated"). A literal's values and computed ones (value hints) go
    in as ints; unknown ones are spread evenly, with a note. OpInfo tensor_split on an H100 (torch 2.11): its
    backward's 15 work items and peak growth as predicted (validation/probes/opinfo_items)."""
    with capture("h200") as block:
        with block.paused():
            x = torch.randn(10, 4, device="cuda")
        literal = torch.tensor_split(x, torch.tensor([2, 5]))
        computed = x.tensor_split(torch.arange(3) * 2)
        unknown = torch.tensor_split(x, torch.empty(2, dtype=torch.long))  # values nobody wrote
    assert [t.shape[0] for t in literal] == [2, 3, 5] and [t.shape[0] for t in computed] == [0, 2, 2, 6]
    assert [t.shape[0] for t in unknown] == [3, 3, 4]
    assert any("tensor_split" in note and "evenly spaced" in note for note in block.capture.notes)


def test_a_cuda_generator_seeds_the_step_without_a_gpu():
    """torch.Generator(device="cuda"), as diffusers pipelines and augmentations seed their samples: a torch without a
    GPU has no CUDA generator ("Cannot get CUDA generator without ATen_cuda library"), so a CPU one stands in,
    telling its device as asked, and the random ops drop it (multinomial's refs had refused any generator)."""
    with capture("h200") as block:
        generator = torch.Generator(device="cuda").manual_seed(0)
        assert isinstance(generator, torch.Generator) and generator.device == torch.device("cuda", 0)
        assert isinstance(torch.default_generator, torch.Generator)  # what Inductor asks of any generator
        torch.poisson(torch.rand(4, device="cuda"), generator)  # a generator passed positionally
        x = torch.randn(4, 8, generator=generator, device=generator.device)
        torch.multinomial(x.softmax(-1), 2, generator=generator)
        torch.randperm(16, device="cuda", generator=generator)
    assert x.device.type == "cuda" and not [op for op in block.capture.ops if op.op == "aten._to_copy.default"]
    assert torch.Generator is torch._C.Generator  # torch's own again after the block


def test_data_parallel_on_one_gpu_runs_its_module():
    """nn.DataParallel over one GPU scatters its inputs (torch._C._scatter, which a CPU build lacks: every step
    failed) and then calls its module on them: the chunk is the input itself, no copy, no kernel."""
    def build():
        model = torch.nn.DataParallel(torch.nn.Linear(16, 16).cuda())
        return (lambda x: model(x).sum().backward()), (torch.randn(4, 16, device="cuda"),)

    ops = [op.op for op in capture_workload(build, "h200").ops]
    assert "aten.addmm.default" in ops and "aten._to_copy.default" not in ops


def test_allclose_on_the_gpu_runs_its_kernels_and_reads_the_answer():
    """torch.allclose in the recorded step: CUDA runs isclose's kernels and all(), then reads the bool back
    (TensorCompare.cpp): a sync point, noted as assumed True like any all()."""
    with capture("h200") as block:
        with block.paused():
            a, b = torch.randn(16, 16, device="cuda"), torch.randn(16, 16, device="cuda")
        assert torch.allclose(a, b)
    ops = block.capture.ops
    assert any(op.op == "aten.all.default" for op in ops)
    assert [op.sync for op in ops if op.sync] == ["item"]
    assert predict_capture(block.capture, "h200").sync_points == 1


def test_a_transformer_encoders_padding_mask_fast_path_captures_with_a_note():
    """nn.TransformerEncoder in eval under no_grad with src_key_padding_mask takes PyTorch's inference fast path,
    which asks the GPU whether the mask is left-aligned before turning the batch into a nested tensor; the
    capture answers "not left-aligned" (the values are not there) and says so, instead of failing on the CUDA-only
    aten::_nested_tensor_from_mask_left_aligned (a new user's encoder)."""
    from kernelcast.capture.router import NESTED_MASK_NOTE

    with capture("h200") as cap:
        with cap.paused():
            layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
            model = torch.nn.TransformerEncoder(layer, num_layers=2).cuda().eval()
            x = torch.randn(2, 16, 64, device="cuda")
            mask = torch.zeros(2, 16, dtype=torch.bool, device="cuda")
        with torch.no_grad():
            model(x, src_key_padding_mask=mask)
    assert NESTED_MASK_NOTE in cap.capture.notes
    assert any("native_layer_norm" in op.op for op in cap.capture.ops)
    # the check itself runs on the GPU and reads its answer back (Equal.cpp: eq, all, item): a sync point, whose
    # fix (mask_check=False or enable_nested_tensor=False) the prediction names
    ops = [op.op for op in cap.capture.ops]
    assert "aten.argmin.default" in ops and "aten.cumsum.default" in ops and "aten.all.default" in ops
    assert any(op.sync == "padding mask check" for op in cap.capture.ops)


@pytest.mark.slow
def test_attention_modules_take_the_fused_inference_path_where_the_gpu_does():
    """nn.TransformerEncoderLayer and nn.MultiheadAttention in eval mode without autograd run PyTorch's fused
    inference path on the GPU (torch._transformer_encoder_layer_fwd, torch._native_multi_head_attention), gated by
    torch.overrides.has_torch_function, which the capture's own torch-function mode would make true: the capture
    answers "no handler" there and records the fused path's CUDA chain (transformer.cpp, attention.cu), with a
    note; in training it records the standard path and says nothing (the GPU runs that too)."""
    from kernelcast.capture.router import FAST_PATH_NOTE

    def run(train: bool):
        with capture("h200") as cap:
            with cap.paused():
                layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                                         batch_first=True)
                model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).cuda()
                model.train(train)
                x = torch.randn(2, 16, 64, device="cuda")
            if train:
                model(x).sum().backward()
            else:
                with torch.no_grad():
                    model(x)
        notes = [n for n in cap.capture.notes if n.startswith(FAST_PATH_NOTE.split("{")[0])]
        return notes, _ops(cap.capture)

    notes, ops = run(train=False)
    assert len(notes) == 1 and "nn.TransformerEncoderLayer" in notes[0]
    # fp32, head dim 16: efficient attention on sm_90, so attention.cu hands the heads to SDPA; the first
    # feed-forward GEMM carries its relu (cuBLASLt epilogue), the residual adds are in place
    assert ops.count("aten._scaled_dot_product_efficient_attention.default") == 2
    assert ops.count("aten._addmm_activation.default") == 2 and "aten.relu.default" not in ops
    assert ops.count("aten.add_.Tensor") == 4
    notes, ops = run(train=True)
    assert notes == [] and "aten.relu.default" in ops and "aten._addmm_activation.default" not in ops


def test_fused_multi_head_attention_runs_its_own_chain_with_a_padding_mask():
    """With a key padding mask (or the math backend picked) native_multi_head_attention_cuda runs its
    own chain: the packed projection, _transform_bias_rescale_qkv, bmm, _masked_softmax, bmm, the heads
    transposed back, the output projection; each op priced."""
    with capture("h200") as cap:
        with cap.paused():
            attn = torch.nn.MultiheadAttention(64, 4, batch_first=True).cuda().half().eval()
            x = torch.randn(2, 16, 64, device="cuda", dtype=torch.float16)
            pad = torch.zeros(2, 16, dtype=torch.bool, device="cuda")
        with torch.no_grad():
            out = attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]
    assert out.shape == (2, 16, 64)
    chain = ["aten.mm.default", "aten._transform_bias_rescale_qkv.default", "aten.bmm.default",
             "aten._masked_softmax.default", "aten.bmm.out", "aten.clone.default", "aten.addmm.default"]
    ops = [op for op in _ops(cap.capture) if op in chain]
    assert ops == chain
    pred = predict_capture(cap.capture, "h200")
    assert not pred.uncosted


def test_fused_multi_head_attention_hands_bf16_heads_to_cudnn_without_a_mask():
    """Without a mask a bf16 nn.MultiheadAttention in eval runs the packed projection, the SDPA backend (cuDNN on
    sm_90 from torch 2.11) and the output projection: the H200 ran exactly those (validation/
    zoo_fastpath_measured.json.gz mha_fastpath_forward: addmm, cuDNN attention, addmm, with their memsets)."""
    with capture("h200") as cap:
        with cap.paused():
            attn = torch.nn.MultiheadAttention(256, 4, batch_first=True).cuda().to(torch.bfloat16).eval()
            x = torch.randn(2, 32, 256, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            attn(x, x, x, need_weights=False)
    chain = {"aten.addmm.default", "aten._scaled_dot_product_cudnn_attention.default", "aten.mm.default",
             "aten._transform_bias_rescale_qkv.default", "aten.clone.default"}
    assert [op for op in _ops(cap.capture) if op in chain] == [
        "aten.addmm.default", "aten._scaled_dot_product_cudnn_attention.default", "aten.addmm.default"]


def test_finding_the_live_modules_leaves_the_warnings_shown_once_shown():
    """capture/lifetimes.py alive() had silenced warnings with warnings.catch_warnings(), whose exit resets every
    location's once-shown registry: a model that warns each call then printed its warning again in the recorded
    step, its source line read from disk, booked as the model's Python (KernelBench L2 #28)."""
    import warnings
    from unittest import mock

    from kernelcast.capture.lifetimes import alive

    shown = []

    def warn_like_a_model():
        warnings.warn("a model's warning, shown once per location", UserWarning)

    with mock.patch.object(warnings, "_showwarnmsg", lambda msg: shown.append(msg.lineno)), \
            warnings.catch_warnings():
        warnings.simplefilter("default")
        warn_like_a_model()
        assert alive(torch.nn.Module) is not None
        warn_like_a_model()
    assert len(shown) == 1, shown
