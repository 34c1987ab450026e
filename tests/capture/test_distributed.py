"""Distributed steps on one CPU: collective formulas, interconnect data, captures on the fake process group,
and the overlap of the NCCL stream with compute."""

import json
import math
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from helpers import contiguous
from kernelcast.capture import capture_workload
from kernelcast.costs import cost_of
from kernelcast.costs.collectives import collective_of
from kernelcast.devices import all_gpus, get_gpu
from kernelcast.devices.interconnects import (NCCL_HW_CLASSES, Interconnect, all_interconnects, get_interconnect,
                                              natural_interconnect)
from kernelcast.errors import CaptureError, UnknownInterconnectError
from kernelcast.predict.comm import BUS_FACTOR, collective_time
from kernelcast.predict.overlap import comm_summary, exposed_comm_us, with_stream_events
from kernelcast.predict.timeline import Launch, simulate, steady_state_step_us
from kernelcast.records import COMM_STREAM, Capture, OpRecord, TensorMeta

WORLD = 4


def _link(bw=100e9, hw="nvlink", ranks_per_node=0, efficiency=1.0) -> Interconnect:
    return Interconnect(id="toy", name="toy", aliases=(), nccl_hw=hw, bw_bytes_per_s=bw,
                        bidirectional_bw_bytes_per_s=2 * bw, bus_efficiency=efficiency, efficiency_source="assumed",
                        ranks_per_node=ranks_per_node, gpus=(), source="test")


# -- formulas ------------------------------------------------------------------------------------------------
def test_bus_factors_are_nccl_tests_definitions():
    assert BUS_FACTOR["all_reduce"](8) == pytest.approx(1.75)  # 2 * 7 / 8
    assert BUS_FACTOR["all_gather"](8) == pytest.approx(0.875)  # 7 / 8
    assert BUS_FACTOR["reduce_scatter"](4) == pytest.approx(0.75)  # 3 / 4
    assert BUS_FACTOR["all_to_all"](2) == pytest.approx(0.5)  # 1 / 2
    assert BUS_FACTOR["broadcast"](8) == 1.0


def test_large_collectives_on_a_ring():
    link = _link(bw=100e9)  # 100 GB/s bus bandwidth, NVLink latencies
    ar = collective_time("all_reduce", 1e9, 4, link)
    assert (ar.algorithm, ar.protocol) == ("ring", "simple")
    # 1 GB * 2*3/4 / 100 GB/s = 15000 us; latency 8.4 + 2*3 hops * 3.4 = 28.8 us
    assert ar.bandwidth_us == pytest.approx(15000.0) and ar.latency_us == pytest.approx(28.8)
    ag = collective_time("all_gather", 1e9, 4, link)
    # 1 GB * 3/4 / 100 GB/s = 7500 us; 8.4 + 3 hops * 3.4 = 18.6 us
    assert ag.time_us == pytest.approx(7518.6)
    assert collective_time("reduce_scatter", 1e9, 4, link).time_us == pytest.approx(7518.6)
    # broadcast: 1 GB / 100 GB/s = 10000 us; the pipeline fills in 3 hops: 8.4 + 3 * 3.4 = 18.6
    assert collective_time("broadcast", 1e9, 4, link).time_us == pytest.approx(10018.6)
    # all_to_all: 1 GB * 3/4 / 100 GB/s = 7500 us; every peer at once, one hop: 8.4 + 3.4 = 11.8
    assert collective_time("all_to_all", 1e9, 4, link).time_us == pytest.approx(7511.8)
    # nccl-tests' busbw of a large all_reduce approaches the link's bus bandwidth: 100 * 15000 / 15028.8
    assert ar.busbw_bytes_per_s == pytest.approx(100e9 * 15000 / 15028.8)


def test_small_all_reduce_is_latency_bound_and_uses_ll():
    small = collective_time("all_reduce", 1024, 8, _link(bw=100e9))
    assert (small.algorithm, small.protocol) == ("ring", "ll")
    # 6.6 + 2*7 hops * 0.6 = 15.0 us; 1024 B * 1.75 / (100 GB/s / 4) = 0.0717 us
    assert small.time_us == pytest.approx(15.0 + 1024 * 1.75 / 25e9 * 1e6)


