"""Convolutions: PyTorch's backend choice, the bias add it implies, and the launch-count classifier."""

import pytest

from kernelcast.calibrate.launch_model import conv_label, per_group_items
from kernelcast.costs.conv_backend import CUDNN, NATIVE_DEPTHWISE, conv_backend
from kernelcast.costs.launch_table import CONV_FEATURES, LaunchTable, conv_features, conv_label_items
from kernelcast.costs.tree_model import TreeClassifier
from kernelcast.profiles import load_profile


def key(pass_="conv_fwd", dtype="bfloat16", channels_last=False, c_in=64, c_out=64, kernel=3, stride=1, size=56,
        groups=1, batch=8, dims=2, transposed=False, padding=1, dilation=1, output_padding=0):
    return (pass_, dtype, channels_last, c_in, c_out, kernel, stride, size, groups, batch, dims, transposed, padding,
            dilation, output_padding)


@pytest.mark.parametrize("conv, backend", [
    # what ran on the H200 (torch 2.11, cuDNN 9.19; the calibration sweeps and zoo convnext_forward_bf16)
    (key(dtype="bfloat16", groups=64), NATIVE_DEPTHWISE),  # conv_depthwise2d_forward_kernel
    (key(dtype="float32", groups=64, c_out=128), NATIVE_DEPTHWISE),  # a channel multiplier of 2
    (key(dtype="bfloat16", groups=64, channels_last=True), CUDNN),  # channels_last: always cuDNN
    (key(dtype="float16", groups=64), CUDNN),  # fp16, >= 32 channels, 3x3 at stride 1
    (key(dtype="float16", c_in=16, c_out=16, groups=16), NATIVE_DEPTHWISE),  # under 32 channels
    (key(dtype="float16", groups=64, kernel=7), NATIVE_DEPTHWISE),  # cuDNN's check takes 1, 3 and 5 only
    (key(dtype="float16", groups=64, stride=2, batch=8, c_in=64, c_out=64), NATIVE_DEPTHWISE),
    (key(dtype="float16", groups=512, c_in=512, c_out=512, stride=2, size=14), CUDNN),
    (key(dtype="float16", dims=1, kernel=31, groups=64, size=1000), CUDNN),  # 1-D (height 1) at stride 1
    (key(dtype="float16", dims=1, kernel=31, groups=64, size=1000, stride=2), NATIVE_DEPTHWISE),
    (key(groups=32, c_in=64, c_out=64), CUDNN),  # grouped, not depthwise
])
def test_conv_backend_follows_pytorchs_choice(conv, backend):
    assert conv_backend(conv) == backend


def test_per_group_loops_are_labelled_per_group():
    k = key(groups=16, c_in=768, c_out=768, kernel=128, size=500, dims=1)
    # wav2vec2's positional convolution on the H200 (zoo wav2vec2_train): per group, two transposes in, the
    # CUTLASS fprop kernel and a transpose out; then the bias add (not part of the pass)
    loop = ["nchwToNhwcKernel", "nchwToNhwcKernel", "cutlass_tensorop_bf16_s16816fprop", "nhwcToNchwKernel"] * 16
    assert per_group_items(k, loop) == 4
    assert conv_label((*k, len(loop), 4)) == -4 and conv_label_items(-4, 16) == 64
    # the same pass run once for all groups: a count of items
    once = ["nchwToNhwcKernel", "nchwToNhwcKernel", "sm90_xmma_fprop_implicit_gemm", "nhwcToNchwKernel"]
    assert per_group_items(k, once) == 0 and conv_label((*k, 4, 0)) == 4
    assert per_group_items(key(groups=64), ["conv_depthwise2d"]) == 0  # depthwise: never a loop


def test_conv_features_name_every_input():
    x = dict(zip(CONV_FEATURES, conv_features(key(groups=64))))
    assert len(x) == len(CONV_FEATURES) == len(conv_features(key()))
    assert x["depthwise"] == 1.0 and x["native depthwise kernel"] == 1.0 and x["log2 groups"] == 6.0


def test_shipped_profile_has_the_conv_classifier_and_its_held_out_error():
    launches = load_profile("h200").data["launches"]
    held_out = launches["conv_model"]["held_out"]
    assert held_out["rows"] == len(launches["conv"])
    assert held_out["wrong_classifier"] < held_out["wrong_nearest_row"]  # why the classifier is used
    table = LaunchTable.from_profile(launches)
    assert isinstance(table.conv_model, TreeClassifier)
    # zoo convnext_forward_bf16 on the H200: its 7x7 depthwise convolutions ran one native kernel each
    assert table.conv_items(key(c_in=192, c_out=192, groups=192, kernel=7, size=28, batch=32)) == 1


@pytest.mark.slow
def test_stored_conv_trees_give_scikit_learns_classes():
    np = pytest.importorskip("numpy")
    pytest.importorskip("sklearn")
    from kernelcast.calibrate import launch_model

    rows = load_profile("h200").data["launches"]["conv"][::8]
    x = np.array([conv_features(tuple(r[:12])) for r in rows])
    clf = launch_model.new_classifier(launch_model.CONV_BOOSTING_ITERATIONS, launch_model.CONV_MAX_LEAF_NODES).fit(x, [conv_label(r) for r in rows])
    stored = TreeClassifier.from_dict(launch_model.export_classifier(clf, CONV_FEATURES).to_dict())
    assert [stored.predict(list(v)) for v in x] == list(clf.predict(x))
    # the class probabilities too (scripts/device/probe_conv_launches.py weighs them into an expected count)
    probabilities = [stored.probabilities(list(v)) for v in x[:50]]
    assert np.allclose([[p[c] for c in clf.classes_] for p in probabilities], clf.predict_proba(x[:50]), atol=1e-6)


