"""Data-dependent sizes on fake CUDA: the capture goes on with stated assumptions, records each op's sync and
costs it as CUDA launches it.

Expected work items come from the H200 (torch 2.11): validation/zoo_measured.json.gz, zoo workloads
data_dependent (examples/zoo/misc.py) and moe_train / moe_forward_bincount (examples/zoo/recsys_moe_graph.py).
"""

import torch
import torch.nn.functional as F

from helpers import contiguous, op
from kernelcast.capture import capture, capture_workload
from kernelcast.costs import cost_of
from kernelcast.costs.cub import radix_sort_keys_kernels
from kernelcast.costs.data_dependent import nonzero_kernels


def _noted(notes, *parts: str) -> bool:
    """Some note says all of `parts`, on a line of this file."""
    return any(all(p in n for p in parts) and "test_dynamic_shapes.py:" in n for n in notes)


def _data_dependent_build():
    x = torch.randn(1 << 20, device="cuda")
    labels = torch.randint(0, 100, (1 << 16,), device="cuda")

    def step(x, labels):
        idx = torch.nonzero(x > 1.0).squeeze(1)
        picked = torch.masked_select(x, x < -1.0)
        uniq = torch.unique(labels)
        counts = torch.bincount(labels, minlength=100)
        rep = torch.repeat_interleave(torch.arange(100, device="cuda"), counts)
        return idx.float().sum() + picked.sum() + uniq.sum() + rep.float().mean()

    return step, (x, labels)


def test_data_dependent_ops_capture_with_their_syncs_and_launches():
    cap = capture_workload(_data_dependent_build, "h200")
    by_op = {o.op: o for o in cap.ops if o.sync}
    # CUDA's host waits for each count (the device run: 7 cudaStreamSynchronize, bincount's two counted once)
    assert [o.sync for o in cap.ops if o.sync] == ["nonzero", "masked_select", "unique", "bincount",
                                                   "repeat_interleave"]
    # H200 zoo data_dependent, work items per op: nonzero 5 (2 reduce kernels over 2**20 flags, the count's
    # copy, select init + sweep); masked_select 6 (its nonzero + the index kernel); unique 23 (radix sort of
    # 65536 int64: 10 memsets + histogram + exclusive sum + 8 onesweep passes, select 2, the count's copy);
    # bincount 6 (min, copy, max, copy, zeros, histogram); repeat_interleave 7 (cumsum 2, copy, ge, all, copy,
    # compute)
    expected = {"aten.nonzero.default": 5, "aten.masked_select.default": 6, "aten._unique2.default": 23,
                "aten.bincount.default": 6, "aten.repeat_interleave.Tensor": 7}
    assert {name: cost_of(by_op[name]).kernels for name in expected} == expected
    # randint's values spread over [0, 100): unique finds all 100, bincount 100 bins summing to 65536
    assert by_op["aten._unique2.default"].outputs[0].shape == (100,)
    assert by_op["aten.repeat_interleave.Tensor"].outputs[0].shape == (1 << 16,)
    # nonzero of a float comparison: no values to go by, the upper bound, stated with its line
    assert by_op["aten.nonzero.default"].outputs[0].shape == (1 << 20, 1)
    assert _noted(cap.notes, "nonzero at ", "every element assumed selected")
    assert _noted(cap.notes, "randint at ", "spread evenly")


def _moe_build(experts=8, k=2, tokens=256, dim=32):
    gate = torch.nn.Linear(dim, experts, bias=False).cuda()
    x = torch.randn(tokens, dim, device="cuda")

    def step(x):
        weights, chosen = torch.topk(F.softmax(gate(x), dim=-1), k, dim=-1)
        sizes = []
        for e in range(experts):
            token_idx, slot = torch.where(chosen == e)
            sizes.append(x[token_idx].shape[0])
        counts = torch.bincount(chosen.flatten(), minlength=experts).tolist()
        return sizes, counts

    return step, (x,)


