"""torch.distributions on fake CUDA: every family a user's model samples from captures and is costed.

Its argument checks (validate_args, on by default) read `torch._is_all_true(...)` on the host: a sync point each,
answered as passing. Beta, Gamma, Dirichlet and Binomial sample with CUDA-only kernels (capture/cuda_only.py)."""

import pytest
import torch
from torch import distributions as D

from kernelcast.capture import capture
from kernelcast.costs import cost_of

FAMILIES = {
    "normal": lambda x: (D.kl_divergence(D.Normal(x, x.exp()), D.Normal(0.0, 1.0)).sum()
                         + D.Normal(x, 1.0).rsample().sum()),
    "bernoulli": lambda x: D.Bernoulli(logits=x).log_prob(D.Bernoulli(logits=x).sample()).sum(),
    "categorical": lambda x: D.Categorical(logits=x).log_prob(D.Categorical(logits=x).sample()).sum(),
    "beta": lambda x: D.Beta(x.exp(), x.exp()).rsample().sum(),
    "gamma": lambda x: D.Gamma(x.exp(), 1.0).rsample().sum(),
    "dirichlet": lambda x: D.Dirichlet(x.exp()).rsample().sum(),
    "poisson": lambda x: D.Poisson(x.exp()).sample().sum() + x.sum(),
    "binomial": lambda x: D.Binomial(10, logits=x).sample().sum() + x.sum(),
    "mixture": lambda x: D.MixtureSameFamily(D.Categorical(logits=x), D.Normal(x, x.exp())).log_prob(
        torch.zeros(x.shape[0], device="cuda")).sum(),
}


@pytest.fixture(autouse=True)
def _argument_checks_on():
    # torch.distributions' default (on unless python -O); another test or library may have turned it off
    before = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(True)
    yield
    D.Distribution.set_default_validate_args(before)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_distribution_captures_and_is_costed(name):
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(64, 8, device="cuda", requires_grad=True)
        FAMILIES[name](x).backward()
    device_ops = [op for op in cap.capture.ops if "host" not in op.tags and not op.decomposed]
    assert device_ops and not [op.op for op in device_ops if cost_of(op) is None]


def test_sampling_a_categorical_waits_only_for_its_argument_checks():
    # multinomial checks its input on the GPU (_assert_async) from torch 2.11: without validate_args, no sync point
    with capture("h200") as cap:
        with cap.paused():
            logits = torch.randn(64, 8, device="cuda")
        D.Categorical(logits=logits, validate_args=False).sample()
    assert not [op.sync for op in cap.capture.ops if op.sync]
    with capture("h200") as cap:
        with cap.paused():
            logits = torch.randn(64, 8, device="cuda")
        D.Categorical(logits=logits, validate_args=True).sample()
    assert [op.sync for op in cap.capture.ops if op.sync] == ["item"]  # the logits' check, `_is_all_true`
