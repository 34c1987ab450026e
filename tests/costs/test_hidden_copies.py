"""Work an op's CUDA code does in another kind of kernel (Cost.parts), and pointwise ops that read across the
output's memory order: each priced as the kernel it is."""

import pytest

from helpers import contiguous, op
from kernelcast.costs import cost_of
from kernelcast.costs.common import memory_key, reads_across
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings, TensorMeta

# Whisper's encoder (zoo whisper_encoder_forward on the H200): the conv output permuted to (batch, frames,
# channels), 4 x 1500 x 384 bf16
PERMUTED = TensorMeta((4, 1500, 384), "bfloat16", (576000, 1, 1500), "cuda")


def _layer_norm(x):
    y, stat = contiguous(x.shape, x.dtype), contiguous((4, 1500, 1), "float32")
    args = {"input": x, "normalized_shape": (384,), "weight": contiguous((384,), x.dtype),
            "bias": contiguous((384,), x.dtype), "eps": 1e-5}
    return op("aten.native_layer_norm.default", args, [y, stat, stat])


def test_a_strided_layer_norm_input_is_copied_by_a_transposing_copy():
    cost = cost_of(_layer_norm(PERMUTED))
    (copy,) = cost.parts
    assert (copy.kind, copy.kernels, copy.bytes) == ("copy_transpose", 1, 2 * PERMUTED.nbytes)
    assert cost.kernels == 2 and cost.bytes == cost.remainder().bytes + copy.bytes
    assert cost.remainder().kind == "norm" and cost.remainder().kernels == 1
    assert cost_of(_layer_norm(contiguous(PERMUTED.shape, "bfloat16"))).parts == ()


def test_the_calibrated_model_prices_each_part_by_its_kind():
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    cost = cost_of(_layer_norm(PERMUTED))
    whole = model.estimate(cost).time_us
    assert whole == pytest.approx(model.estimate(cost.remainder()).time_us + model.estimate(cost.parts[0]).time_us)
    # H200, zoo whisper_encoder_forward: the copy took 16 µs and the norm kernel 11 µs, 27 µs per call
    assert 18 < whole < 40
    # each part on its own curve: the transposing copy at the true transposes' rate, the 384-wide bf16 norm at
    # its width's (the layer norm's curve had priced the copy at 8.8 µs, the permuting copies' rate)
    assert model.estimate(cost.parts[0]).time_us == pytest.approx(15.8, rel=0.25)
    assert model.estimate(cost.remainder()).time_us == pytest.approx(11.1, rel=0.25)


def test_pointwise_reading_across_the_output_order_is_a_transposing_kind():
    # the permuted conv output plus the contiguous positional embedding (1500, 384), broadcast over the batch
    out = TensorMeta(PERMUTED.shape, "bfloat16", PERMUTED.stride, "cuda")
    add = op("aten.add.Tensor", {"self": PERMUTED, "other": contiguous((1500, 384), "bfloat16")}, [out],
             ("pointwise",))
    assert reads_across(add) and memory_key(add, "pointwise")[0] == "pointwise_transpose"
    # a bias broadcast along rows is read in the output's order: strided, not transposing
    rows = contiguous((4, 1500, 384), "bfloat16")
    bias_add = op("aten.add.Tensor", {"self": rows, "other": contiguous((384,), "bfloat16")}, [rows], ("pointwise",))
    assert not reads_across(bias_add) and memory_key(bias_add, "pointwise")[0] == "pointwise_strided"


def test_a_zero_dim_gpu_operand_is_a_broadcast_not_a_scalar():
    """A 0-d CUDA tensor (a scalar nn.Parameter, torch.where's scalar_tensor on the device) is a stride-0 operand:
    only a CPU scalar takes CUDALoops.cuh's unary-functor path (gpu_kernel_with_scalars: iter.is_cpu_scalar), so
    the op runs the non-vectorised elementwise_kernel<128, 2>. Measured on the H200: KernelBench L2 #50's
    `x * self.scale1` over 128 x 16 x 31 x 63 x 63 fp32, 805 µs, where a Python float's multiply of the same size
    (L2 #96) ran vectorised near the copy rate; zoo optim_rprop's torch.where(cond, 0, grad) ran
    elementwise_kernel<128, 2> too."""
    x = contiguous((128, 16, 31, 63, 63))
    scale = TensorMeta((), "float32", (), "cuda")
    mul = op("aten.mul.Tensor", {"self": x, "other": scale}, [contiguous(x.shape)], ("pointwise",))
    assert memory_key(mul, "pointwise")[0] == "pointwise_strided"
    on_host = TensorMeta((), "float32", (), "cpu")  # a wrapped Python number: the vectorised path
    mul_host = op("aten.mul.Tensor", {"self": x, "other": on_host}, [contiguous(x.shape)], ("pointwise",))
    assert memory_key(mul_host, "pointwise")[0] == "pointwise"
    # two one-element tensors: nothing is broadcast
    one = TensorMeta((), "float32", (), "cuda")
    assert memory_key(op("aten.mul.Tensor", {"self": one, "other": scale}, [one], ("pointwise",)),
                      "pointwise")[0] == "pointwise"


