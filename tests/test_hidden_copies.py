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
