"""The fitted kernel-time corrections: stored trees, where the model uses them, and the shipped profile's."""

import math

import pytest

from kernelcast.costs.tree_model import TreeRegressor
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.predict.shape_kinds import SHAPE_FEATURES
from kernelcast.profiles import load_profile
from kernelcast.records import CaptureSettings


def _model(profile: dict) -> CalibratedModel:
    gpu = get_gpu("h200")
    return CalibratedModel(gpu, CaptureSettings(), profile, gpu)


@pytest.mark.slow
def test_stored_regressor_gives_scikit_learns_values():
    np = pytest.importorskip("numpy")
    pytest.importorskip("sklearn")
    from kernelcast.calibrate import time_model

    profile = load_profile("h200").data
    keys, features, targets = time_model.training_set(_model(profile), "conv")
    x, y = np.array(features[::5]), np.array(targets[::5])
    reg = time_model.new_regressor().fit(x, y)
    stored = TreeRegressor.from_dict(time_model.export_kind_regressor(reg, "conv").to_dict())
    assert [stored.predict(list(v)) for v in x] == pytest.approx(list(reg.predict(x)), rel=1e-6, abs=1e-6)


def test_measured_shape_keeps_its_measurement_and_others_are_fitted():
    profile = load_profile("h200").data
    model = _model(profile)
    row = next(r for r in profile["timings"]["conv"] if r[:3] == ["conv_fwd", "bfloat16", True])
    key, measured_us = tuple(row[:15]), row[16]
    time_us, est = model._lookup_shape("conv", key)
    assert est.source == "measured-near"
    assert time_us == pytest.approx(measured_us, rel=0.25)
    # a 3x3 conv 80 -> 200 channels at 37x37, batch 6: about an octave from every measured one of its kind,
    # so priced by the regressor, at its held-out uncertainty
    far = ("conv_fwd", "bfloat16", True, 80, 200, 3, 1, 37, 1, 6, 2, False, 1, 1, 0)
    _, est = model._lookup_shape("conv", far)
    assert est.source == "fitted"
    assert est.uncertainty == profile["timings"]["fitted"]["conv"]["held_out"]["uncertainty"]
    # GEMMs are not fitted (calibrate/time_model.py FITTED_KINDS says why): far from a measured one, interpolated
    _, est = model._lookup_shape("gemm", ("bfloat16", False, True, False, 1400, 22000, 300))
    assert est.source in ("interpolated", "extrapolated")


def test_without_a_fitted_section_the_nearest_points_decide():
    profile = dict(load_profile("h200").data)
    profile["timings"] = {k: v for k, v in profile["timings"].items() if k != "fitted"}
    _, est = _model(profile)._lookup_shape("conv", ("conv_fwd", "bfloat16", False, 96, 200, 3, 1, 37, 1, 3, 2,
                                                    False, 1, 1, 0))
    assert est.source in ("measured-near", "interpolated", "extrapolated")


def test_shipped_profile_has_fitted_corrections_with_held_out_errors():
    fitted = load_profile("h200").data["timings"]["fitted"]
    # 3-D and transposed convolutions apart, and 1-D / 2-D stems and heads and grouped ones (fit_families)
    assert set(fitted) == {"conv", "conv_volumetric", "conv_stem", "conv_grouped"}
    for name, section in fitted.items():
        kind = "conv" if name.startswith("conv") else name
        held = section["held_out"]
        assert 0 < held["median_error"] < held["p90_error"]
        assert held["uncertainty"] > 0
        assert len(section["regressor"]["trees"]) > 0
        key_length = {"gemm": 7, "conv": 15, "attention": 9}[kind]
        row = load_profile("h200").data["timings"][kind][0]
        assert len(SHAPE_FEATURES[kind](tuple(row[:key_length]))) > 0


