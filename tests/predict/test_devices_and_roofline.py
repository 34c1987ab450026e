"""Device data sanity, GPU lookup, and the roofline with the seed's numbers."""

import pytest

from kernelcast.costs import Cost
from kernelcast.devices import GPU, all_gpus, get_gpu
from kernelcast.errors import UnknownGPUError
from kernelcast.predict.kernel_model import RooflineModel
from kernelcast.records import CaptureSettings

REQUIRED = {"h100-sxm", "h100-pcie", "h200", "b200", "a100-40gb", "a100-80gb", "l40s", "l4", "a10g", "t4", "v100",
            "rtx4090", "rtx3090", "mi300x"}


def test_catalogue_has_the_required_gpus():
    assert REQUIRED <= set(all_gpus())


@pytest.mark.parametrize("gpu_id", sorted(REQUIRED))
def test_every_entry_is_sane(gpu_id):
    gpu = all_gpus()[gpu_id]
    assert gpu.source and gpu.name
    assert 1e11 < gpu.mem_bw_bytes_per_s < 2e13  # 0.1 to 20 TB/s
    assert 1e9 < gpu.memory_bytes < 1e12 and 1e6 <= gpu.l2_bytes < 1e9 and 10 < gpu.sm_count < 400
    assert 1e12 < gpu.peak_flops["fp32"] < 1e15
    for key, peak in gpu.peak_flops.items():
        ridge = peak / gpu.mem_bw_bytes_per_s
        assert 0.1 < ridge < 1000, (key, ridge)
    top = max(gpu.peak_flops.get(k, 0) for k in ("bf16_tensor", "fp16_tensor", "fp32"))
    assert 5 < top / gpu.mem_bw_bytes_per_s < 1000  # ridge of the fastest dense roof


def test_known_datasheet_values():
    assert all_gpus()["l4"].mem_bw_bytes_per_s == 300e9  # not an H100's bandwidth
    assert all_gpus()["h200"].mem_bw_bytes_per_s == 4.8e12
    assert all_gpus()["h100-sxm"].peak_flops["bf16_tensor"] == pytest.approx(989.4e12)  # dense, not sparse


def test_lookup_by_alias_and_unknown_gpu_suggests():
    assert get_gpu("H100").id == "h100-sxm" and get_gpu("NVIDIA H200").id == "h200"
    with pytest.raises(UnknownGPUError, match="closest: .*h100"):
        get_gpu("h1000")


def _toy_gpu(peak_flops: float, bandwidth: float) -> GPU:
    return GPU(id="toy", name="toy", aliases=(), vendor="nvidia", arch="toy", compute_capability="9.0",
               sm_count=100, memory_bytes=80e9, mem_bw_bytes_per_s=bandwidth, l2_bytes=50e6, host_link="pcie5",
               host_link_bw_bytes_per_s=64e9, peak_flops={"fp32": peak_flops, "bf16_tensor": peak_flops},
               source="test")


def test_seed_ridge_point():
    gpu = _toy_gpu(100e12, 2e12)
    assert gpu.ridge_flop_per_byte("fp32") == 50  # 100 TFLOP/s / 2 TB/s = 50 FLOP/B


def test_roofline_time_and_bound():
    model = RooflineModel(_toy_gpu(100e12, 2e12), CaptureSettings(), min_kernel_us=0.0)
    n = 100_000_000
    elementwise = model.estimate(Cost(flops=n, bytes_read=4 * n, bytes_written=4 * n))
    assert elementwise.bound == "memory"
    assert elementwise.time_us == pytest.approx(8 * n / 2e12 * 1e6)  # 800 MB / 2 TB/s = 400 us
    matmul = model.estimate(Cost(flops=2 * 8192**3, bytes_read=2 * 2 * 8192**2, bytes_written=2 * 8192**2,
                                 math="matmul", dtype="bfloat16"))
    assert matmul.bound == "compute" and matmul.time_us == pytest.approx(2 * 8192**3 / 100e12 * 1e6)


def test_latency_floor():
    model = RooflineModel(_toy_gpu(100e12, 2e12), CaptureSettings(), min_kernel_us=2.0)
    tiny = model.estimate(Cost(flops=10, bytes_read=40, bytes_written=40, kernels=2))
    assert tiny.bound == "latency" and tiny.time_us == 4.0  # two work items at a 2 us floor each


