"""Per-GPU achieved-rate factors (devices/achieved.py): where each GPU's come from, and that the calibrated
model carries them to another GPU's kernel times."""

import dataclasses

import pytest

from kernelcast.costs import Cost
from kernelcast.devices import get_gpu
from kernelcast.devices.achieved import DATASHEET, MEMORY, achieved_rates, capability_prior, rate_class
from kernelcast.predict.calibrated import CalibratedModel
from kernelcast.profiles import profile_with
from kernelcast.records import CaptureSettings

DATA = {"fitted_on": "test", "fitted": {"l4": {"factors": {MEMORY: 1.2, "matmul:fp32": 2.0},
                                               "held_out": {"median_error": 0.1}},
                                        "l40s": {"factors": {MEMORY: 1.0, "matmul:fp32": 2.0 / 1.5 ** 2}}},
        "priors": {"8.9": {"factors": {MEMORY: 1.1}, "from": ["l4", "l40s"]}}}


def test_a_gpu_gets_its_own_factors_then_its_architectures_then_the_datasheets():
    own = achieved_rates("l4", "8.9", DATA)
    assert own.source == "fitted" and own.factor("matmul:fp32") == 2.0 and own.held_out_error == 0.1
    assert own.factor("conv:tf32_tensor") == 1.0  # a class without data keeps the datasheet
    prior = achieved_rates("rtx4090", "8.9", DATA)
    assert prior.source == "prior" and prior.factor(MEMORY) == 1.1 and "l4, l40s" in prior.detail
    assert achieved_rates("mi300x", "gfx942", DATA).source == "datasheet"
    nearest = achieved_rates("v100", "7.0", DATA)  # no 7.x fitted: the nearest architecture's
    assert nearest.source == "prior" and "nearest" in nearest.detail


def test_the_prior_is_the_geometric_mean():
    prior = capability_prior({g: f["factors"] for g, f in DATA["fitted"].items()})
    assert abs(prior["matmul:fp32"] - 2.0 / 1.5) < 1e-9 and abs(prior[MEMORY] - 1.2 ** 0.5) < 1e-9


def test_classes_follow_the_math_and_the_roof():
    assert rate_class("matmul", "fp32") == "matmul:fp32" and rate_class("conv", "tf32_tensor") == "conv:tf32_tensor"
    assert rate_class("", "fp32") == MEMORY and rate_class("pointwise", "fp32") == MEMORY


def test_the_calibrated_model_scales_each_class_by_its_factor():
    profile = profile_with("h200", "timings")
    gpu = get_gpu("l4")
    plain = CalibratedModel(gpu, CaptureSettings(), profile.data, get_gpu(profile.gpu), achieved=DATASHEET)
    factors = dataclasses.replace(achieved_rates("l4", "8.9", DATA))
    scaled = CalibratedModel(gpu, CaptureSettings(), profile.data, get_gpu(profile.gpu), achieved=factors)
    gemm = Cost(flops=2.0 * 1024 ** 3, bytes_read=8 * 1024 ** 2, bytes_written=4 * 1024 ** 2, math="matmul",
                dtype="float32", kind="gemm", key=("float32", False, False, False, 1024, 1024, 1024))
    copy = Cost(bytes_read=64e6, bytes_written=64e6, dtype="float32", kind="copy", key=(1, 4))
    floor = plain.floor_us  # the launch floor stays; the kernel's work takes the factor
    assert abs((scaled.estimate(gemm).time_us - floor) / (plain.estimate(gemm).time_us - floor) - 2.0) < 1e-6
    assert abs((scaled.estimate(copy).time_us - floor) / (plain.estimate(copy).time_us - floor) - 1.2) < 1e-6
    assert "fitted to KernelBench's published timings (torch 2.5)" in scaled.source
    # on the profiled GPU itself nothing is scaled
    h200 = CalibratedModel(get_gpu("h200"), CaptureSettings(), profile.data, get_gpu(profile.gpu))
    assert h200.achieved.source == "datasheet" and h200.estimate(gemm).time_us > 0


def test_every_gpu_with_published_timings_has_fitted_factors():
    rates = {g: achieved_rates(g, get_gpu(g).compute_capability) for g in ("a100-80gb", "l4", "l40s", "t4")}
    assert all(r.source == "fitted" and r.held_out_error is not None for r in rates.values()), rates
    assert achieved_rates("rtx4090", "8.9").source == "prior"