def test_conv_features_name_the_implicit_gemm():
    # a 3x3 conv, 64 -> 128 channels, 56x56, batch 32: M = 32 * 56 * 56, N = 128, K = 64 * 9
    key = ("conv_fwd", "bfloat16", True, 64, 128, 3, 1, 56, 1, 32, 2, False, 1, 1, 0)
    x = SHAPE_FEATURES["conv"](key)
    assert x[:3] == [1.0, 0.0, 0.0] and x[3:6] == [1.0, 0.0, 0.0] and x[6] == 1.0
    assert x[7:11] == pytest.approx([math.log2(32 * 56 * 56), 7.0, math.log2(64 * 9), 0.0])


def _without_fit(profile: dict, name: str) -> dict:
    """The profile as one fitted before the family `name` had a model of its own (an earlier `kernelcast calibrate`)."""
    older = dict(profile)
    older["timings"] = {**profile["timings"],
                        "fitted": {k: v for k, v in profile["timings"]["fitted"].items() if k != name}}
    return older


def test_stems_and_heads_have_their_own_fit_and_fall_back_to_the_2d_one():
    from kernelcast.predict.shape_kinds import fitted_name

    stem = ("conv_fwd", "float32", False, 3, 64, 3, 1, 256, 1, 16, 2, False, 0, 1, 0)  # KernelBench L1 #63's
    head = ("conv_fwd", "bfloat16", True, 64, 1, 1, 1, 128, 1, 8, 2, False, 0, 1, 0)   # a 1-channel mask head
    body = ("conv_fwd", "bfloat16", True, 64, 128, 3, 1, 56, 1, 32, 2, False, 1, 1, 0)
    depthwise = ("conv_fwd", "bfloat16", True, 64, 64, 3, 1, 56, 64, 32, 2, False, 1, 1, 0)
    video_stem = ("conv_fwd", "float32", False, 3, 64, 3, 1, 64, 1, 16, 3, False, 0, 1, 0)
    assert [fitted_name("conv", k) for k in (stem, head, body, depthwise, video_stem)] == \
        ["conv_stem", "conv_stem", "conv", "conv", "conv_volumetric"]
    profile = load_profile("h200").data
    _, est = _model(profile)._lookup_shape("conv", stem)
    assert est.source == "fitted"
    assert est.uncertainty == profile["timings"]["fitted"]["conv_stem"]["held_out"]["uncertainty"]
    # a profile fitted before the family existed (an earlier `kernelcast calibrate`) prices a stem by the 1-D /
    # 2-D fit, not by the nearest points alone
    _, est = _model(_without_fit(profile, "conv_stem"))._lookup_shape("conv", stem)
    assert est.source == "fitted"
    assert est.uncertainty == profile["timings"]["fitted"]["conv"]["held_out"]["uncertainty"]


def test_grouped_convolutions_have_their_own_fit_and_fall_back_to_the_2d_one():
    from kernelcast.predict.shape_kinds import fitted_name

    # the shared case channels_last_grouped_conv's forward (fp16, 2048 channels in 32 groups, stride 2)
    grouped = ("conv_fwd", "float16", True, 2048, 2048, 3, 2, 14, 32, 100, 2, False, 1, 1, 0)
    depthwise = ("conv_fwd", "bfloat16", True, 64, 64, 3, 1, 56, 64, 32, 2, False, 1, 1, 0)
    grouped_3d = ("conv_fwd", "bfloat16", False, 64, 64, 3, 1, 16, 4, 8, 3, False, 1, 1, 0)
    assert [fitted_name("conv", k) for k in (grouped, depthwise, grouped_3d)] == \
        ["conv_grouped", "conv", "conv_volumetric"]
    profile = load_profile("h200").data
    _, est = _model(profile)._lookup_shape("conv", grouped)
    assert est.source == "fitted"
    assert est.uncertainty == profile["timings"]["fitted"]["conv_grouped"]["held_out"]["uncertainty"]
    _, est = _model(_without_fit(profile, "conv_grouped"))._lookup_shape("conv", grouped)
    assert est.uncertainty == profile["timings"]["fitted"]["conv"]["held_out"]["uncertainty"]
