"""kernelcast's FLOPs equal torch.utils.flop_counter's on the same captured ops wherever flop_counter has a
formula, except a grouped convolution's weight gradient, which flop_counter counts `groups` times
(costs/matmul.py, conv_backward_flops), and causal attention, where kernelcast counts the attended pairs only
(costs/attention.py). scripts/eval/opinfo_sweep.py runs the same comparison over every OpInfo."""

import collections

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from kernelcast.capture import capture
from kernelcast.costs import cost_of
from kernelcast.costs.matmul import conv_flops


def _flops_both_ways(run):
    """(kernelcast FLOPs, flop_counter FLOPs) per op packet, for the ops `run` records on fake CUDA."""
    with capture("h200") as cap:
        with cap.paused():
            inputs = run.make()
        with FlopCounterMode(display=False) as counter:
            run(*inputs)
    ours: collections.Counter = collections.Counter()
    for op in cap.capture.ops:
        cost = cost_of(op)
        assert cost is not None, op.op
        ours[op.packet] += cost.flops
    theirs = {str(packet): n for packet, n in counter.get_flop_counts().get("Global", {}).items()}
    return ours, theirs


def _case(make, fn):
    fn.make = make
    return fn


def _grad(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=True)


CASES = {
    "mm": _case(lambda: (_grad(32, 64), _grad(64, 16)), lambda a, b: (a @ b).sum().backward()),
    "addmm": _case(lambda: (_grad(16), _grad(8, 32), _grad(32, 16)),
                   lambda c, a, b: torch.addmm(c, a, b).sum().backward()),
    "bmm": _case(lambda: (_grad(4, 8, 16), _grad(4, 16, 8)), lambda a, b: torch.bmm(a, b).sum().backward()),
    "baddbmm": _case(lambda: (_grad(4, 8, 8), _grad(4, 8, 16), _grad(4, 16, 8)),
                     lambda c, a, b: torch.baddbmm(c, a, b).sum().backward()),
    "linear": _case(lambda: (_grad(8, 12, 32), _grad(24, 32), _grad(24)),
                    lambda x, w, b: F.linear(x, w, b).sum().backward()),
    "conv1d": _case(lambda: (_grad(2, 4, 20), _grad(6, 4, 3)),
                    lambda x, w: F.conv1d(x, w, stride=2, padding=1).sum().backward()),
    "conv2d": _case(lambda: (_grad(2, 3, 16, 16), _grad(8, 3, 3, 3), _grad(8)),
                    lambda x, w, b: F.conv2d(x, w, b, padding=1).sum().backward()),
    "conv3d": _case(lambda: (_grad(1, 2, 6, 6, 6), _grad(4, 2, 3, 3, 3)),
                    lambda x, w: F.conv3d(x, w).sum().backward()),
    "conv_transpose2d": _case(lambda: (_grad(2, 4, 8, 8), _grad(4, 6, 3, 3)),
                              lambda x, w: F.conv_transpose2d(x, w, stride=2).sum().backward()),
    "sdpa": _case(lambda: (_grad(2, 4, 64, 32, dtype=torch.bfloat16),) * 3,
                  lambda q, k, v: F.scaled_dot_product_attention(q, k, v).sum().backward()),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_flops_equal_flop_counter(name):
    ours, theirs = _flops_both_ways(CASES[name])
    assert theirs, "flop_counter saw no op it has a formula for"
    for packet, flops in theirs.items():
        assert ours[packet] == flops, (packet, ours[packet], flops)


def test_grouped_conv_differs_from_flop_counter_by_the_weight_gradient_only():
    # groups = 4: x (2, 8, 10, 10), w (8, 2, 3, 3) -> out (2, 8, 8, 8); forward 2 * 2 * 8 * 2 * 9 * 64 = 36864.
    # flop_counter's backward: input gradient 36864 + weight gradient 4 * 36864; kernelcast's weight gradient is
    # the forward's 36864, so the two differ by (4 - 1) * 36864.
    run = _case(lambda: (_grad(2, 8, 10, 10), _grad(8, 2, 3, 3)),
                lambda x, w: F.conv2d(x, w, groups=4).sum().backward())
    ours, theirs = _flops_both_ways(run)
    forward = conv_flops((2, 8, 10, 10), (8, 2, 3, 3), (2, 8, 8, 8), False)
    assert forward == 36864 == ours["aten.convolution"] == theirs["aten.convolution"]
    assert theirs["aten.convolution_backward"] == 5 * forward
    assert ours["aten.convolution_backward"] == 2 * forward


def test_causal_attention_counts_the_attended_pairs_where_flop_counter_counts_all():
    # S = 64, causal: 1 + 2 + ... + 64 = 2080 of the 4096 (query, key) pairs are computed (the fused kernels skip
    # the masked blocks); flop_counter's sdpa formula ignores is_causal. Forward 4 * B * H * pairs * D.
    run = _case(lambda: (_grad(2, 4, 64, 32, dtype=torch.bfloat16),) * 3,
                lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    ours, theirs = _flops_both_ways(run)
    (packet, full), = theirs.items()
    assert full == 4 * 2 * 4 * 4096 * 32 and ours[packet] == 4 * 2 * 4 * 2080 * 32


def test_raw_flash_attention_uses_its_batch_seq_heads_dim_layout():
    # _flash_attention_forward takes (B, S, H, D) = (2, 64, 4, 32): 4 * B * H * S * S * D = 4 * 2 * 4 * 4096 * 32.
    # flop_counter reads the tensors as (B, H, S, D), i.e. 64 heads of 4 tokens: 4 * 2 * 64 * 16 * 32.
    def run(q):
        torch.ops.aten._flash_attention_forward(q, q, q, None, None, 64, 64, 0.0, False, False)

    run.make = lambda: (torch.randn(2, 64, 4, 32, device="cuda", dtype=torch.bfloat16),)
    ours, theirs = _flops_both_ways(run)
    assert ours["aten._flash_attention_forward"] == 4 * 2 * 4 * 4096 * 32
    # torch 2.14's flop_counter reads the (B, S, H, D) layout too (checked on 2.14.1 and 2.15.0).
    fixed = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 14)
    assert theirs["aten._flash_attention_forward"] == (4 * 2 * 4 * 4096 * 32 if fixed else 4 * 2 * 64 * 16 * 32)