def test_a_memory_kernels_time_beyond_streaming_scales_with_the_sms_not_the_bandwidth():
    profile = profile_with("h200", "timings")
    l4, h200 = get_gpu("l4"), get_gpu("h200")
    model = CalibratedModel(l4, CaptureSettings(), profile.data, h200, achieved=DATASHEET)
    floor = model.floor_us
    nbytes = 1e9
    streaming = nbytes / model._streaming_bytes_per_us()
    bandwidth, issue = h200.mem_bw_bytes_per_s / l4.mem_bw_bytes_per_s, h200.sm_cycles_per_s / l4.sm_cycles_per_s
    # at the profiled GPU's streaming rate the whole time carries by bandwidth
    assert abs(model._carried_memory_us(floor + streaming, nbytes) - (floor + streaming * bandwidth)) < 1e-6
    # three times slower than streaming: the excess by SMs x clock
    slow = model._carried_memory_us(floor + 3 * streaming, nbytes)
    assert abs(slow - (floor + streaming * bandwidth + 2 * streaming * issue)) < 1e-6
    # the clock behind it: the datasheet's FP32 peak over SMs x lanes x 2 (L4: 2040 MHz boost)
    assert abs(l4.boost_clock_hz / 1e9 - 2.04) < 0.01 and abs(h200.boost_clock_hz / 1e9 - 1.98) < 0.01


def _conv_cost(flops: float, nbytes: float, pass_: str = "conv_fwd", transposed: bool = False) -> Cost:
    key = (pass_, "float32", False, 64, 64, 3, 1, 32, 1, 16, 3, transposed, 1, 1, 0)
    return Cost(flops=flops, bytes_read=nbytes, math="conv", dtype="float32", kind="conv", key=key)


def test_a_compute_kernels_time_carries_by_its_roofline_parts():
    """At the profiled GPU's roofline the whole work carries by the peaks' ratio; time beyond it by SMs x clock
    (a convolution the H200 ran far from its TF32 peak is not 3.2x slower on an A100 for it)."""
    profile = profile_with("h200", "timings")
    a100, h200 = get_gpu("a100-80gb"), get_gpu("h200")
    model = CalibratedModel(a100, CaptureSettings(), profile.data, h200, achieved=DATASHEET)
    floor, flops = model.floor_us, 1e12
    at_peak_us = flops / h200.peak_flops["tf32_tensor"] * 1e6
    peaks = h200.peak_flops["tf32_tensor"] / a100.peak_flops["tf32_tensor"]
    issue = h200.sm_cycles_per_s / a100.sm_cycles_per_s
    conv = _conv_cost(flops, 1e6)
    assert abs(model._carried_compute_us(conv, floor + at_peak_us) - (floor + at_peak_us * peaks)) < 1e-6
    slow = model._carried_compute_us(conv, floor + 10 * at_peak_us)
    assert abs(slow - (floor + at_peak_us * peaks + 9 * at_peak_us * issue)) < 1e-6
    assert slow < floor + 10 * at_peak_us * peaks  # the whole-time ratio's answer


def test_convolutions_take_the_factor_of_the_cudnn_kernels_they_run():
    from kernelcast.costs.matmul import kernel_family
    assert kernel_family(_conv_cost(1, 1)) == "conv"
    assert kernel_family(_conv_cost(1, 1, transposed=True)) == "conv_dgrad"  # a transposed forward: dgrad kernels
    assert kernel_family(_conv_cost(1, 1, "conv_bwd_input")) == "conv_dgrad"
    assert kernel_family(_conv_cost(1, 1, "conv_bwd_input", transposed=True)) == "conv"
    assert kernel_family(_conv_cost(1, 1, "conv_bwd_weight")) == "conv_wgrad"
    rates = dataclasses.replace(DATASHEET, factors={"conv:tf32_tensor": 1.5, "conv_dgrad:tf32_tensor": 2.5})
    assert rates.factor("conv_dgrad:tf32_tensor") == 2.5
    assert rates.factor("conv_wgrad:tf32_tensor") == 1.5  # no factor of its own: the forward family's
    assert rates.factor("conv_dgrad:fp32") == 1.0 and rate_class("conv_dgrad", "fp32") == "conv_dgrad:fp32"