def test_fp32_matmul_uses_tf32_only_when_allowed():
    gpu = all_gpus()["h100-sxm"]
    assert gpu.matmul_peak("float32", allow_tf32=False)[1] == "fp32"
    assert gpu.matmul_peak("float32", allow_tf32=True)[1] == "tf32_tensor"
    assert gpu.matmul_peak("bfloat16", allow_tf32=False)[1] == "bf16_tensor"


@pytest.mark.parametrize("gpu_id", sorted(REQUIRED))
def test_model_label_says_what_kernel_model_for_does(gpu_id):
    from kernelcast.predict import kernel_model_for, kernel_model_label
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.records import Capture

    gpu, label = all_gpus()[gpu_id], kernel_model_label(all_gpus()[gpu_id])
    model = kernel_model_for(gpu, Capture(ops=()))
    if label == "datasheet":
        assert isinstance(model, RooflineModel)
    else:
        assert isinstance(model, CalibratedModel) and model.transferred == (label != "calibrated")
    if gpu_id == "h200":  # one profile today
        assert label == "calibrated"
    else:  # carried from it with the GPU's own or its architecture's achieved rates (devices/achieved.py)
        assert label.startswith("scaled from H200") and ("fitted" in label or "unvalidated" in label)


def test_only_other_vendors_get_the_cuda_kernels_note():
    from kernelcast.predict import gpu_notes

    assert gpu_notes(get_gpu("h100")) == ()
    (note,) = gpu_notes(get_gpu("mi300x"))
    assert note.startswith("AMD Instinct MI300X 192GB is not an NVIDIA GPU: ") and "CUDA's kernels" in note


def test_each_arch_runs_a_precision_where_its_hardware_does():
    """Per-arch library behaviour: Turing and Volta have fp16 tensor cores but no bf16 or TF32 ones (NVIDIA
    Turing architecture whitepaper), so their bf16 and fp32 GEMMs run on the CUDA cores whatever allow_tf32 says;
    Ampere and later run TF32 where it is allowed (cuDNN convolutions by default, cuBLAS matmuls only with
    torch.backends.cuda.matmul.allow_tf32) and bf16 on tensor cores."""
    t4, v100, a100, h200 = (get_gpu(n) for n in ("t4", "v100", "a100-80gb", "h200"))
    for old in (t4, v100):
        assert old.matmul_peak("float16", False)[1] == "fp16_tensor"
        assert old.matmul_peak("bfloat16", False) == (old.peak_flops["fp32"], "fp32")
        assert old.matmul_peak("float32", True) == (old.peak_flops["fp32"], "fp32")
        assert not old.supports_bf16
    for new in (a100, h200):
        assert new.matmul_peak("bfloat16", False)[1] == "bf16_tensor" and new.supports_bf16
        assert new.matmul_peak("float32", True)[1] == "tf32_tensor"
        assert new.matmul_peak("float32", False)[1] == "fp32"


def test_is_bf16_supported_answers_as_torch_does_on_the_target():
    """torch.cuda.is_bf16_supported() is True on compute capability 8+, and below it only with including_emulation
    (its default): a T4 says True by default and False with including_emulation=False."""
    import kernelcast  # noqa: F401
    import torch

    from kernelcast.capture.api import _session

    with _session("t4"):
        assert torch.cuda.is_bf16_supported() is True
        assert torch.cuda.is_bf16_supported(including_emulation=False) is False
    with _session("h200"):
        assert torch.cuda.is_bf16_supported(including_emulation=False) is True


def test_bf16_matrix_math_on_a_gpu_without_bf16_tensor_cores_is_named():
    """A T4 (Turing) has fp16 tensor cores and no bf16 ones: a bf16 step's prediction says how much of its GPU time
    runs on the CUDA cores for it, and what fp16 would use; an A100's does not."""
    from kernelcast.costs import Cost
    from kernelcast.devices import get_gpu
    from kernelcast.predict import precision_notes
    from kernelcast.records import PredictedOp

    def pred(roof, time_us, family="matmul"):
        return PredictedOp(index=0, op="aten.mm.default", phase="forward", module="", source="", flops=1e9,
                           bytes=1e6, intensity=1e3, kernels=1, time_us=time_us, bound="compute", roof=roof,
                           host_us=5.0, rate_class=f"{family}:{roof}")

    gemm = Cost(flops=1e9, bytes_read=1e6, kernels=1, math="matmul", dtype="bfloat16", kind="gemm")
    notes = precision_notes(get_gpu("t4"), [pred("bf16", 300.0), pred("fp32", 100.0)], [gemm, None])
    assert len(notes) == 1 and "no bf16 tensor cores" in notes[0] and "75%" in notes[0] and "fp16" in notes[0]
    assert precision_notes(get_gpu("a100-80gb"), [pred("bf16_tensor", 300.0)], [gemm]) == ()


