"""Device memory (issue 12): the caching allocator's rules with hand-derived numbers, a small capture's peak
against a hand count, --arg parsing, the fit search, the report's memory keys and trace counters."""

import dataclasses
import json
import subprocess
import sys

import pytest

from helpers import contiguous, op, subprocess_env

from kernelcast.devices import get_gpu
from kernelcast.errors import KernelcastError, WorkloadError
from kernelcast.whatif.fit import largest_fitting, parse_range
from kernelcast.predict.allocator import (CachingAllocator, OutOfMemory, allocation_size, is_small, round_size,
                                          should_split)

KIB, MIB = 1024, 1024 * 1024


# -- the allocator's rules (c10/cuda/CUDACachingAllocator.cpp) --------------------------------------------------
def test_round_size_is_512_byte_blocks():
    assert round_size(1) == 512  # kMinBlockSize
    assert round_size(512) == 512
    assert round_size(513) == 1024  # 512 * ceil(513 / 512)
    assert round_size(4 * MIB + 1) == 4 * MIB + 512


def test_pools_and_segment_sizes():
    assert is_small(MIB) and not is_small(MIB + 512)  # kSmallSize: 1 MiB is still small
    assert allocation_size(512) == 2 * MIB  # kSmallBuffer
    assert allocation_size(MIB) == 2 * MIB
    assert allocation_size(MIB + 512) == 20 * MIB  # kLargeBuffer for 1-10 MiB
    assert allocation_size(10 * MIB - 512) == 20 * MIB
    assert allocation_size(10 * MIB) == 10 * MIB  # kMinLargeAlloc and up: rounded to kRoundLarge (2 MiB)
    assert allocation_size(10 * MIB + 512) == 12 * MIB


def test_split_rules():
    assert should_split(2 * MIB, 2 * MIB - 512, small=True)  # small pool: a 512-byte rest is kept
    assert not should_split(2 * MIB, 2 * MIB - 256, small=True)
    assert should_split(20 * MIB, 3 * MIB, small=False)  # large pool: the rest must exceed 1 MiB
    assert not should_split(20 * MIB, 19 * MIB, small=False)  # 1 MiB left: not split
    assert should_split(20 * MIB, 19 * MIB, small=False, expandable=True)  # expandable: 512 bytes suffice


def test_allocated_counts_whole_blocks_and_segments_stay_cached():
    a = CachingAllocator()
    small = a.malloc(1000)  # 1024-byte block in a 2 MiB small segment
    assert (a.allocated, a.reserved) == (1024, 2 * MIB)
    first = a.malloc(3 * MIB)  # a 20 MiB large segment, split: 17 MiB stay free
    assert (a.allocated, a.reserved) == (1024 + 3 * MIB, 22 * MIB)
    a.malloc(16 * MIB + 512 * KIB)  # best fit is the 17 MiB rest; 0.5 MiB would be left: not split
    assert a.allocated == 1024 + 3 * MIB + 17 * MIB  # memory_allocated() counts the whole 17 MiB block
    assert a.reserved == 22 * MIB and a.peak_allocated == a.allocated
    a.free(first)
    again = a.malloc(2 * MIB)  # reuses the freed 3 MiB block (1 MiB rest: not split) on the same stream
    assert a.reserved == 22 * MIB and again.size == 3 * MIB
    other_stream = a.malloc(2 * MIB, stream=7)  # another stream's pool: a new segment
    assert a.reserved == 42 * MIB
    for block in (small, again, other_stream):
        a.free(block)
    a.release_cached()  # empty_cache: segments with nothing in use go back (the 17 MiB block is still held)
    assert a.reserved == 20 * MIB


def test_expandable_segments_grow_by_pages():
    a = CachingAllocator(expandable_segments=True)
    a.malloc(3 * MIB)  # maps one 20 MiB page of the large pool's segment
    assert (a.allocated, a.reserved) == (3 * MIB, 20 * MIB)
    a.malloc(18 * MIB)  # 17 MiB free at the end: one more page, the block grows into it
    assert (a.allocated, a.reserved) == (21 * MIB, 40 * MIB)