def test_a_convolution_writing_few_channels_is_its_familys_narrow_class():
    """costs/matmul.py NARROW_CHANNELS: the channels per group a kernel writes (a forward's C_out, an input
    gradient's C_in, a transposed forward's C_out) under 32 make a "_narrow" class, whose factor falls back to
    its family's."""
    from kernelcast.costs.matmul import NARROW_CHANNELS, kernel_family

    def cost(c_in, c_out, pass_="conv_fwd", transposed=False, groups=1):
        key = (pass_, "float32", False, c_in, c_out, 3, 2, 32, groups, 16, 3, transposed, 1, 1, 0)
        return Cost(flops=1.0, bytes_read=1.0, math="conv", dtype="float32", kind="conv", key=key)

    assert kernel_family(cost(3, 16)) == "conv_narrow" and kernel_family(cost(3, 64)) == "conv"
    assert kernel_family(cost(64, 16, transposed=True)) == "conv_dgrad_narrow"  # KernelBench level 2's kind
    assert kernel_family(cost(64, NARROW_CHANNELS, transposed=True)) == "conv_dgrad"
    assert kernel_family(cost(16, 64, "conv_bwd_input")) == "conv_dgrad_narrow"  # writes the 16-channel input's grad
    assert kernel_family(cost(64, 16, "conv_bwd_input")) == "conv_dgrad"
    assert kernel_family(cost(256, 256, groups=32)) == "conv_narrow"  # 8 channels per group
    assert kernel_family(cost(16, 16, "conv_bwd_weight")) == "conv_wgrad"
    assert kernel_family(cost(64, 64, groups=64)) == "conv"  # depthwise: PyTorch's native kernel, no implicit GEMM
    rates = dataclasses.replace(DATASHEET, factors={"conv_dgrad:tf32_tensor": 1.2, "conv:tf32_tensor": 0.9})
    assert rates.factor("conv_dgrad_narrow:tf32_tensor") == 1.2 and rates.factor("conv_narrow:tf32_tensor") == 0.9


def test_the_fit_splits_a_narrow_class_only_where_its_programs_differ():
    """calibrate/gpu_rates.py fit_factors in two levels: the families with their narrow classes merged, then each
    class its programs speak for, drawn toward its family's factor by PRIOR_WEIGHT. Narrow data-gradient programs
    made at 3.0 beside wide ones at 1.2 give each its own factor; made alike, the split keeps them alike."""
    from kernelcast.calibrate import gpu_rates as fit

    def programs(narrow, wide):
        out = []
        for i in range(6):
            out.append(fit.Observation(f"n{i}", {"conv_dgrad_narrow:tf32_tensor": 100.0 + 20 * i}, 10.0,
                                       10.0 + (100.0 + 20 * i) * narrow))
            out.append(fit.Observation(f"w{i}", {"conv_dgrad:tf32_tensor": 80.0 + 30 * i}, 10.0,
                                       10.0 + (80.0 + 30 * i) * wide))
        return out

    split = fit.fit_factors(programs(3.0, 1.2))
    assert split["conv_dgrad_narrow:tf32_tensor"] == pytest.approx(3.0, rel=0.02)
    assert split["conv_dgrad:tf32_tensor"] == pytest.approx(1.2, rel=0.02)
    alike = fit.fit_factors(programs(1.5, 1.5))
    assert alike["conv_dgrad_narrow:tf32_tensor"] == pytest.approx(1.5, rel=0.02)
    assert alike["conv_dgrad:tf32_tensor"] == pytest.approx(1.5, rel=0.02)
    # too few narrow programs: the class folds into its family, which takes every program
    thin = [o for o in programs(1.5, 1.5) if o.program not in ("n0", "n1", "n2", "n3")]
    assert set(fit.fit_factors(thin)) == {"conv_dgrad:tf32_tensor"}