def test_tree_wins_small_messages_across_many_nodes_and_ring_large_ones():
    net = _link(bw=50e9, hw="net", ranks_per_node=8)
    small = collective_time("all_reduce", 4096, 256, net)  # 32 nodes of 8
    # tree/LL: 6.8 + 2 * (7 NVLink hops * 0.6 + log2(32) network hops * 5.0) = 65.2 us of latency;
    # ring/LL would take 6.6 + (510 - 64) * 0.6 + 64 * 2.7 = 447.0 us
    assert small.algorithm == "tree" and small.latency_us == pytest.approx(65.2)
    assert collective_time("all_reduce", 4e9, 256, net).algorithm == "ring"  # the tree moves S at half rate


def test_collective_invariants():
    link = _link()
    assert collective_time("all_reduce", 1e6, 1, link).time_us == 0  # a group of one moves nothing
    times = [collective_time("all_reduce", s, 8, link).time_us for s in (1e3, 1e5, 1e7, 1e9)]
    assert times == sorted(times)
    # a large all_reduce costs a reduce_scatter plus an all_gather: 2(n-1)/n = (n-1)/n + (n-1)/n
    ar = collective_time("all_reduce", 1e9, 8, link).bandwidth_us
    rs_ag = sum(collective_time(c, 1e9, 8, link).bandwidth_us for c in ("reduce_scatter", "all_gather"))
    assert ar == pytest.approx(rs_ag)
    with pytest.raises(ValueError):
        collective_time("all_shuffle", 1e6, 8, link)


# -- interconnect data ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("link_id", sorted(all_interconnects()))
def test_every_interconnect_entry_is_sane(link_id):
    link = all_interconnects()[link_id]
    assert link.source and link.name and link.efficiency_source in ("assumed", "measured")
    assert link.nccl_hw in NCCL_HW_CLASSES
    assert 1e9 < link.bw_bytes_per_s < 2e12  # 1 GB/s to 2 TB/s per direction
    assert link.bidirectional_bw_bytes_per_s == pytest.approx(2 * link.bw_bytes_per_s)
    assert 0.5 < link.bus_efficiency <= 1.0
    assert set(link.gpus) <= set(all_gpus())
    assert (link.ranks_per_node > 0) == (link.nccl_hw == "net")
    assert all(a == a.lower() for a in link.aliases)


def test_aliases_are_unique_and_known_values():
    names = [n for link in all_interconnects().values() for n in (link.id, *link.aliases)]
    assert len(names) == len(set(names))
    links = all_interconnects()
    assert links["nvlink4"].bidirectional_bw_bytes_per_s == 900e9  # H100/H200 datasheets: 900 GB/s
    assert links["nvlink3"].bidirectional_bw_bytes_per_s == 600e9  # A100 datasheet: 600 GB/s
    assert links["ib-ndr"].bw_bytes_per_s == 50e9  # 400 Gb/s / 8
    assert links["ib-hdr"].bw_bytes_per_s == 25e9  # 200 Gb/s / 8
    assert links["pcie4"].bw_bytes_per_s == pytest.approx(16e9 * 16 * 128 / 130 / 8, rel=1e-3)  # 16 GT/s x16, 128b/130b


def test_natural_interconnect_and_unknown_names():
    assert natural_interconnect(get_gpu("h200")).id == "nvlink4"
    assert natural_interconnect(get_gpu("a100-80gb")).id == "nvlink3"
    assert natural_interconnect(get_gpu("l4")).id == "pcie4"  # no NVLink: its host link
    with pytest.raises(UnknownInterconnectError, match="pass --interconnect"):
        natural_interconnect(get_gpu("mi300x"))  # RCCL over Infinity Fabric: no data, no guess
    assert get_interconnect("NVLink").id == "nvlink4"
    with pytest.raises(UnknownInterconnectError, match="closest: .*nvlink"):
        get_interconnect("nvlnk")