def test_fp32_matrix_products_say_where_tf32_would_take_them():
    """PyTorch leaves TF32 off for matmuls and on for cuDNN convolutions: an fp32 step's GEMMs on the CUDA cores of
    a GPU with TF32 tensor cores are said, with the switch that moves them (from 5% of the GPU time); its
    convolutions on the TF32 roof are said too; a T4 (no TF32) says neither."""
    from kernelcast.costs import Cost
    from kernelcast.devices import get_gpu
    from kernelcast.predict import FP32_MATMUL_NOTE_SHARE, CUDNN_TF32_NOTE, precision_notes
    from kernelcast.records import PredictedOp

    def pred(roof, time_us, family="matmul"):
        return PredictedOp(index=0, op="aten.mm.default", phase="forward", module="", source="", flops=1e9,
                           bytes=1e6, intensity=1e3, kernels=1, time_us=time_us, bound="compute", roof=roof,
                           host_us=5.0, rate_class=f"{family}:{roof}")

    gemm = Cost(flops=1e9, bytes_read=1e6, kernels=1, math="matmul", dtype="float32", kind="gemm")
    conv = Cost(flops=1e9, bytes_read=1e6, kernels=1, math="conv", dtype="float32", kind="conv")
    (note,) = precision_notes(get_gpu("a100-80gb"), [pred("fp32", 300.0), pred("fp32", 100.0, "memory")],
                              [gemm, None])
    assert "300.0 µs" in note and "75%" in note and "set_float32_matmul_precision('high')" in note
    small = 0.5 * FP32_MATMUL_NOTE_SHARE * 1000.0
    assert precision_notes(get_gpu("a100-80gb"), [pred("fp32", small), pred("fp32", 1000.0, "memory")],
                           [gemm, None]) == ()
    assert precision_notes(get_gpu("h200"), [pred("tf32_tensor", 300.0, "conv")], [conv]) == \
        (CUDNN_TF32_NOTE.format(what="convolutions"),)
    rnn = Cost(flops=1e9, bytes_read=1e6, kernels=1, math="conv", dtype="float32", kind="cudnn_rnn")
    assert "cuDNN RNNs" in precision_notes(get_gpu("h200"), [pred("tf32_tensor", 300.0, "conv")], [rnn])[0]
    assert precision_notes(get_gpu("t4"), [pred("fp32", 300.0), pred("fp32", 300.0, "conv")], [gemm, conv]) == ()


def test_an_unknown_gpus_suggestions_name_each_gpu_once():
    # a new user's `--gpu rtx5090` had read "closest: rtx4090, rtx3090, rtx-4090" (one GPU twice, by an alias)
    from kernelcast.devices import all_gpus, find_by_name
    entry, hint = find_by_name("rtx5090", all_gpus())
    names = hint.removeprefix("; closest: ").split(", ")
    assert entry is None and "rtx4090" in names and "rtx-4090" not in names


def test_kernel_counts_say_where_library_launches_are_not_measured():
    """A step's kernel count differs between GPUs where cuBLAS / cuDNN split calls (measured on the H200 and the
    H100 through it): elsewhere each call is one kernel, and the prediction says so, only where the step calls
    those libraries."""
    from kernelcast.costs import Cost
    from kernelcast.devices import get_gpu
    from kernelcast.predict import LIBRARY_LAUNCHES_NOTE, cost_context, launch_count_notes
    from kernelcast.records import Capture

    gemm = Cost(flops=1e9, bytes_read=1e6, kernels=1, math="matmul", dtype="float32", kind="gemm")
    copy = Cost(bytes_read=1e6, kernels=1, dtype="float32", kind="copy")
    capture = Capture(ops=())
    for gpu_id, said in (("a10g", True), ("h200", False), ("h100", False)):
        gpu = get_gpu(gpu_id)
        notes = launch_count_notes(gpu, cost_context(gpu, capture), [gemm, None])
        assert bool(notes) == said, gpu_id
    a10g = get_gpu("a10g")
    (note,) = launch_count_notes(a10g, cost_context(a10g, capture), [gemm])
    assert note.startswith(LIBRARY_LAUNCHES_NOTE.split("{")[0]) and "H200" in note
    assert launch_count_notes(a10g, cost_context(a10g, capture), [copy]) == ()
