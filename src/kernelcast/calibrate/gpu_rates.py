"""Fit each GPU's achieved-rate factors (devices/achieved.py) to published timings, with their held-out errors
(issue 30). scripts/fit/fit_gpu_rates.py is the command line over this: it predicts KernelBench's captures and reads
the published timings; the arithmetic is here.

The input, per program and GPU (a `row`): the predicted first-step µs with every factor 1 and `by_class`, the part
of the program's GPU µs each rate class's factor scales (devices/achieved.py RATE_CLASSES). A GPU's factors are
fitted jointly over the programs that keep the reference GPU busy and that the reference model prices within
MAX_REFERENCE_ERROR: the predicted call, each class's µs times its factor plus the rest, against the published time
with the reference model's own error on the program divided out (so that the factors fit what this GPU's
datasheet ratios get wrong, not what the reference model does); non-negative least absolute deviations on
relative error. A class that takes MIN_SHARE of fewer than MIN_PROGRAMS programs is folded into its parent
(devices/achieved.py parent_class), whose factor the prediction then gives it. Held out:
- by program: each program left out of its own fit, then predicted with the factors fitted without it;
- by GPU: each GPU predicted with the prior it would get with no published timings (unseen_prior_members):
  its compute capability's other GPUs, else the nearest capability's, as devices/achieved.py achieved_rates
  gives an unlisted GPU one; the datasheet where the nearest is the reference's own (until 2026-12-05 any GPU
  alone in its capability was scored with the datasheet here, which is not what it would have been given).
A published machine can have run its longer calls in a slower state than its shorter ones (slow_state): those
calls are left out of its factors, which are the card's (and, through the priors, its architecture's); the
state is recorded beside them, and the held-out errors are given over every program and over the others.
"""

from __future__ import annotations

import statistics
from typing import Callable, NamedTuple

from kernelcast.costs.matmul import NARROW_SUFFIX
from kernelcast.devices.achieved import (AchievedRates, capability_prior, fitted_class, for_architecture,
                                        nearest_capability, parent_class)

REFERENCE = "h200"  # the calibrated GPU every other one is carried from
MIN_SHARE = 0.2  # of a program's predicted GPU time, for the program to speak for a class
MIN_PROGRAMS = 3  # fewer: the class takes its parent's factor, else the datasheet's (1.0)
# A program the reference model itself misprices by more than this does not speak for the factors: its predicted
# time by class is not trusted to apportion its measured time, and most such programs are single convolutions that
# torch 2.5 (the published GPUs) ran with other cuDNN engines than torch 2.11 (our H200): the H100 ran five
# transposed 3-D convolutions 2.4-6.6x faster than the H200. With them in, the factors of 3-D data-gradient
# convolutions fell to 0.13-0.40 on the H100, B200 and A100s and the held-out median rose to 19-26% there; left
# out at 25%, 6-19% (the 73 GPU-busy programs, each held out; docs/validation.md).
MAX_REFERENCE_ERROR = 0.25
IRLS_ROUNDS = 20  # reweightings of the least-absolute-deviations fit
L1_FLOOR = 0.02  # relative residual below which a program's weight stops growing
# The second level's pull toward the first (fit_factors): a class split off its family (a narrow class, and the
# family left without it) is fitted on fewer programs, and a few with leverage swung it (the T4's wide
# data-gradient factor 3.34 fitted on all, 1.44 with one program left out); a pseudo-program of half a program's
# weight keeps a split that the programs do not carry near its family's factor (0.5 chosen among 0, 0.5, 1, 2
# and 4 by the nine GPUs' held-out medians, docs/validation.md "Other GPUs").
PRIOR_WEIGHT = 0.5
# A machine state (slow_state): the calls of at least `from_ms` on one GPU's published machine ran `factor` times
# what its factors make of them. The published RTX 3090 Ti ran every GPU-busy call of 3 ms or more 2.2-4.7x its
# same-die sibling's (the RTX A6000: GA102, 84 SMs) where its shorter calls ran 0.73-0.80x, as the two
# datasheets' bandwidths say; KernelBench level 2 #7 and #8 start with one convolution (128 x 3 x 16 x 32 x 32,
# 16 channels, 3^3) and ran 8.47 and 1.52 ms (its standard deviation over trials 0.93 and 0.003 ms); fitted with
# those calls, its data-gradient factor was 10.0 (the A6000's 1.84), and the capability 8.6 prior that an
# unlisted GA10x GPU takes was the two's geometric mean. A state is searched for on every GPU alike: a factor
# among SLOW_STATE_FACTORS from a call length among SLOW_STATE_FROM_MS, with at least SLOW_STATE_MIN_PROGRAMS of
# the fit's programs on each side, kept where it lowers the GPU's held-out (leave-one-out) median error.
SLOW_STATE_FACTORS = (2.0, 2.5, 3.0, 3.5, 4.0, 5.0)  # a state at least 2x: smaller ones are within the classes' spread
SLOW_STATE_FROM_MS = (1.0, 2.0, 3.0, 5.0, 10.0, 30.0)
SLOW_STATE_MIN_PROGRAMS = 10