# -- capture on the fake process group -----------------------------------------------------------------------
def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).to("cuda")


def _train_build(wrap, make_model=_mlp, inputs=None):
    def build():
        model = wrap(make_model())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        args = inputs() if inputs else (torch.randn(16, 32, device="cuda"),)

        def step(*batch):
            out = model(*batch)
            loss = out.loss if hasattr(out, "loss") else out.float().sum()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step, args

    return build


def _collectives(cap):
    return [op for op in cap.ops if collective_of(op) is not None]


def _ddp(model):
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model)


def _fsdp(model):
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    return fully_shard(model)


def _tp(model):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    return parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


MLP_PARAM_BYTES = (32 * 64 + 64 + 64 * 8 + 8) * 4  # 2632 fp32 parameters


def test_ddp_all_reduces_every_gradient_on_the_nccl_stream():
    cap = capture_workload(_train_build(_ddp), "h100", world_size=WORLD)
    comms = _collectives(cap)
    assert cap.world_size == WORLD and not dist.is_initialized()  # the fake group is gone afterwards
    assert {op.op for op in comms} == {"c10d.allreduce_.default"}
    assert all(op.stream == COMM_STREAM and op.group_size == WORLD and op.phase == "backward" for op in comms)
    assert sum(collective_of(op)[1] for op in comms) == MLP_PARAM_BYTES  # every gradient byte, once
    assert any("rank 0 of 4" in note for note in cap.notes)
    assert all(op.stream == 0 for op in cap.ops if collective_of(op) is None)


def test_fsdp2_gathers_parameters_and_scatters_gradients():
    cap = capture_workload(_train_build(_fsdp), "h100", world_size=WORLD)
    comms = _collectives(cap)
    gathers = [op for op in comms if collective_of(op)[0] == "all_gather"]
    scatters = [op for op in comms if collective_of(op)[0] == "reduce_scatter"]
    # one all-gather per Linear in forward, again in backward (resharded after forward); a reduce-scatter each
    assert [op.phase for op in gathers] == ["forward", "forward", "backward", "backward"]
    assert [op.phase for op in scatters] == ["backward", "backward"]
    # gathered buffers: (32*64 + 64) = 2112 and (64*8 + 8) = 520 fp32 elements, already multiples of 4 ranks
    assert sum(collective_of(op)[1] for op in gathers[:2]) == MLP_PARAM_BYTES
    assert sum(collective_of(op)[1] for op in scatters) == MLP_PARAM_BYTES
    assert all(op.group_size == WORLD and op.stream == COMM_STREAM for op in comms)


def test_tensor_parallel_all_reduces_the_rowwise_output():
    cap = capture_workload(_train_build(_tp), "h100", world_size=WORLD)
    comms = _collectives(cap)
    assert [(op.op, op.phase) for op in comms] == [("_c10d_functional.all_reduce.default", "forward")]
    assert collective_of(comms[0])[1] == 16 * 8 * 4  # the (16, 8) fp32 partial sums
    waits = [op for op in cap.ops if op.op == "_c10d_functional.wait_tensor.default"]
    assert len(waits) == 1 and waits[0].stream == 0 and cost_of(waits[0]).kernels == 0
    # Colwise: this rank holds 64 / 4 = 16 output features of the first Linear
    first = next(op for op in cap.ops if op.op == "aten.addmm.default")
    assert first.args["mat2"].shape == (32, 16)


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=32, bos_token_id=0,
                        eos_token_id=0)
    return GPT2LMHeadModel(config).to("cuda")


def _gpt2_step_build(wrap):
    def build():
        model = wrap(_gpt2())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        ids = torch.randint(0, 128, (2, 16), device="cuda")

        def step(ids):
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step, (ids,)

    return build