def _conv_op(x, w, bias, groups, out):
    from helpers import op

    args = {"input": x, "weight": w, "bias": bias, "stride": (1, 1), "padding": (1, 1), "dilation": (1, 1),
            "transposed": False, "output_padding": (0, 0), "groups": groups}
    return op("aten.convolution.default", args, [out])


def test_only_cudnn_leaves_the_bias_to_a_kernel_of_its_own():
    from helpers import contiguous
    from kernelcast.costs import CostContext, cost_of

    ctx = CostContext(launches=LaunchTable.from_profile(load_profile("h200").data["launches"]))
    x, out = contiguous((32, 192, 28, 28), "bfloat16"), contiguous((32, 192, 28, 28), "bfloat16")
    bias = contiguous((192,), "bfloat16")
    # zoo convnext_forward_bf16 on the H200: a 7x7 depthwise conv with bias ran conv_depthwise2d_forward_kernel
    # alone (the bias inside it); its 1x1 convolutions ran cuDNN's kernels, then an elementwise add for the bias
    depthwise = cost_of(_conv_op(x, contiguous((192, 1, 7, 7), "bfloat16"), bias, 192, out), ctx)
    assert depthwise.kernels == 1
    dense = cost_of(_conv_op(x, contiguous((192, 192, 1, 1), "bfloat16"), bias, 1, out), ctx)
    without_bias = cost_of(_conv_op(x, contiguous((192, 192, 1, 1), "bfloat16"), None, 1, out), ctx)
    assert dense.kernels == without_bias.kernels + 1


def test_the_bias_kernels_of_a_cudnn_convolution_are_priced_as_what_they_are():
    """KernelBench level 2 #19 on the H200: after the transposed convolution's 174 us of cuDNN kernels, aten's
    in-place bias add_ over the 128 x 64 x 64 x 64 fp32 output took 114 us; it was counted as a launch with no
    time. The add is a pointwise kernel over the output; the bias gradient a reduce of grad_output per channel."""
    from helpers import contiguous, op
    from kernelcast.costs import CostContext, cost_of
    from kernelcast.predict import predict_capture  # noqa: F401  (the model the step uses)
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.devices import get_gpu
    from kernelcast.records import CaptureSettings

    ctx = CostContext(launches=LaunchTable.from_profile(load_profile("h200").data["launches"]))
    x, out = contiguous((32, 192, 28, 28), "bfloat16"), contiguous((32, 192, 28, 28), "bfloat16")
    w, bias = contiguous((192, 192, 3, 3), "bfloat16"), contiguous((192,), "bfloat16")
    with_bias = cost_of(_conv_op(x, w, bias, 1, out), ctx)
    add = [p for p in with_bias.parts if p.kind == "pointwise_strided"]
    assert len(add) == 1 and add[0].bytes_written == out.nbytes and add[0].bytes_read == out.nbytes + bias.nbytes
    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    without = model.estimate(cost_of(_conv_op(x, w, None, 1, out), ctx)).time_us
    extra_us = model.estimate(with_bias).time_us - without
    # the output read and written once at no more than the H200's 4.8 TB/s, and no slower than 1 TB/s
    assert 2 * out.nbytes / 4.8e6 < extra_us < 2 * out.nbytes / 1e6
    grad_args = {"grad_output": out, "input": x, "weight": w, "bias_sizes": [192], "stride": (1, 1),
                 "padding": (1, 1), "dilation": (1, 1), "transposed": False, "output_padding": (0, 0), "groups": 1}
    backward = cost_of(op("aten.convolution_backward.default", {**grad_args, "output_mask": [True, True, True]},
                          [x, w, bias]), ctx)
    assert any(p.kind.startswith("reduction") and p.bytes_read == out.nbytes for p in backward.parts)
    only_bias = cost_of(op("aten.convolution_backward.default", {**grad_args, "output_mask": [False, False, True]},
                           [None, None, bias]), ctx)
    assert only_bias.kind.startswith("reduction") and only_bias.kernels >= 1


def test_the_conv_key_carries_where_the_windows_fall():
    """Padding, dilation and output padding are in the key, and a key's output size follows torch's formulas:
    KernelBench level 1 #77, a transposed 3-D convolution 32 -> 64, kernel 3, stride 2, padding 1, dilation 2,
    over 16 x 16 x 16 x 32 x 32 input (size keyed 25, the sizes' mean), out (25 - 1) * 2 - 2 + 2 * 2 + 1 = 51."""
    from helpers import contiguous, op
    from kernelcast.costs.matmul import conv_key
    from kernelcast.predict.shape_kinds import conv_output_size

    x, w = contiguous((16, 32, 16, 32, 32), "float32"), contiguous((32, 64, 3, 3, 3), "float32")
    args = {"input": x, "weight": w, "bias": None, "stride": (2, 2, 2), "padding": (1, 1, 1),
            "dilation": (2, 2, 2), "transposed": True, "output_padding": (0, 0, 0), "groups": 1}
    key = conv_key(x, w, op("aten.convolution.default", args, [contiguous((16, 64, 33, 65, 65), "float32")]),
                   "conv_fwd")
    assert key[12:] == (1, 2, 0)
    assert conv_output_size(key) == (key[7] - 1) * 2 - 2 * 1 + 2 * (3 - 1) + 0 + 1
    plain = key[:12] + (1, 1, 0)
    assert conv_output_size(plain) == (key[7] - 1) * 2 - 2 + 3