def test_out_of_memory_after_releasing_the_cache():
    a = CachingAllocator(capacity_bytes=40 * MIB)
    a.free(a.malloc(12 * MIB))  # a 12 MiB segment, cached
    a.malloc(16 * MIB)  # the cached 12 MiB is too small: 28 MiB reserved
    a.malloc(14 * MIB)  # 42 MiB > 40: the cached 12 MiB segment is released first, then 30 MiB fits
    assert a.reserved == 30 * MIB
    with pytest.raises(OutOfMemory) as err:
        a.malloc(12 * MIB)  # 42 MiB again, and nothing cached to release
    assert err.value.segment == 12 * MIB and err.value.reserved == 30 * MIB


# -- a capture's peak against a hand count ---------------------------------------------------------------------
def _mlp_build():
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 128)).cuda()
    opt = torch.optim.Adam(net.parameters())
    x = torch.randn(1024, 256, device="cuda")

    def step(x):
        net(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (x,)


@pytest.fixture(scope="module")
def mlp_capture():
    from kernelcast.capture import capture_workload

    return capture_workload(_mlp_build, "h200")


def test_small_capture_peak_against_a_hand_count(mlp_capture):
    from kernelcast.devices import get_gpu
    from kernelcast.predict.memory import predict_memory

    mem = predict_memory(mlp_capture, get_gpu("h200"))
    params = 256 * 512 * 4 + 512 * 4 + 512 * 128 * 4 + 128 * 4  # 788,992 bytes, each a whole 512-byte multiple
    workspaces = 32 * MIB + 1 * MIB + 32 * MIB  # cuBLAS (main thread), cuBLASLt (addmm's bias epilogue), autograd's
    resident = workspaces + params + 2 * params + 1024 * 256 * 4  # + Adam's exp_avg, exp_avg_sq + the input x
    assert mem.resident_bytes == resident == 71_572_992
    # At the first Linear's bias gradient, a column sum of its 1024 x 512 output gradient (threshold_backward's
    # output, 2 MiB) split across 16 blocks per output: its staging buffer, 4 x 512 x 16 x 32 x 4 = 4 MiB, and
    # semaphores (one 512-byte block) (costs/reduce_config.py global_reduce_temporaries); every parameter's gradient
    # (the bias's own output among them), and the loss and its seed gradient (512 bytes each).
    assert mem.peak_bytes - mem.resident_bytes == 4 * MIB + 512 + 2 * MIB + params + 2 * 512
    assert mem.peak_op.op == "aten.sum.dim_IntList" and mem.peak_op.phase == "backward"
    assert mem.by_category["parameters"] == params and mem.by_category["optimizer state"] == 2 * params
    assert mem.by_category["library workspaces"] == workspaces
    assert mem.by_category["gradients"] == params
    assert mem.by_category["temporaries"] == 4 * MIB + 512 + 2 * MIB  # the staging buffer and semaphores, the grad
    assert [(w.kind, w.thread) for w in mem.workspaces] == [("cuBLAS", "main"), ("cuBLASLt", "main"),
                                                           ("cuBLAS", "autograd")]
    assert mem.fit.fits and mem.fit.usable_bytes == int(141e9) - 512 * MIB


def test_memory_trace_survives_a_saved_capture(mlp_capture, tmp_path):
    from kernelcast.devices import get_gpu
    from kernelcast.predict.memory import predict_memory
    from kernelcast.records import Capture

    path = tmp_path / "cap.json"
    mlp_capture.save(path)
    again = Capture.load(path)
    assert again.memory == mlp_capture.memory
    # the L4 (sm_89) keeps two 8 MiB + 128 KiB cuBLAS workspaces where the H200 (sm_90) keeps 32 MiB ones
    l4, h200 = predict_memory(again, get_gpu("l4")), predict_memory(mlp_capture, get_gpu("h200"))
    assert h200.resident_bytes - l4.resident_bytes == 2 * (32 * MIB - (4096 * 1024 * 2 + 16 * 1024 * 8))


def test_storage_resize_frees_and_allocates():
    """FSDP2 frees and re-allocates its unsharded parameters with untyped_storage().resize_()."""
    import torch

    from kernelcast.capture import capture_workload

    def build():
        buf = torch.empty(1 << 20, device="cuda")  # 4 MiB

        def step(buf):
            buf.untyped_storage().resize_(0)
            buf.untyped_storage().resize_(4 << 20)
            return (buf + 1).sum()

        return step, (buf,)

    cap = capture_workload(build, "h200")
    trace = cap.memory
    by_id = trace.by_id()
    step_events = [(aid > 0, by_id[abs(aid)].nbytes) for aid, _ in trace.events[trace.step_start:trace.step_end]]
    assert step_events[:2] == [(False, 4 << 20), (True, 4 << 20)]


def test_softmax_backward_holds_grad_times_output():
    from kernelcast.predict.memory import internal_temporaries

    grad = contiguous((8, 1024, 1024))
    record = op("aten._softmax_backward_data.default",
                {"grad_output": grad, "output": grad, "dim": -1, "input_dtype": "float32"}, [grad])
    # SoftMax.cu softmax_backward_cuda_out: tmp = grad * output, 8 x 1024 x 1024 x 4 bytes
    assert internal_temporaries((record,), get_gpu("h200")) == {0: [32 * MIB]}


def test_a_split_reduction_holds_its_staging_buffer():
    from kernelcast.predict.memory import internal_temporaries

    # an H100 (validation/probes/size_rules/size_rules_run1.json, case amax_cols_4gb): amax over dim 0 of
    # (2^20 + 2^11) x 1024 fp32 rose the peak by 132 MiB + the 4 KiB output: per 32-bit part (four), 264 blocks
    # per output x 32 threads x 4 outputs each x 1024 outputs x 4 bytes
    x = contiguous(((1 << 20) + (1 << 11), 1024))
    amax = op("aten.amax.default", {"self": x, "dim": [0], "keepdim": False}, [contiguous((1024,))],
              tags=("reduction",))
    # (and an int per grid column: 256 outputs of 4 / 32 a block = 8)
    assert internal_temporaries((amax,), get_gpu("h100-sxm")) == {0: [132 * MIB, 4 * 8]}
    # a row sum of the same tensor fills the GPU with its rows: no split, no buffer
    rows = op("aten.sum.dim_IntList", {"self": x, "dim": [1]}, [contiguous(((1 << 20) + (1 << 11),))],
              tags=("reduction",))
    assert internal_temporaries((rows,), get_gpu("h100-sxm")) == {}


def test_a_pool_backward_copies_an_expanded_gradient():
    from kernelcast.costs import cost_of
    from kernelcast.predict.memory import internal_temporaries
    from kernelcast.records import TensorMeta

    # the same H100 run, case max_pool3d_backward: `max_pool3d(x, 2).sum().backward()` over 128 x 64 x 32 x 8 x 8
    # fp32; the sum's gradient is expanded (all strides 0), DilatedMaxPool3d.cu copies it to contiguous: one copy
    # kernel more, 8 MiB held while the pool's kernels run (measured 11 work items, peak +32 MiB)
    x = contiguous((128, 64, 32, 8, 8))
    grad = TensorMeta((128, 64, 16, 4, 4), "float32", (0, 0, 0, 0, 0))
    indices = contiguous((128, 64, 16, 4, 4), "int64")
    backward = op("aten.max_pool3d_with_indices_backward.default",
                  {"grad_output": grad, "self": x, "kernel_size": [2, 2, 2], "stride": [], "padding": [0, 0, 0],
                   "dilation": [1, 1, 1], "ceil_mode": False, "indices": indices}, [contiguous(x.shape)])
    assert internal_temporaries((backward,), get_gpu("h100-sxm")) == {0: [8 * MIB]}
    assert cost_of(backward).kernels == 1 + 3 + 1  # the zero fill, three grid-z launches, the copy
    given = dataclasses.replace(backward, args={**backward.args, "grad_output": contiguous(grad.shape)})
    assert internal_temporaries((given,), get_gpu("h100-sxm")) == {}
    assert cost_of(given).kernels == 4


def test_a_reduced_loss_keeps_its_elementwise_storage():
    # H200 (torch 2.11, KernelBench L1 #96): smooth_l1_loss of two 128 x 4096 fp32 tensors raised the call's peak
    # by 4 MiB + 1 KiB: the 0-d loss over a 2 MiB storage, and the elementwise temporary it reduced
    import torch
    import torch.nn.functional as F

    from kernelcast.capture import capture
    from kernelcast.predict.memory import predict_memory
    from kernelcast.devices import get_gpu

    growth = {}
    for name, loss in (("smooth_l1", F.smooth_l1_loss), ("mse", F.mse_loss), ("huber", F.huber_loss),
                       ("l1", F.l1_loss)):
        with capture("h200") as cap:
            with cap.paused():
                a, b = torch.randn(128, 4096, device="cuda"), torch.randn(128, 4096, device="cuda")
            out = loss(a, b)
        memory = predict_memory(cap.capture, get_gpu("h200"))
        growth[name] = memory.peak_bytes - memory.resident_bytes
        del out
    # the mean's staging buffer and semaphores: a 512-byte block each (costs/reduce_config.py)
    reduce_all = 2 * 512
    assert growth["smooth_l1"] == 4 * MIB + reduce_all  # as measured: 4 MiB + 1 KiB
    assert growth["mse"] == 4 * MIB + reduce_all  # the same structured op (Loss.cpp TORCH_META_FUNC(mse_loss))
    # its temporary, and the 0-d result in a 512-byte block of its own
    assert growth["huber"] == 2 * MIB + 512 + reduce_all
    # composite (Loss.cpp l1_loss: (input - target).abs(), then the mean): ops the capture sees, each its own
    assert growth["l1"] == 4 * MIB + 512 + reduce_all


# -- the report ----------------------------------------------------------------------------------------------
def test_json_keys_and_trace_counter(mlp_capture):
    from kernelcast.predict import predict_capture
    from kernelcast.report import prediction_json
    from kernelcast.report.trace import chrome_trace

    pred = predict_capture(mlp_capture, "h200")
    data = prediction_json(pred)
    keys = {"peak_memory_bytes", "resident_memory_bytes", "reserved_memory_bytes", "memory_by_category", "peak_op",
            "fits"}
    assert keys <= set(data)
    assert data["fits"]["fits"] is True and data["fits"]["cuda_context_bytes"] == 512 * MIB
    assert data["peak_op"]["op"] == "aten.sum.dim_IntList"  # the first bias gradient, with its staging buffer
    counters = [e for e in chrome_trace(pred)["traceEvents"] if e["ph"] == "C"]
    assert counters and max(e["args"]["allocated"] for e in counters) == pytest.approx(
        data["peak_memory_bytes"] / MIB, abs=1e-3)


# -- --arg ------------------------------------------------------------------------------------------------------
def _build(batch: int = 8, lr: float = 0.1, amp: bool = False, name: str = "x", other=None):
    return None


def test_build_kwargs_typed_from_defaults():
    from kernelcast.capture.workload import build_kwargs

    got = build_kwargs(_build, ["batch=16", "lr=3e-4", "amp=true", "name=y", "other=5"])
    assert got == {"batch": 16, "lr": 3e-4, "amp": True, "name": "y", "other": 5}
    assert isinstance(got["batch"], int) and isinstance(got["lr"], float)
    with pytest.raises(WorkloadError, match="no argument 'batchx'"):
        build_kwargs(_build, ["batchx=3"])
    with pytest.raises(WorkloadError, match="not a valid int"):
        build_kwargs(_build, ["batch=many"])
    with pytest.raises(WorkloadError, match="NAME=VALUE"):
        build_kwargs(_build, ["batch"])


@pytest.mark.slow
def test_cli_arg_errors_are_one_line():
    for bad in ("batchx=3", "batch=lots"):
        result = subprocess.run([sys.executable, "-m", "kernelcast", "predict", "example:gpt", "--arg", bad],
                                capture_output=True, text=True, env=subprocess_env())
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.slow
def test_cli_arg_passes_the_batch(tmp_path):
    work = tmp_path / "work.py"
    work.write_text("import torch\n"
                    "def build(batch=2):\n"
                    "    m = torch.nn.Linear(64, 64).cuda()\n"
                    "    x = torch.randn(batch, 64, device='cuda')\n"
                    "    return (lambda x: m(x)), (x,)\n")
    out = tmp_path / "out.json"
    result = subprocess.run([sys.executable, "-m", "kernelcast", "predict", f"{work}:build", "--arg", "batch=4096",
                             "--json", str(out)], capture_output=True, text=True, env=subprocess_env())
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    # the input (4096 x 64 x 4 = 1 MiB) is resident; the output (1 MiB) is the step's only allocation
    assert data["peak_memory_bytes"] - data["resident_memory_bytes"] == 1 * MIB


# -- fit's search -----------------------------------------------------------------------------------------------
def test_largest_fitting_doubles_then_bisects():
    search = largest_fitting(lambda b: b <= 21, 1, 64)
    assert (search.max_fit, search.first_oom) == (21, 22)
    # doubling 1, 2, 4, 8, 16, 32 (no), then bisection 24 (no), 20, 22 (no), 21
    assert [v for v, _ in search.tried] == [1, 2, 4, 8, 16, 32, 24, 20, 22, 21]


def test_largest_fitting_edges():
    assert largest_fitting(lambda b: True, 1, 100).max_fit == 100  # 1, 2, ..., 64, then 100 fits
    none = largest_fitting(lambda b: False, 4, 100)
    assert (none.max_fit, none.first_oom, len(none.tried)) == (None, 4, 1)
    with pytest.raises(KernelcastError):
        largest_fitting(lambda b: True, 8, 2)


def test_parse_range():
    assert parse_range("batch=1..1024") == ("batch", 1, 1024)
    for bad in ("batch=1-1024", "batch", "1x=1..2", "batch=a..b"):
        with pytest.raises(KernelcastError):
            parse_range(bad)


@pytest.mark.slow
def test_fit_cli_finds_the_largest_batch(tmp_path):
    """A tiny T4-sized search: a 1 GiB tensor per batch element on a 16 GB GPU (15.4 GB usable)."""
    work = tmp_path / "work.py"
    work.write_text("import torch\n"
                    "def build(batch=1):\n"
                    "    x = torch.randn(batch, 256, 1024, 1024, device='cuda')\n"
                    "    return (lambda x: x * 2), (x,)\n")
    out = tmp_path / "fit.json"

    def fit(*extra):
        result = subprocess.run([sys.executable, "-m", "kernelcast", "fit", f"{work}:build", "--gpu", "t4",
                                 "--arg-range", "batch=1..64", "--json", str(out), *extra],
                                capture_output=True, text=True, env=subprocess_env())
        assert result.returncode == 0, result.stderr
        return result.stdout, json.loads(out.read_text())

    # x and x * 2 are 2 GiB per batch element; 16e9 - 512 MiB = 15.46e9 usable: 7 x 2 GiB = 15.03e9 fits, 8 does not
    stdout, data = fit("--margin", "0")
    assert (data["max_batch"], data["first_oom_batch"]) == (7, 8)
    assert data["prediction"]["peak_memory_bytes"] == 7 * 2 * 1024 * MIB
    # with the default 5% left free (14.69e9 of it usable), 7 sits inside the margin
    stdout, data = fit()
    assert (data["max_batch"], data["first_oom_batch"], data["margin"]) == (6, 7, 0.05)
    assert "batch=7: inside the 5% margin" in stdout and "with a 5% margin: 6" in stdout


def test_fit_with_a_margin_of_100_percent_is_one_error_line():
    result = subprocess.run([sys.executable, "-m", "kernelcast", "fit", "example:gpt", "--gpu", "l4",
                             "--arg-range", "batch=1..4", "--margin", "100"], capture_output=True, text=True,
                            env=subprocess_env())
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == ["kernelcast: error: the margin 100% must be at least 0% and below "
                                                  "100%"]


def test_fit_with_an_empty_range_says_so_before_anything_else():
    """`fit --arg-range batch=100..1` had printed its search line, then the error (issue 34)."""
    result = subprocess.run([sys.executable, "-m", "kernelcast", "fit", "example:gpt", "--gpu", "l4",
                             "--arg-range", "batch=100..1"], capture_output=True, text=True, env=subprocess_env())
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == ["kernelcast: error: the range 100..1 has no value to try (low to "
                                                  "high, please)"]


def test_fit_says_a_range_from_0_starts_too_low_and_takes_its_margin_with_a_percent_sign():
    """A new user's `batch=0..4` was called empty, and `--margin 5%` (as the help writes the default) refused."""
    from kernelcast.cli import _percent
    from kernelcast.errors import KernelcastError
    from kernelcast.whatif.fit import check_range

    with pytest.raises(KernelcastError, match="must start at 1 or more"):
        check_range(0, 4)
    assert _percent("5%") == 5.0 and _percent("2.5") == 2.5


def test_set_up_in_a_capture_block_is_resident_and_labelled():
    # the README's `with kernelcast.capture(...)` example: the model built in cap.paused() before the step had
    # been counted as the step's activations and temporaries (a new user's trial, 2026-12-01)
    import torch

    from kernelcast.capture import capture

    with capture("h100") as cap:
        with cap.paused():
            model = torch.nn.Linear(1024, 1024).cuda()
            x = torch.randn(64, 1024, device="cuda")
        model(x).sum().backward()
    memory = cap.predict("h100").memory
    weight_and_bias = (1024 * 1024 + 1024) * 4
    assert memory.by_category["parameters"] >= weight_and_bias
    assert memory.by_category["gradients"] >= weight_and_bias
    assert memory.resident_bytes >= weight_and_bias


def _checkpointed_build(checkpointed: bool):
    import torch
    from torch.utils.checkpoint import checkpoint

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = torch.nn.Linear(256, 1024), torch.nn.Linear(1024, 256)

        def forward(self, x):
            return x + self.down(torch.relu(self.up(x)))

    def build():
        blocks = torch.nn.ModuleList(Block() for _ in range(4)).cuda()
        x = torch.randn(4096, 256, device="cuda", requires_grad=True)

        def step(x):
            h = x
            for block in blocks:
                h = checkpoint(block, h, use_reentrant=False) if checkpointed else block(h)
            h.sum().backward()

        return step, (x,)

    return build


@pytest.mark.slow
def test_activation_checkpointing_frees_each_recomputed_activation_during_backward():
    """Non-reentrant checkpointing keeps each block's input only and recomputes the block in backward; each
    recomputed activation is freed once backward has used it (the H200, validation/zoo_issue31_measured.json.gz:
    a ViT-B-shaped encoder trained checkpointed peaked at 1.28 GB against 2.42 GB plain; the capture had kept every
    recomputed activation alive through ModuleTracker's hooks and predicted 2.39 GB)."""
    from kernelcast.capture import capture_workload
    from kernelcast.predict import predict_capture

    checkpointed = capture_workload(_checkpointed_build(True), "h200")
    plain = capture_workload(_checkpointed_build(False), "h200")
    trace = checkpointed.memory
    alive: dict[int, int] = {}
    for alloc, _ in trace.events[trace.step_start:trace.step_end]:
        if alloc > 0:
            alive[alloc] = alloc
        else:
            alive.pop(-alloc, None)
    by_id = trace.by_id()
    left = [by_id[a].nbytes for a in alive if by_id[a].stage == "step" and by_id[a].label == ""]
    assert sum(left) < 1 << 20  # no 16 MiB recomputed activation is left after backward
    hidden_mib = 4096 * 1024 * 4 / 2**20  # one block's relu output: 16 MiB
    saved = predict_capture(plain, "h200").memory.peak_bytes - predict_capture(checkpointed, "h200").memory.peak_bytes
    assert saved >= 2 * hidden_mib * 2**20  # the plain step keeps every block's activations to its backward


def test_an_out_of_memory_verdict_says_fragmentation_when_the_peak_is_under_the_usable_memory():
    """Both figures under the usable memory and still out of memory had read as a contradiction (issue 34)."""
    from types import SimpleNamespace

    from kernelcast.report.memory_text import oom_verdict_lines

    fit = {"fits": False, "usable_bytes": 15 * 1024 * MIB, "capacity_bytes": 16 * 1024 * MIB,
           "cuda_context_bytes": 512 * MIB, "fixes": [],
           "oom": {"stage": "step", "op": "aten.mm.default", "source": "train.py:9", "segment_bytes": 2048 * MIB,
                   "allocated_bytes": 12 * 1024 * MIB, "reserved_bytes": 14 * 1024 * MIB}}
    mem = {"peak_memory_bytes": 13 * 1024 * MIB, "resident_memory_bytes": 1024 * MIB,
           "peak_reserved_memory_bytes": 14 * 1024 * MIB, "fits": fit}
    first = oom_verdict_lines(SimpleNamespace(memory=mem, gpu_name="NVIDIA T4 16GB"))[0]
    assert first.startswith("OUT OF MEMORY on NVIDIA T4 16GB, though the step's peak, 13.00 GiB allocated")
    assert "a block of 2.00 GiB finds no room" in first and "--expandable-segments" in first
    mem["peak_reserved_memory_bytes"] = 17 * 1024 * MIB
    first = oom_verdict_lines(SimpleNamespace(memory=mem, gpu_name="NVIDIA T4 16GB"))[0]
    assert "would reserve 17.00 GiB with no limit) with only 15.00 GiB usable" in first


def test_an_out_of_memory_verdict_says_why_no_fix_was_re_predicted():
    """`--no-fixes` had been told to give a workload file it had been given (a new user, 2026-12-05)."""
    from types import SimpleNamespace

    from kernelcast.report.memory_text import oom_verdict_lines

    fit = {"fits": False, "usable_bytes": 15 * 1024 * MIB, "capacity_bytes": 16 * 1024 * MIB,
           "cuda_context_bytes": 512 * MIB, "fixes": [], "oom": None}
    mem = {"peak_memory_bytes": 20 * 1024 * MIB, "resident_memory_bytes": 1024 * MIB,
           "peak_reserved_memory_bytes": 21 * 1024 * MIB, "fits": fit}
    rec = SimpleNamespace(memory=mem, gpu_name="NVIDIA T4 16GB")
    assert "need the workload file" in oom_verdict_lines(rec)[-1]  # a saved capture: it cannot be built again
    fit["fixes_skipped"] = "--no-fixes"
    last = oom_verdict_lines(rec)[-1]
    assert "fixes not re-predicted: --no-fixes" in last and "workload file" not in last


def test_human_bytes_says_bytes_below_a_kib_and_binary_units_above():
    from kernelcast.records.memory import human_bytes
    assert human_bytes(0) == "0 B" and human_bytes(512) == "512 B"
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(3 * 2**20) == "3.0 MiB" and human_bytes(2**31) == "2.00 GiB"