@pytest.mark.slow
def test_gpt2_ddp_and_fsdp2_steps_capture():
    ddp = capture_workload(_gpt2_step_build(_ddp), "h100", world_size=2)
    grad_bytes = sum(p.numel() for p in _gpt2_cpu().parameters()) * 4  # wte and lm_head are tied: counted once
    assert sum(collective_of(op)[1] for op in _collectives(ddp)) == grad_bytes

    def shard_blocks(model):
        from torch.distributed.fsdp import fully_shard

        for block in model.transformer.h:
            fully_shard(block)
        return fully_shard(model)

    fsdp = capture_workload(_gpt2_step_build(shard_blocks), "h100", world_size=2)
    kinds = {collective_of(op)[0] for op in _collectives(fsdp)}
    assert kinds == {"all_gather", "reduce_scatter"}
    forward_gathers = [op for op in _collectives(fsdp) if op.phase == "forward"]
    assert len(forward_gathers) == 3  # the root (embeddings, final norm) and the two blocks
    assert sum(collective_of(op)[1] for op in forward_gathers) >= grad_bytes  # padded to a multiple of 2 ranks


def _gpt2_cpu():
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=32,
                                      bos_token_id=0, eos_token_id=0))


def test_world_size_is_checked():
    with pytest.raises(CaptureError, match="world size"):
        capture_workload(_train_build(_ddp), "h100", world_size=0)


# -- overlap -------------------------------------------------------------------------------------------------
def _op(index, name, reads=(), writes=(), stream=0, group_size=0):
    t = lambda s: TensorMeta((1024,), "float32", (1,), "cuda", s)  # noqa: E731
    return OpRecord(index=index, op=name, args={"self": tuple(t(s) for s in reads)},
                    outputs=tuple(t(s) for s in writes), stream=stream, group_size=group_size)


def _overlap_case(independent_us):
    """A writes the gradients (storage 1); the all-reduce reads and writes them on the NCCL stream; B is
    independent compute; C (the optimizer) reads the reduced gradients."""
    ops = [_op(0, "aten.mm.default", writes=[1]),
           _op(1, "c10d.allreduce_.default", reads=[1], writes=[1], stream=COMM_STREAM, group_size=8),
           _op(2, "aten.mm.default", reads=[2], writes=[3]),
           _op(3, "aten._foreach_add_.List", reads=[1], writes=[4])]
    launches = [Launch(0.0, 100.0), Launch(0.0, 50.0, COMM_STREAM), Launch(0.0, independent_us), Launch(0.0, 10.0)]
    return ops, with_stream_events(ops, launches)


def test_all_reduce_waits_for_its_gradients_and_overlaps_independent_compute():
    ops, launches = _overlap_case(independent_us=80.0)
    spans = simulate(launches).spans
    assert spans[1].gpu_start_us == pytest.approx(100.0)  # after A wrote the gradients
    assert spans[2].gpu_start_us == pytest.approx(100.0)  # B runs beside the all-reduce
    assert spans[3].gpu_start_us == pytest.approx(180.0)  # C after B (180) and the all-reduce (150)
    step_us = steady_state_step_us(launches)
    # per step: A 100 + max(B 80, all-reduce 50) + C 10 = 190 us, the same as with free communication
    assert step_us == pytest.approx(190.0)
    assert exposed_comm_us(launches, [False, True, False, False], step_us) == (pytest.approx(0.0),
                                                                             pytest.approx(190.0))


def test_exposed_communication_is_what_compute_cannot_cover():
    ops, launches = _overlap_case(independent_us=20.0)
    step_us = steady_state_step_us(launches)
    # A 100 + max(B 20, all-reduce 50) + C 10 = 160 us; with free communication 100 + 20 + 10 = 130 us
    assert step_us == pytest.approx(160.0)
    summary = comm_summary(ops, [100.0, 50.0, 20.0, 10.0], launches, step_us, _link(), 8)
    assert summary.exposed_comm_us == pytest.approx(30.0) and summary.hidden_comm_us == pytest.approx(20.0)
    assert summary.compute_us == pytest.approx(130.0) and summary.comm_us == pytest.approx(50.0)