class Observation(NamedTuple):
    """One program on one GPU, as the fit sees it (µs)."""
    program: str
    by_class: dict[str, float]  # {rate class: predicted GPU µs its factor scales}
    rest_us: float  # the rest of the predicted call
    target_us: float  # the published time with the reference model's error on the program divided out
    published_us: float = 0.0  # the published time as it is (which state the machine ran the call in)


class SlowState(NamedTuple):
    """A published machine's calls of at least from_ms ran `factor` times what the GPU's factors make of them."""
    factor: float
    from_ms: float
    programs: int  # of the fit's programs, those at or over from_ms

    def holds(self, published_us: float) -> bool:
        return published_us >= self.from_ms * 1000.0


Busy = Callable[[dict], bool]  # whether a program keeps the reference GPU busy, from its measured reference entry


def observations(predicted: dict, measured: dict, reference: dict, gpu: str, busy: Busy) -> list[Observation]:
    """The fit's observations on `gpu`: each busy program with a published time on it whose reference prediction
    is within MAX_REFERENCE_ERROR of the reference GPU's measured time. predicted: {"programs": {name: {gpu: row}}};
    measured: {gpu: {name: ms}}; reference: {name: the reference GPU's measured entry, "mean_ms" at least}."""
    out = []
    for name, row in predicted["programs"].items():
        meas, ref = measured.get(gpu, {}).get(name), reference.get(name)
        if gpu not in row or meas is None or ref is None or not busy(ref):
            continue
        reference_us = ref["mean_ms"] * 1000.0
        if abs(row[REFERENCE]["first_step_us"] / reference_us - 1.0) > MAX_REFERENCE_ERROR:
            continue
        # classes by the roof this GPU runs each kernel under (a TF32 convolution on the H200 is FP32 on a T4)
        by_class = row[gpu]["by_class"]
        rest = row[gpu]["first_step_us"] - sum(by_class.values())
        out.append(Observation(name, by_class, rest, meas * 1000.0 * row[REFERENCE]["first_step_us"] / reference_us,
                               meas * 1000.0))
    return out


def class_programs(observations: list[Observation]) -> dict[str, int]:
    """{class: programs in which it takes at least MIN_SHARE of the predicted GPU time}."""
    counts: dict[str, int] = {}
    for o in observations:
        total = sum(o.by_class.values())
        for c, t in o.by_class.items():
            if total > 0 and t >= MIN_SHARE * total:
                counts[c] = counts.get(c, 0) + 1
    return counts


def folded(observations: list[Observation]) -> list[Observation]:
    """The observations with each class that too few programs speak for (MIN_SHARE of fewer than MIN_PROGRAMS)
    merged into its parent class (devices/achieved.py parent_class), until every class left has its programs or
    no parent: the class then takes its parent's fitted factor, as AchievedRates.factor looks it up (a thin class
    left at 1.0 in the fit would have taken its parent's factor in the prediction)."""
    while True:
        counts = class_programs(observations)
        fold = {c: parent_class(c) for c in {c for o in observations for c in o.by_class}
                if parent_class(c) is not None and counts.get(c, 0) < MIN_PROGRAMS}
        if not fold:
            return observations
        observations = [o._replace(by_class=_merged(o.by_class, fold)) for o in observations]