def test_softmax_backward_multiplies_first_and_copies_strided_inputs():
    # SoftMax.cu (torch 2.11): softmax's backward runs `grad * output` (a pointwise kernel) before its kernel,
    # seen on the H200 under _softmax_backward_data in zoo moe_train and unet_block_train; log_softmax's does not,
    # but makes a strided grad contiguous (zoo wav2vec2_train's CTC log-probs, transposed: one copy)
    grad, out = contiguous((64, 1024)), contiguous((64, 1024))
    args = {"grad_output": grad, "output": out, "dim": -1, "input_dtype": "float32"}
    soft = cost_of(op("aten._softmax_backward_data.default", args, [contiguous((64, 1024))]))
    assert soft.kernels == 2 and soft.parts == () and soft.kind == "softmax_backward"
    assert soft.bytes == 6 * grad.nbytes  # the product's read of both and write, then the kernel's
    log = cost_of(op("aten._log_softmax_backward_data.default", args, [contiguous((64, 1024))]))
    assert log.kernels == 1 and log.parts == ()
    transposed = TensorMeta((50, 4, 32), "float32", (32, 1600, 1), "cuda")
    args = {"grad_output": transposed, "output": transposed, "dim": -1, "input_dtype": "float32"}
    log = cost_of(op("aten._log_softmax_backward_data.default", args, [contiguous((50, 4, 32))]))
    # outer dims out of order: read in order
    assert log.kernels == 3 and [p.kind for p in log.parts] == ["copy_permute", "copy_permute"]


def test_arithmetic_bound_pointwise_ops_are_capped_by_their_element_rate():
    # H200 (validation/probes/pointwise_math_probe.json): 64M-element bf16 gelu took 88.9 us (3.0 TB/s, 766 G
    # elements/s) where relu streamed in 65.9 us; in fp32 both took 128 us. The kind carries the op; the cap binds
    # only where 4 bytes move per element.
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    n = 1 << 26

    def unary(name, dtype, **args):
        x = contiguous((n,), dtype)
        return cost_of(op(f"aten.{name}.default", {"self": x, **args}, [contiguous((n,), dtype)], ("pointwise",)))

    gelu, relu = unary("gelu", "bfloat16"), unary("relu", "bfloat16")
    assert gelu.kind == "pointwise_math" and gelu.key[2] == "gelu" and relu.kind == "pointwise"
    assert unary("gelu", "bfloat16", approximate="tanh").key[2] == "gelu_tanh"
    gelu_us, relu_us = model.estimate(gelu).time_us, model.estimate(relu).time_us
    assert gelu_us == pytest.approx(88.9, rel=0.05) and gelu_us > 1.2 * relu_us
    # fp32: memory binds first, the same time as relu's
    assert model.estimate(unary("gelu", "float32")).time_us == pytest.approx(
        model.estimate(unary("relu", "float32")).time_us, rel=0.02)


def _clone(src: TensorMeta) -> "OpRecord":
    return op("aten.clone.default", {"self": src, "memory_format": None}, [contiguous(src.shape, src.dtype)])


def test_layout_changing_copies_are_told_apart_by_what_they_read():
    # (B, H, S, D) made contiguous from a (B, S, H, D) buffer: outer dims move, D stays innermost
    heads = TensorMeta((8, 16, 1024, 64), "bfloat16", (16 * 1024 * 64, 64, 16 * 64, 1), "cuda")
    assert memory_key(_clone(heads), "copy")[0] == "copy_permute"
    # the last two dims swapped: the output's innermost dim strides through the input
    assert memory_key(_clone(PERMUTED), "copy")[0] == "copy_transpose"
    # NCHW -> NHWC (ConvNeXt's permute before its layer norm)
    nhwc = TensorMeta((32, 56, 56, 96), "bfloat16", (96 * 56 * 56, 56, 1, 56 * 56), "cuda")
    assert memory_key(_clone(nhwc), "copy")[0] == "copy_transpose"
    # GQA's repeat_kv: the KV heads expanded, read in order, not vectorized
    repeat_kv = TensorMeta((8, 4, 4, 1024, 128), "bfloat16", (524288, 131072, 0, 128, 1), "cuda")
    assert memory_key(_clone(repeat_kv), "copy")[0] == "copy_permute"
    # one value expanded (sum()'s gradient): a plain copy, as a fill writes
    assert memory_key(_clone(TensorMeta((64, 1024, 7, 7), "float16", (0, 0, 0, 0), "cuda")), "copy")[0] == "copy"


def test_copies_priced_on_their_own_curves_against_the_device():
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    # H200 zoo llama_decode_static_cache: repeat_kv's (8, 4, 4, 1024, 128) bf16 expand made contiguous, 38 us
    # (the contiguous copies' curve gives 10)
    repeat_kv = TensorMeta((8, 4, 4, 1024, 128), "bfloat16", (524288, 131072, 0, 128, 1), "cuda")
    assert model.estimate(cost_of(_clone(repeat_kv))).time_us == pytest.approx(38.0, rel=0.3)