# -- predict and CLI -----------------------------------------------------------------------------------------
def _saved_capture(tmp_path, world_size=8):
    grads = TensorMeta((1 << 20,), "float32", (1,), "cuda", 7)
    ops = (
        OpRecord(index=0, op="aten.mul.out", args={"self": contiguous((1 << 20,)), "other": 0.125, "out": grads},
                 outputs=(grads,), tags=("pointwise",), phase="backward"),
        OpRecord(index=1, op="c10d.allreduce_.default", args={"tensors": (grads,), "async_op": True},
                 outputs=(grads,), phase="backward", stream=COMM_STREAM, group_size=world_size),
        OpRecord(index=2, op="aten.add.Tensor", args={"self": grads, "other": grads},
                 outputs=(contiguous((1 << 20,)),), tags=("pointwise",), phase="optimizer"),
    )
    path = tmp_path / "ddp.json"
    Capture(ops=ops, world_size=world_size).save(path)
    return path


def test_predict_reports_compute_and_exposed_communication(tmp_path):
    from kernelcast.predict import predict_capture

    cap = Capture.load(_saved_capture(tmp_path))
    pred = predict_capture(cap, "h200", interconnect="nvlink")
    assert pred.comm is not None and pred.comm.collectives == 1 and pred.comm.interconnect == "nvlink4"
    comm_op = pred.ops[1]
    # NVLink 4 has a measured fit (2 H200s); 8 ranks keep its bus bandwidth, with NCCL's hop latency added
    assert comm_op.bound == "comm" and comm_op.costed and comm_op.roof == "nvlink4 measured (fit at 2 ranks, scaled)"
    # 4 MiB all-reduced among 8: at least 4194304 * 1.75 / 317.1 GB/s = 23.1 us on the wire
    assert comm_op.time_us > 4194304 * 1.75 / 317.1e9 * 1e6
    # no compute to hide it behind, only the CPU's work on the next step, most of which is issuing the all-reduce
    # (63.6 us per call on NVLink 4, measured): a little of it is exposed
    assert pred.comm.issue_host_us == pytest.approx(63.6)
    assert 0.0 < pred.comm.exposed_comm_us < 0.5 * pred.comm.comm_us
    assert pred.comm.step_without_comm_us + pred.comm.exposed_comm_us == pytest.approx(pred.step_time_us)
    # a no-op all-reduce would save the exposed part and the CPU's call: the step falls to its two pointwise ops
    assert pred.comm.noop_saving_us == pytest.approx(pred.step_time_us - pred.comm.step_without_comm_or_issue_us)
    assert pred.comm.noop_saving_us > pred.comm.issue_host_us
    assert "aten.mul.out" not in pred.uncosted and not any("c10d" in u for u in pred.uncosted)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kernelcast", *args], capture_output=True, text=True)


@pytest.mark.slow
def test_cli_prints_communication_and_names_bad_input_in_one_line(tmp_path):
    path = str(_saved_capture(tmp_path))
    trace = tmp_path / "trace.json"
    ok = _cli("predict", path, "--world-size", "8", "--interconnect", "nvlink", "--trace", str(trace))
    assert ok.returncode == 0, ok.stderr
    assert "8 ranks over NVLink 4" in ok.stdout and "exposed" in ok.stdout
    lanes = [e["args"]["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("name") == "thread_name"]
    assert "NCCL (communication)" in lanes
    for bad, words in ((("--interconnect", "nvlnk"), "unknown interconnect"), (("--world-size", "0"), "world-size"),
                       (("--world-size", "4"), "world size 8")):
        out = _cli("predict", path, *bad)
        assert out.returncode == 2 and words in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_bus_bandwidth_helpers_are_finite_for_every_entry():
    for link in all_interconnects().values():
        est = collective_time("all_reduce", 256e6, 8, link)
        assert math.isfinite(est.time_us) and 0 < est.busbw_bytes_per_s <= link.bus_bw_bytes_per_s