def test_the_fit_folds_a_class_too_few_programs_speak_for_into_its_parent():
    """calibrate/gpu_rates.py: a class that takes MIN_SHARE of fewer than MIN_PROGRAMS programs is fitted with its
    parent family's (the factor AchievedRates.factor then finds for it), not held at 1.0."""
    from kernelcast.calibrate import gpu_rates as fit

    def obs(name, by_class):
        return fit.Observation(name, by_class, 0.0, 1.0)

    dgrad = [obs(f"p{i}", {"conv_dgrad:tf32_tensor": 1.0}) for i in range(fit.MIN_PROGRAMS)]
    assert {c for o in fit.folded(dgrad) for c in o.by_class} == {"conv_dgrad:tf32_tensor"}
    folded = {o.program: o.by_class for o in fit.folded(dgrad[1:] + [obs("w", {"conv_wgrad:tf32_tensor": 1.0,
                                                                              "memory": 1.0})])}
    assert folded["w"] == {"conv:tf32_tensor": 1.0, "memory": 1.0}
    assert folded["p1"] == {"conv:tf32_tensor": 1.0}  # MIN_PROGRAMS - 1 programs: thin too


def test_the_fit_recovers_known_factors_and_holds_them_out():
    """calibrate/gpu_rates.py fit_all on programs made from known factors (memory 1.2, matmul 1.5): each GPU's
    fitted factors are those, and its held-out errors near 0; a GPU alone in its capability gets the datasheet
    as an unseen GPU, one of two the other's prior and one alone in its capability the nearest capability's (as
    achieved_rates would give it)."""
    from kernelcast.calibrate import gpu_rates as fit

    truth = {"memory": 1.2, "matmul:fp32": 1.5}
    programs, measured, reference = {}, {"a": {}, "b": {}, "c": {}}, {}
    for i in range(8):
        by_class = {"memory": 100.0 + 10 * i, "matmul:fp32": 50.0 + 30 * (i % 3)}
        row = {"first_step_us": 20.0 + sum(by_class.values()), "by_class": by_class}
        programs[f"p{i}"] = {"h200": dict(row), "a": row, "b": row, "c": row}
        reference[f"p{i}"] = {"mean_ms": row["first_step_us"] / 1000.0}  # the reference model exact on it
        for gpu in measured:
            measured[gpu][f"p{i}"] = (20.0 + sum(t * truth[c] for c, t in by_class.items())) / 1000.0
    fitted, priors = fit.fit_all({"gpus": ["h200", "a", "b", "c"], "programs": programs}, measured, reference,
                                 lambda ref: True, {"a": "8.6", "b": "8.6", "c": "7.5"}.get)
    for gpu in ("a", "b", "c"):
        assert fitted[gpu]["factors"] == pytest.approx(truth, rel=1e-3)
        assert fitted[gpu]["held_out"]["median_error"] < 1e-3 and fitted[gpu]["held_out"]["within_15"] == 1.0
    assert fitted["a"]["held_out_gpu"]["median_error"] < 1e-3  # b's prior is the same factors
    assert fitted["c"]["held_out_gpu"]["median_error"] < 1e-3  # alone in 7.5: 8.6's prior, the same factors
    assert "a, b" in fitted["c"]["held_out_gpu"]["by"]
    assert priors["8.6"]["from"] == ["a", "b"] and priors["8.6"]["factors"] == pytest.approx(truth, rel=1e-3)
    # a GPU of the reference's own capability, alone among the fitted ones: the reference's factors (the datasheet)
    fitted, _ = fit.fit_all({"gpus": ["h200", "a", "b", "c"], "programs": programs}, measured, reference,
                            lambda ref: True, {"h200": "9.0", "a": "8.6", "b": "8.6", "c": "9.0"}.get)
    assert fitted["c"]["held_out_gpu"]["median_error"] > 0.1 and "datasheet" in fitted["c"]["held_out_gpu"]["by"]


def test_a_kernel_of_fewer_blocks_than_sms_carries_by_the_clock_alone():
    """A layer norm of 16 rows runs 16 blocks on the H200 and on a T4 alike: its walk carries by the two clocks,
    not by the two GPUs' SMs x clock (KernelBench level 1 #40 on the T4 had been 5.4x its H200 time predicted
    against 1.1x measured), bytes included, bounded below by the T4's bandwidth: the larger of the two, not their
    sum (the sum had priced it +46% on the T4)."""
    profile = profile_with("h200", "timings")
    t4, h200 = get_gpu("t4"), get_gpu("h200")
    model = CalibratedModel(t4, CaptureSettings(), profile.data, h200, achieved=DATASHEET)
    floor, nbytes = model.floor_us, 1e6
    streaming = nbytes / model._streaming_bytes_per_us()
    bandwidth = h200.mem_bw_bytes_per_s / t4.mem_bw_bytes_per_s
    slow = floor + 10 * streaming
    clocks = h200.boost_clock_hz / t4.boost_clock_hz
    few = model._carried_memory_us(slow, nbytes, blocks=16)
    assert abs(few - (floor + max(streaming * bandwidth, 10 * streaming * clocks))) < 1e-6
    walk_bound = model._carried_memory_us(floor + 100 * streaming, nbytes, blocks=16)
    assert abs(walk_bound - (floor + 100 * streaming * clocks)) < 1e-6
    many = model._carried_memory_us(slow, nbytes, blocks=10_000)
    assert abs(many - model._carried_memory_us(slow, nbytes)) < 1e-9 and many > few