def test_moe_routing_is_a_uniform_split_over_experts():
    with capture("h200") as cap:
        step, args = _moe_build()
        sizes, counts = step(*args)
    # 256 tokens * top-2 over 8 experts: 64 per expert, and the counts the host reads say the same
    assert sizes == [64] * 8 and counts == [64] * 8
    nonzero = [o for o in cap.capture.ops if o.op == "aten.nonzero.default"]
    # H200 zoo moe_train (torch.where over a (2048, 2) bool): 5 per call, the 2-D output adding write_indices
    assert len(nonzero) == 8 and {cost_of(o).kernels for o in nonzero} == {1 + 1 + 2 + 1}
    assert _noted(cap.capture.notes, "topk at ", "uniform routing")
    # bincount(...).tolist(): the copy to the host is the sync point, labelled as the read
    assert [o.sync for o in cap.capture.ops if o.sync].count("tolist") == 1


def test_without_value_hints_sizes_come_from_the_stated_bounds():
    with capture("h200") as cap:
        x = torch.randn(1000, device="cuda")
        idx = (x * 50).long().clamp(0, 999)  # values the capture cannot know
        bins = torch.bincount(idx)
        bins_min = torch.bincount(idx, minlength=7)
        uniq = torch.unique(idx)
        rep = torch.repeat_interleave(idx, idx)
        rep_sized = torch.repeat_interleave(idx, idx, output_size=123)
    assert bins.shape == (1000,) and bins_min.shape == (7,) and uniq.shape == (1000,)
    assert rep.shape == (1000,)  # each repeat assumed 1
    assert rep_sized.shape[0] == 123
    syncs = [o.sync for o in cap.capture.ops if o.op == "aten.repeat_interleave.Tensor"]
    assert syncs == ["repeat_interleave", None]  # output_size given: no read-back (ATen cuda/Repeat.cu)
    notes = "\n".join(cap.capture.notes)
    assert "1000 bins assumed (as many bins as input elements" in notes and "7 bins assumed (minlength)" in notes
    assert "every element assumed distinct" in notes


def test_data_dependent_set_up_does_not_crash():
    def build():
        vocab = torch.randint(0, 50, (500,), device="cuda")
        kept = torch.unique(vocab)  # in build(), before the step
        table = torch.nn.Embedding(int(kept.numel()), 8).cuda()

        def step():
            return table(torch.arange(kept.numel(), device="cuda")).sum()

        return step, ()

    cap = capture_workload(build, "h200")
    emb = next(o for o in cap.ops if o.op == "aten.embedding.default")
    assert emb.args["weight"].shape == (50, 8)


def test_boolean_mask_records_its_nonzero_and_a_scalar_fill_does_not():
    with capture("h200") as cap:
        x = torch.randn(64, 32, device="cuda")
        mask = x > 0
        kept = x[mask]
        x[mask] = 0.0  # one CPU scalar through one mask: CUDA's index_put_ runs masked_fill_, no sync
    ops = [(o.op, o.sync) for o in cap.capture.ops
           if o.op != "aten.gt.Scalar" and not o.op.startswith("aten.randn") and o.parent < 0]
    assert ops[:2] == [("aten.nonzero.default", "boolean mask"), ("aten.index.Tensor", None)]
    assert ops[-1] == ("aten.index_put_.default", None) and kept.shape == (64 * 32,)
    assert [name for name, _ in ops].count("aten.nonzero.default") == 1


def test_item_and_tolist_read_known_host_values():
    with capture("h200") as cap:
        lengths = torch.tensor([7, 5, 2])  # the host knows these
        total = int(lengths.sum())
        listed = lengths.tolist()
    assert total == 14 and listed == [7, 5, 2]
    assert not [o for o in cap.capture.ops if o.sync]  # a CPU tensor: no sync