def _merged(by_class: dict[str, float], fold: dict[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for c, t in by_class.items():
        out[fold.get(c, c)] = out.get(fold.get(c, c), 0.0) + t
    return out


def general(observations: list[Observation]) -> list[Observation]:
    """The observations with every narrow class (costs.matmul NARROW_SUFFIX) merged into its family's."""
    fold = {c: parent_class(c) for o in observations for c in o.by_class if NARROW_SUFFIX in c.partition(":")[0]}
    return [o._replace(by_class=_merged(o.by_class, fold)) for o in observations] if fold else observations


def fit_factors(observations: list[Observation], leave_out: str | None = None) -> dict[str, float]:
    """{class: factor} fitted jointly over every observation (but leave_out's program's): predicted call time, each
    class's GPU time times its factor plus the rest, against the target, on relative error, non-negative, by least
    absolute deviations (iteratively reweighted least squares: a few programs torch 2.5 ran several times faster
    than the reference's torch 2.11 must not pull a factor). In two levels: the families with their narrow
    classes merged in (general), then every class its programs speak for, a class too thin for its own factor
    held at the first level's (a family whose programs are nearly all narrow keeps the factor they gave it).
    Classes with fewer than MIN_PROGRAMS programs after folding and no first-level factor are left out (the
    datasheet's 1.0). Needs numpy and scipy."""
    used = [o for o in observations if o.program != leave_out]
    first = _fit(folded(general(used)), {})
    return {**first, **_fit(folded(used), first, prior_weight=PRIOR_WEIGHT)}


def _fit(used: list[Observation], held: dict[str, float], prior_weight: float = 0.0) -> dict[str, float]:
    """The factors of the classes at least MIN_PROGRAMS programs speak for; every other class's time at its
    factor in `held` (or its nearest ancestor's there, else 1.0). With a prior_weight, each fitted class is drawn
    toward its factor in `held` (a narrow class toward its family's) by one pseudo-program of that weight."""
    import numpy as np
    from scipy.optimize import nnls

    counts = class_programs(used)
    classes = sorted(c for c, n in counts.items() if n >= MIN_PROGRAMS)
    if not classes:
        return {}
    fixed = AchievedRates("", held)
    a = np.array([[o.by_class.get(c, 0.0) / o.target_us for c in classes] for o in used])
    b = np.array([1.0 - (o.rest_us + sum(t * fixed.factor(c) for c, t in o.by_class.items() if c not in classes))
                  / o.target_us for o in used])
    if prior_weight > 0:  # a pseudo-program per class: its factor at the prior's, at prior_weight programs' weight
        drawn = [i for i, c in enumerate(classes) if fitted_class(c, held) in held]
        a = np.vstack([a, prior_weight * np.eye(len(classes))[drawn]])
        b = np.concatenate([b, [prior_weight * fixed.factor(classes[i]) for i in drawn]])
    weights = np.ones(len(b))
    for _ in range(IRLS_ROUNDS):
        coef, _ = nnls(a * weights[:, None], b * weights)
        residual = np.abs(a @ coef - b)
        weights = 1.0 / np.sqrt(np.maximum(residual, L1_FLOOR))
    return {c: round(float(f), 4) for c, f in zip(classes, coef) if f > 0}


def _median_error(observations: list[Observation], factors_for: Callable[[str], dict[str, float]],
                  state: SlowState | None = None) -> float:
    """The median |predicted / target - 1| over the observations, each at factors_for(its program) and, in the
    state, times its factor."""
    def predicted(o: Observation) -> float:
        rates = AchievedRates("", factors_for(o.program))
        us = o.rest_us + sum(t * rates.factor(c) for c, t in o.by_class.items())
        return us * state.factor if state is not None and state.holds(o.published_us) else us

    return statistics.median(abs(predicted(o) / o.target_us - 1.0) for o in observations)


def slow_state(observations: list[Observation]) -> SlowState | None:
    """The state (SLOW_STATE_FACTORS x SLOW_STATE_FROM_MS, at least SLOW_STATE_MIN_PROGRAMS programs on either
    side) whose factors, fitted with its calls' targets divided by its factor, give the lowest median error in
    sample; None unless it also lowers the median error held out by program (each program left out of the fit)
    below the fit's without a state. Detecting a state and fitting the card are two models: one factor over all
    of a state's calls tells whether the machine had one; the card's factors then come from the calls outside it
    (normal_state), since a state's slowdown is not the same for every class. (Judged with the factors of the
    calls outside it instead, no GPU shows a state: with no data-gradient program under 3 ms, the 3090 Ti's long
    transposed convolutions take its forward factor, and its held-out error stays 20%.)"""
    def in_state(state: SlowState) -> list[Observation]:
        return [o._replace(target_us=o.target_us / state.factor) if state.holds(o.published_us) else o
                for o in observations]

    best: tuple[float, SlowState] | None = None
    for from_ms in SLOW_STATE_FROM_MS:
        n = sum(o.published_us >= from_ms * 1000.0 for o in observations)
        if min(n, len(observations) - n) < SLOW_STATE_MIN_PROGRAMS:
            continue
        for factor in SLOW_STATE_FACTORS:
            state = SlowState(factor, from_ms, n)
            factors = fit_factors(in_state(state))
            error = _median_error(observations, lambda name: factors, state)
            if best is None or error < best[0]:
                best = (error, state)
    if best is None:
        return None
    state = best[1]
    adjusted = in_state(state)
    with_state = _median_error(observations, lambda name: fit_factors(adjusted, leave_out=name), state)
    without = _median_error(observations, lambda name: fit_factors(observations, leave_out=name))
    return state if with_state < without else None


def normal_state(observations: list[Observation], state: SlowState | None) -> list[Observation]:
    """The observations the machine ran outside its slow state (all of them without one): the card's factors are
    fitted on these alone (a state's factor is not one for every class: the 3090 Ti's long GEMMs ran 1.4-1.6x its
    sibling's where its long convolutions ran 2.2-4.7x)."""
    return [o for o in observations if state is None or not state.holds(o.published_us)]


def scaled_us(row: dict, gpu: str, factors: dict[str, float]) -> float:
    """The GPU's predicted call µs with the factors applied to its classes' GPU time (the host part as it is): the
    kernel model's own arithmetic, applied after the fact, with its lookup (a class without a factor takes its
    parent's)."""
    rates = AchievedRates(gpu, factors)
    return row[gpu]["first_step_us"] + sum(t * (rates.factor(c) - 1.0) for c, t in row[gpu]["by_class"].items())


def errors(predicted: dict, measured: dict, reference: dict, gpu: str, busy: Busy,
           factors_for: Callable[[str], dict[str, float]], keep: Callable[[float], bool] = lambda ms: True
           ) -> list[float]:
    """|predicted / measured - 1| of every busy program with a published time on `gpu` (of those whose published
    ms `keep` keeps), each predicted with factors_for(program)."""
    out = []
    for name, row in predicted["programs"].items():
        meas, ref = measured.get(gpu, {}).get(name), reference.get(name)
        if gpu not in row or meas is None or ref is None or not busy(ref) or not keep(meas):
            continue
        out.append(abs(scaled_us(row, gpu, factors_for(name)) / (meas * 1000.0) - 1.0))
    return out


def _summary(errs: list[float]) -> dict:
    return {"median_error": round(statistics.median(errs), 4),
            "within_15": round(sum(e <= 0.15 for e in errs) / len(errs), 3)}


def fit_one_set(predicted: dict, timings: dict[str, float], reference: dict, gpu: str, busy: Busy) -> dict:
    """One GPU's factors fitted to one set of its timings ({program: ms}, e.g. our own runs with another torch than
    the published ones), with the classes' programs and the error held out by program: achieved.json's "by_torch"
    entries (devices/achieved.py)."""
    sample = observations(predicted, {gpu: timings}, reference, gpu, busy)
    held = errors(predicted, {gpu: timings}, reference, gpu, busy, lambda name: fit_factors(sample, leave_out=name))
    return {"factors": fit_factors(sample), "programs": class_programs(sample),
            "held_out": {"by": "program (leave one out)", "programs": len(held), **_summary(held)}}


def unseen_prior_members(gpu: str, gpus: list[str], capability_of: Callable[[str], str]) -> list[str]:
    """The fitted GPUs whose prior `gpu` would take had it no published timings, as devices/achieved.py
    achieved_rates picks it: those of the nearest compute capability among the other fitted GPUs' and the
    reference's (nearest_capability: its own first, then the same major). None (the datasheet) where that is the
    reference's capability alone: the reference is calibrated, its factors are 1.0 (an H100 is carried from the
    H200 of its own architecture by the datasheets)."""
    others = [g for g in gpus if g not in (gpu, REFERENCE)]
    candidates = sorted({capability_of(g) for g in (*others, REFERENCE)} - {None, ""})
    nearest = nearest_capability(capability_of(gpu), candidates)
    return [g for g in others if nearest is not None and capability_of(g) == nearest]


def fit_all(predicted: dict, measured: dict, reference: dict, busy: Busy,
            capability_of: Callable[[str], str]) -> tuple[dict, dict]:
    """(fitted, priors) as devices/achieved.json holds them: per GPU with published timings its factors, the
    programs each class speaks for, its error held out by program and as an unseen GPU, and the datasheet's
    error; per compute capability the geometric mean of its GPUs' factors and how well it stood in for them."""
    gpus = [g for g in predicted["gpus"] if g != REFERENCE]
    everything = {g: observations(predicted, measured, reference, g, busy) for g in gpus}
    states = {g: slow_state(everything[g]) for g in gpus}
    samples = {g: normal_state(everything[g], states[g]) for g in gpus}
    fitted = {}
    for gpu in gpus:
        datasheet = errors(predicted, measured, reference, gpu, busy, lambda name: {})
        held = errors(predicted, measured, reference, gpu, busy,
                      lambda name, g=gpu: fit_factors(samples[g], leave_out=name))
        fitted[gpu] = {"factors": fit_factors(samples[gpu]), "programs": class_programs(samples[gpu]),
                       "held_out": {"by": "program (leave one out)", "programs": len(held),
                                    "median_error": _summary(held)["median_error"],
                                    "within_15": _summary(held)["within_15"],
                                    "datasheet_median_error": _summary(datasheet)["median_error"]}}
        state = states[gpu]
        if state is not None:
            normal = errors(predicted, measured, reference, gpu, busy,
                            lambda name, g=gpu: fit_factors(samples[g], leave_out=name),
                            keep=lambda ms, st=state: not st.holds(ms * 1000.0))
            fitted[gpu]["slow_state"] = {
                "factor": state.factor, "from_ms": state.from_ms, "programs": state.programs,
                "what": "the published machine's calls of at least from_ms ran about factor x the others' rate; "
                        "left out of the factors, not predicted (a state of that machine, not of the card)"}
            fitted[gpu]["held_out"]["normal_state"] = {"programs": len(normal), **_summary(normal)}
    by_capability: dict[str, list[str]] = {}
    for gpu in gpus:
        by_capability.setdefault(capability_of(gpu), []).append(gpu)
    priors = {}
    for capability, members in sorted(by_capability.items()):
        priors[capability] = {"factors": {c: round(v, 4) for c, v in capability_prior(
            {g: fitted[g]["factors"] for g in members}).items()}, "from": members}
    for gpu in gpus:  # each GPU as if unseen: the prior achieved_rates would give it without its own timings
        siblings = unseen_prior_members(gpu, gpus, capability_of)
        prior = for_architecture(capability_prior({g: fitted[g]["factors"] for g in siblings}),
                                 capability_of(gpu)) if siblings else {}
        held = errors(predicted, measured, reference, gpu, busy, lambda name, p=prior: p)
        fitted[gpu]["held_out_gpu"] = {"by": "GPU (the prior it would get without its own timings" + (
            f": {', '.join(siblings)})" if siblings else "; none: the datasheet)"), **_summary(held)}
        if states[gpu] is not None:
            normal = errors(predicted, measured, reference, gpu, busy, lambda name, p=prior: p,
                            keep=lambda ms, st=states[gpu]: not st.holds(ms * 1000.0))
            fitted[gpu]["held_out_gpu"]["normal_state"] = {"programs": len(normal), **_summary(normal)}
    for prior in priors.values():  # a GPU the prior stands in for: as its members did when unseen (the cards:
        # a member's calls in its published machine's slow state left out, as its own error leaves them)
        unseen = [fitted[g]["held_out_gpu"].get("normal_state", fitted[g]["held_out_gpu"])["median_error"]
                  for g in prior["from"] if len(prior["from"]) > 1]
        if unseen:
            prior["held_out"] = {"by": "each member GPU predicted from the others' prior",
                                 "median_error": round(statistics.median(unseen), 4)}
    return fitted, priors