def test_a_carried_prediction_says_its_held_out_error():
    """A new user's A10G prediction said its rates came from its architecture's fits but not how well those hold:
    the kernel-time source names the held-out error `kernelcast devices` prints."""
    profile = profile_with("h200", "timings")
    model = CalibratedModel(get_gpu("a10g"), CaptureSettings(), profile.data, get_gpu("h200"))
    assert "held-out error" in model.source and "kernelcast devices" in model.source
    own = CalibratedModel(get_gpu("h200"), CaptureSettings(), profile.data, get_gpu("h200"))
    assert "held-out" not in own.source


def test_a_prior_carried_across_the_tf32_line_keeps_its_convolution_factors():
    """devices/achieved.py for_architecture: a T4 (no TF32) given Ampere's prior runs the same fp32 convolutions
    on its FP32 units; their factors come along under that roof, a matmul's and a bf16 convolution's do not."""
    from kernelcast.devices.achieved import for_architecture

    ampere = {"conv:tf32_tensor": 1.2, "conv_dgrad:tf32_tensor": 3.0, "matmul:fp32": 1.4, "memory": 1.1}
    turing = for_architecture(ampere, "7.5")
    assert turing["conv:fp32"] == 1.2 and turing["conv_dgrad:fp32"] == 3.0
    assert "matmul:tf32_tensor" not in turing and turing["memory"] == 1.1
    assert for_architecture({"conv:fp32": 1.9}, "8.6") == {"conv:fp32": 1.9, "conv:tf32_tensor": 1.9}
    assert for_architecture(ampere, "8.9") == ampere  # the same roofs: nothing added
    assert achieved_rates("t4-like", "7.5", {"priors": {"8.6": {"factors": ampere, "from": ["a"]}}}).factor(
        "conv_dgrad:fp32") == 3.0


def test_a_published_machines_slow_state_is_found_and_left_out_of_the_cards_factors():
    """calibrate/gpu_rates.py slow_state: programs made from known factors (memory 1.2, matmul 1.5) whose calls of
    3 ms or more ran 3x slower (as the published RTX 3090 Ti's did beside its sibling's) give that state, and the
    factors fitted on the other calls are the card's; the same programs without the state give none."""
    from kernelcast.calibrate import gpu_rates as fit

    def programs(slow: float) -> list:
        out = []
        for i in range(30):
            by_class = {"memory": 150.0 * (i + 1), "matmul:fp32": 200.0 + 40 * (i % 4)}
            us = 20.0 + 1.2 * by_class["memory"] + 1.5 * by_class["matmul:fp32"]
            us *= slow if us >= 3000.0 else 1.0
            out.append(fit.Observation(f"p{i}", by_class, 20.0, us, us))
        return out

    state = fit.slow_state(programs(3.0))
    assert state is not None and state.factor == 3.0 and state.from_ms == 3.0 and state.programs == 16
    normal = fit.normal_state(programs(3.0), state)
    assert len(normal) == 14
    assert fit.fit_factors(normal) == pytest.approx({"memory": 1.2, "matmul:fp32": 1.5}, rel=1e-3)
    assert fit.slow_state(programs(1.0)) is None