def test_nonzero_and_radix_sort_launch_rules():
    # cub::DeviceReduce: one single-tile kernel up to 256 * 20 items, else two; + the count's copy + select 2
    assert nonzero_kernels(contiguous((4096,), "bool"), 10) == 1 + 1 + 2
    assert nonzero_kernels(contiguous((1 << 20,), "bool"), 10) == 2 + 1 + 2
    assert nonzero_kernels(contiguous((64, 64), "bool"), 10) == 1 + 1 + 2 + 1  # 2-D: write_indices
    assert nonzero_kernels(contiguous((64, 64), "bool"), 0) == 1 + 1 + 2  # nothing found: no write_indices
    # onesweep: 8-bit digits: 8 passes for int64 (10 memsets + histogram + exclusive sum + 8 = 20), 4 for int32
    assert radix_sort_keys_kernels(1 << 16, 64, 8) == 20 and radix_sort_keys_kernels(1 << 16, 32, 4) == 12
    assert radix_sort_keys_kernels(512, 64, 8) == 1  # one tile: the single-tile kernel (moe_train's index_put sort)
    masked = op("aten.masked_select.default", {"self": contiguous((8, 16)), "mask": contiguous((16,), "bool")},
                [contiguous((40,))])
    assert cost_of(masked).kernels == 1 + 1 + 2 + 1 + 1 + 1  # copy of the expanded mask, its nonzero, index


def test_routing_sort_and_topk_launches():
    # H200 zoo moe_forward_bincount: argsort(stable) of 4096 routes -> sort 5 (values copy, arange + index copy,
    # values copy, radixSortKVInPlace); topk(2) of (2048, 8) logits -> gatherTopK + bitonicSortKVInPlace, 2
    sort = op("aten.sort.stable", {"self": contiguous((4096,), "int64"), "stable": True, "dim": -1,
                                   "descending": False}, [contiguous((4096,), "int64"), contiguous((4096,), "int64")])
    topk = op("aten.topk.default", {"self": contiguous((2048, 8), "bfloat16"), "k": 2, "dim": -1, "largest": True,
                                    "sorted": True},
              [contiguous((2048, 2), "bfloat16"), contiguous((2048, 2), "int64")])
    assert cost_of(sort).kernels == 5 and cost_of(topk).kernels == 2
    unsorted = op("aten.topk.default", {**topk.args, "sorted": False}, topk.outputs)
    assert cost_of(unsorted).kernels == 1


def test_a_random_fill_read_by_the_host_is_its_mean():
    # torchvision's GeneralizedRCNNTransform.torch_choice: int(torch.empty(1).uniform_(0.0, float(len(k))).item())
    # picks an index into k; the placeholder 1.0 for a float read had indexed a 1-element tuple out of range.
    with capture("h200") as cap:
        index = int(torch.empty(1).uniform_(0.0, 3.0).item())  # (0 + 3) / 2 = 1.5 -> 1
        centre = torch.empty(1, 1).normal_(mean=-2.0).item()  # a (1, 1) tensor reads as one number
    assert index == 1 and centre == -2.0
    assert _noted(cap.capture.notes, "uniform_ read back at ", "random value assumed 1.5, its mean")
    # nn.init fills parameters in place: no hint on them (Module._apply could not swap them later)
    with capture("h200"):
        torch.nn.Linear(4, 4).cuda()


def test_fewer_values_than_choices_spread_over_the_whole_range():
    """capture/dynamic_shapes.py spread: 16 sequence lengths drawn from [5, 40) are assumed to cover the range (a
    uniform draw's mean, about 22), not to be 5, 6, ..., 20; as many values as choices or more take each equally
    often."""
    from kernelcast.capture.dynamic_shapes import spread

    few = spread(16, 35, 5).tolist()
    assert min(few) >= 5 and max(few) <= 39 and max(few) >= 37 and len(set(few)) == 16
    assert abs(sum(few) / 16 - 22) < 1
    assert spread(6, 3).tolist() == [0, 1, 2, 0, 1, 2]