def test_a_prediction_on_a_gpu_whose_published_machine_had_a_slow_state_says_so():
    """predict.gpu_notes: the RTX 3090 Ti's published machine ran its calls of 3 ms or more 3.5x slower
    (devices/achieved.json slow_state); a prediction on it says the price is the card's normal rate, one on the
    A6000 (no state) says nothing of the kind."""
    from kernelcast.devices import get_gpu
    from kernelcast.devices.achieved import published_slow_state
    from kernelcast.predict import gpu_notes

    state = published_slow_state("rtx3090ti")
    assert state is not None and state["factor"] >= 2.0
    notes = gpu_notes(get_gpu("rtx3090ti"))
    assert len(notes) == 1 and "normal rate" in notes[0] and f"{state['from_ms']:g} ms" in notes[0]
    assert gpu_notes(get_gpu("rtx-a6000")) == ()
    assert published_slow_state("rtx-a6000") is None


def test_a_prior_takes_a_class_from_the_members_that_fitted_it():
    """devices/achieved.py capability_prior: a member that fitted a class of its own outvotes one that only takes
    its parent's for it; with no member fitting it, the stand-ins' mean."""
    prior = capability_prior({"a": {"conv:tf32_tensor": 1.0, "conv_dgrad:tf32_tensor": 2.0},
                              "b": {"conv:tf32_tensor": 0.5}})
    assert prior["conv_dgrad:tf32_tensor"] == pytest.approx(2.0)
    assert prior["conv:tf32_tensor"] == pytest.approx(0.5 ** 0.5)
    alone = capability_prior({"a": {"conv:tf32_tensor": 1.0}, "b": {"conv:tf32_tensor": 4.0}})
    assert "conv_dgrad:tf32_tensor" not in alone and alone["conv:tf32_tensor"] == pytest.approx(2.0)


ERA_DATA = {"fitted_on": "test", "fitted": {"h100-sxm": {
    "factors": {"conv:tf32_tensor": 1.3}, "held_out": {"median_error": 0.06},
    "by_torch": {"2.11": {"factors": {"conv:tf32_tensor": 0.93}, "timings": "our runs (torch 2.11)",
                          "held_out": {"median_error": 0.07}}}}},
    "priors": {"9.0": {"factors": {"conv:tf32_tensor": 1.3}, "from": ["h100-sxm"],
                       "by_torch": {"2.11": {"factors": {"conv:tf32_tensor": 0.93}}}}}}


def test_the_factors_of_the_torch_nearest_the_captures_are_taken():
    """Torch releases change the cuDNN engines a convolution runs (the H100's published torch-2.5 timings put
    convolutions at 1.30x what our torch-2.11 runs did): a capture takes the set fitted to the nearest torch."""
    from kernelcast.devices.achieved import nearest_torch

    assert nearest_torch("2.13.0+cpu", ["2.5", "2.11"]) == "2.11"
    assert nearest_torch("2.6.0", ["2.5", "2.11"]) == "2.5"
    assert nearest_torch("2.8.1", ["2.5", "2.11"]) == "2.11"  # three releases from each: the later one
    assert nearest_torch("nightly", ["2.5", "2.11"]) == "2.11"  # unreadable: most likely a current torch
    current = achieved_rates("h100-sxm", "9.0", ERA_DATA, torch_version="2.13.0")
    assert current.factor("conv:tf32_tensor") == 0.93 and current.held_out_error == 0.07
    assert "torch 2.11" in current.detail
    old = achieved_rates("h100-sxm", "9.0", ERA_DATA, torch_version="2.5.1")
    assert old.factor("conv:tf32_tensor") == 1.3 and old.held_out_error == 0.06
    assert achieved_rates("h100-pcie", "9.0", ERA_DATA, torch_version="2.12").factor("conv:tf32_tensor") == 0.93
    assert achieved_rates("h100-pcie", "9.0", ERA_DATA, torch_version="2.4").factor("conv:tf32_tensor") == 1.3


def test_the_calibrated_model_takes_the_captures_torch():
    profile = profile_with("h200", "timings")
    model = CalibratedModel(get_gpu("h100-sxm"), CaptureSettings(torch_version="2.5.1"), profile.data,
                            get_gpu(profile.gpu))
    current = CalibratedModel(get_gpu("h100-sxm"), CaptureSettings(torch_version="2.13.0"), profile.data,
                              get_gpu(profile.gpu))
    shipped = achieved_rates("h100-sxm", "9.0")  # the shipped data has a torch-2.11 set for the H100
    assert model.achieved.factors != current.achieved.factors
    assert "our runs (torch 2.11)" in current.achieved.detail and "our runs" not in model.achieved.detail
    assert shipped.source == "fitted"
