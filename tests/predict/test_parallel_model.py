"""The model of FSDP2's and DDP's machinery: their copy kernels, the host cost of their hooks, and the
collectives calibrated on the device (no GPU needed; expected values inline with their source)."""

import pytest

from helpers import contiguous, op
from kernelcast.costs import CostContext, cost_of

# torch 2.11+cu130, what the device ran: multi_tensor_apply with its 4 KB argument tables.
TORCH_2_11 = CostContext(multi_tensor_large_args=False)


# -- FSDP2's copies -----------------------------------------------------------------------------------------
LLAMA_LAYER_SHARDS = [(2097152,), (262144,), (262144,), (2097152,), (5767168,), (5767168,), (5767168,), (1024,),
                      (1024,)]  # one rank's shard of each of a Llama layer's 9 parameters (2 ranks), 22022144 in all


def _copy_in(shards, dtype):
    inputs = tuple(contiguous(s, dtype) for s in shards)
    total = sum(s[0] for s in shards)
    return op("fsdp.all_gather_copy_in.default",
              {"all_gather_inputs": inputs, "all_gather_output": contiguous((2 * total,), dtype),
               "inp_split_sizes": tuple(s[0] for s in shards), "all_gather_input_numel": total, "rank": 0},
              [contiguous((total,), dtype), contiguous((2 * total,), dtype)])


def test_all_gather_copy_in_is_a_foreach_copy():
    # H200, torch 2.11 (validation/distributed profiles, llama_fsdp): 2 multi_tensor_apply kernels per layer.
    # 65536-element chunks per shard: 32 + 4 + 4 + 32 + 88 * 3 + 1 + 1 = 338 blocks; a 4 KB table holds 320: 2 launches
    cost = cost_of(_copy_in(LLAMA_LAYER_SHARDS, "bfloat16"), TORCH_2_11)
    assert cost.kernels == 2
    assert cost.bytes_read == cost.bytes_written == 22022144 * 2
    # gpt_fsdp: a GPT-2 block's 3543936 fp32 elements per rank in one shard buffer, 55 blocks: 1 kernel
    assert cost_of(_copy_in([(3543936,)], "float32"), TORCH_2_11).kernels == 1
    # the root of llama_fsdp: 65537024 bf16 elements per rank, 500 + 1 + 500 blocks: 4 launches
    assert cost_of(_copy_in([(32768000,), (1024,), (32768000,)], "bfloat16"), TORCH_2_11).kernels == 4


def test_split_copies_pack_their_tables_and_copy_them_to_the_device():
    # aten's CUDA fast path (TensorShape.cu, pack_vecs): one H2D memcpy of the tables + one kernel. H200, torch
    # 2.11: "Memcpy HtoD (Pinned -> Device)" + split_with_sizes_copy_out_contiguous_no_cast per FSDP2 copy-out.
    gathered = contiguous((2, 22022144), "bfloat16")
    outs = tuple(contiguous((2, s[0]), "bfloat16") for s in LLAMA_LAYER_SHARDS)
    fsdp_out = op("fsdp.split_with_sizes_copy.default",
                  {"all_gather_output": gathered, "all_gather_input_split_sizes": (), "dim": 1, "out": outs}, [])
    assert cost_of(fsdp_out, TORCH_2_11).kernels == 2
    aten_out = op("aten.split_with_sizes_copy.out", {"self": gathered, "split_sizes": (), "dim": 1, "out": outs}, [])
    assert cost_of(aten_out, TORCH_2_11).kernels == 2
    # a cast (bf16 -> fp32 outputs) leaves the fast path: the composite copies split by split, 9 kernels
    cast_outs = tuple(contiguous((2, s[0]), "float32") for s in LLAMA_LAYER_SHARDS)
    cast = op("aten.split_with_sizes_copy.out", {"self": gathered, "split_sizes": (), "dim": 1, "out": cast_outs}, [])
    assert cost_of(cast, TORCH_2_11).kernels == 9
    # chunk_cat (the reduce-scatter's copy-in) is the same kind: H200, torch 2.11: chunk_cat_cuda_kernel + 1 memcpy
    grads = tuple(contiguous((2 * s[0],), "float32") for s in LLAMA_LAYER_SHARDS)
    chunk_cat = op("fsdp.chunk_cat.default", {"tensors": grads, "dim": 0, "num_chunks": 2,
                                              "out": contiguous((2, 22022144), "float32")}, [])
    assert cost_of(chunk_cat, TORCH_2_11).kernels == 2


# -- capture: where FSDP2's hooks begin and end -------------------------------------------------------------
def _fsdp_mlp_build():
    import torch
    from torch.distributed.fsdp import fully_shard

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).to("cuda")
    for layer in (model[0], model[2]):
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (torch.randn(16, 32, device="cuda"),)


def test_capture_records_fsdp2_hook_ranges_in_pairs():
    from kernelcast.capture import capture_workload
    from kernelcast.records import RANGE_BEGIN_OP, RANGE_END_OP

    cap = capture_workload(_fsdp_mlp_build, "h200", world_size=2)
    stack, seen = [], []
    for o in cap.ops:
        if o.op == RANGE_BEGIN_OP:
            stack.append(o.args["name"])
            seen.append((o.args["name"], o.phase))
        elif o.op == RANGE_END_OP:
            assert stack.pop() == o.args["name"]  # properly nested
    assert not stack
    # FSDP2's hooks (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py): per Linear unit, a pre-forward
    # that all-gathers and copies out, a post-forward, a pre-backward, and the post-backward's three parts
    for unit in ("0", "2"):
        assert (f"FSDP::pre_forward ({unit})", "forward") in seen and (f"FSDP::post_forward ({unit})", "forward") in seen
        assert (f"FSDP::post_backward_reduce ({unit})", "backward") in seen
    assert ("FSDP::root_post_backward_callback", "backward") in seen
    assert [n for n, _ in seen].count("FSDP::all_gather (0)") == 2  # forward and (prefetched for) backward


# -- collectives: the link's measured fit ---------------------------------------------------------------------
def test_collective_fit_recovers_a_line():
    from kernelcast.calibrate.parallel_fit import fit_collective, fit_line

    assert fit_line([(0.0, 10.0), (1.0, 12.0), (2.0, 14.0)]) == pytest.approx((10.0, 2.0))
    # all_gather at 2 ranks: bus bytes = S / 2; t = 40 us + bus / 250 GB/s exactly
    rows = [{"collective": "all_gather", "dtype": "float32", "bytes": s, "measured_us": 40.0 + s / 2 / 250e9 * 1e6}
            for s in (2 ** 20, 2 ** 24, 2 ** 28)]
    fit = fit_collective(rows, "all_gather", 2)
    assert fit.intercept_us == pytest.approx(40.0) and fit.busbw_bytes_per_s == pytest.approx(250e9)
    assert max(abs(r) for r in fit.residuals.values()) < 1e-9


def test_measured_link_times_collectives_from_its_fit():
    from kernelcast.devices.interconnects import get_interconnect
    from kernelcast.predict.comm import call_host_us, collective_time, host_issue_us

    link = get_interconnect("nvlink4")  # [nvlink4.measured]: 2 H200s, fitted by scripts/fit/fit_parallel.py
    fit = link.measured.collectives["all_gather"]
    est = collective_time("all_gather", 88088576, 2, link)  # a Llama layer's bf16 parameters, gathered
    # latency + S/2 / busbw: 4.6 + 44044288 / 265.4 GB/s = 4.6 + 165.95 = 170.6 us; the device's profiled
    # all-gather of this size ran 182.2 us when it did not wait for its peer (x32, validation/distributed)
    assert est.algorithm == "measured"
    assert est.time_us == pytest.approx(fit.latency_us + 44044288 / fit.busbw_bytes_per_s * 1e6)
    assert est.time_us == pytest.approx(170.55, abs=0.1)
    # the CPU: 41.3 us from the call to the launch (the sweep's 1-16 KiB points less NCCL's LL latency), 63.6 us
    # for the whole call (the profiles' c10d ops spend 0.54 of that after the launch)
    assert host_issue_us("all_gather", link) == 41.3 and call_host_us("all_gather", link) == 63.6
    # 8 ranks: the same bus bandwidth; the latency grows by NCCL's ring/simple hop latency on NVLink for the 6
    # extra steps (3.4 us each): 4.6 + 20.4 = 25.0 us
    eight = collective_time("all_gather", 88088576, 8, link)
    assert eight.latency_us == pytest.approx(fit.latency_us + 6 * 3.4)
    assert eight.bandwidth_us == pytest.approx(88088576 * 7 / 8 / fit.busbw_bytes_per_s * 1e6)
    # never measured: broadcast keeps NCCL's tuning model; so does InfiniBand (no measurement)
    assert collective_time("broadcast", 2 ** 20, 2, link).algorithm == "ring"
    assert collective_time("all_gather", 2 ** 20, 16, get_interconnect("ib")).algorithm == "ring"
    assert host_issue_us("all_gather", get_interconnect("ib")) is None


@pytest.mark.slow
def test_interconnect_fit_is_the_fit_of_the_committed_device_run():
    """devices/interconnects.toml [nvlink4.measured] holds what scripts/fit/fit_parallel.py fits to
    validation/distributed (so the data and the script that made it stay together)."""
    import gzip
    import json
    import pathlib
    import sys

    from kernelcast.devices.interconnects import get_interconnect

    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "scripts" / "fit"))
    import fit_parallel

    folder = root / "validation" / "distributed"
    measured = json.loads((folder / "distributed_measured.json").read_text())
    profiles = json.load(gzip.open(folder / "distributed_profiles.json.gz", "rt"))
    fit = fit_parallel.fit_all(measured, profiles)
    stored = get_interconnect("nvlink4").measured
    assert stored.host_issue_us == pytest.approx(fit["host_issue_us"], abs=0.05)
    assert stored.call_host_us == pytest.approx(fit["call_host_us"], abs=0.05)
    for name, f in fit["collectives"].items():
        assert stored.collectives[name].busbw_bytes_per_s == pytest.approx(f.busbw_bytes_per_s, rel=1e-3)
        assert stored.collectives[name].latency_us == pytest.approx(f.intercept_us - fit["host_issue_us"], abs=0.05)
    shipped = json.loads((root / "src/kernelcast/profiles/h200_parallel.json").read_text())
    assert {k: (v["base_us"], v["per_param_us"]) for k, v in shipped["fsdp"].items()} == {
        k: (round(h.base_us, 2), round(h.per_param_us, 3)) for k, h in fit["hooks"].items()}
    assert {k: v["base_us"] for k, v in shipped["fsdp_ops"].items()} == {
        k: round(h.base_us, 2) for k, h in fit["copies"].items()}


# -- the host model of FSDP2's hooks and DDP's reducer ------------------------------------------------------------
def _marker(index, edge, name, phase="forward", python_us=0.0):
    from kernelcast.records import RANGE_BEGIN_OP, RANGE_END_OP, OpRecord

    return OpRecord(index=index, op=RANGE_BEGIN_OP if edge == "begin" else RANGE_END_OP, args={"name": name},
                    outputs=(), tags=("host",), phase=phase, python_us=python_us)


def _fsdp_unit_ops(unit, params):
    """A unit's pre-forward as the capture records it: its range, and inside it the all_gather range around the
    copy-in of the unit's `params` shards."""
    from dataclasses import replace

    return [_marker(0, "begin", f"FSDP::pre_forward ({unit})", python_us=7.0),
            _marker(1, "begin", f"FSDP::all_gather ({unit})", python_us=30.0),
            replace(_copy_in([(1024,)] * params, "float32"), index=2, python_us=40.0),
            _marker(3, "end", f"FSDP::all_gather ({unit})", python_us=5.0),
            _marker(4, "end", f"FSDP::pre_forward ({unit})", python_us=9.0)]


def test_fsdp_range_names_and_units():
    from kernelcast.predict.parallel_host import fsdp_range_kind

    assert fsdp_range_kind("FSDP::pre_forward (model.layers.0)") == ("pre_forward", "model.layers.0")
    assert fsdp_range_kind("FSDP::pre_forward") == ("pre_forward", "")  # the root's
    assert fsdp_range_kind("FSDP::backward_prefetch for blocks.6") == ("backward_prefetch", "blocks.6")
    assert fsdp_range_kind("Optimizer.step#AdamW.step") is None


def test_fsdp_hooks_are_priced_per_unit_from_its_parameters():
    from kernelcast.predict.parallel_host import HookCost, ParallelHostCosts, fsdp_hook_us, fsdp_ranges, unit_params

    ops = _fsdp_unit_ops("blocks.0", 12)
    ranges = fsdp_ranges(ops)
    assert [(r.kind, r.unit, r.begin, r.end) for r in ranges] == [("pre_forward", "blocks.0", 0, 4),
                                                                   ("all_gather", "blocks.0", 1, 3)]
    assert unit_params(ops, ranges) == {"blocks.0": 12}  # the copy-in's 12 inputs
    costs = ParallelHostCosts({"pre_forward": HookCost(100.0, 10.0), "all_gather": HookCost(200.0)})
    extra, replaced, unmodelled, units = fsdp_hook_us(ops, costs)
    assert extra == {0: 100.0 + 10.0 * 12, 1: 200.0}  # charged where each hook begins
    assert replaced == frozenset({1, 2, 3, 4})  # the captured Python inside the hooks; not the begin's own
    assert unmodelled == ()
    # a hook kind the fitted file lacks is listed, and costs nothing
    assert fsdp_hook_us(ops, ParallelHostCosts({"all_gather": HookCost(200.0)}))[2] == ("pre_forward",)


def test_ddp_reducer_copies_are_found_by_the_bucket_they_touch():
    from kernelcast.predict import _is_all_reduce
    from kernelcast.predict.parallel_host import ParallelHostCosts, ddp_reducer_us
    from kernelcast.records import COMM_STREAM, OpRecord, TensorMeta

    bucket = TensorMeta((4096,), "float32", (1,), "cuda", 9)
    grad, param_grad = (TensorMeta((1024,), "float32", (1,), "cuda", s) for s in (3, 4))
    ops = [OpRecord(0, "aten.mul.out", {"self": grad, "other": 0.5, "out": bucket}, (bucket,), phase="backward"),
           OpRecord(1, "c10d.allreduce_.default", {"tensors": (bucket,)}, (bucket,), phase="backward",
                    stream=COMM_STREAM, group_size=2),
           OpRecord(2, "aten.copy_.default", {"self": param_grad, "src": bucket}, (param_grad,), tags=("inplace",),
                    phase="backward"),
           OpRecord(3, "aten.add.Tensor", {"self": grad, "other": grad}, (grad,), phase="backward")]
    costs = ParallelHostCosts(ddp_reducer_copy_us=0.9, ddp_grad_copy_us=1.2)
    # H200 profiles: the reducer's C++ around each copy took 0.9 and 1.2 us of self time (h200_parallel.json)
    assert ddp_reducer_us(ops, costs, _is_all_reduce) == {0: 0.9, 2: 1.2}


def _compact(events, threads=("thread 1 (python3)", "thread 2 (pt_autograd_0)")):
    """A compact profile (scripts/device/validate_distributed.py compact_trace) from (table, name, ts, dur, thread,
    input_dims) rows."""
    strings, rows = [], {"cpu_ops": [], "ranges": [], "runtime": [], "gpu": [], "gpu_ranges": []}

    def intern(v):
        if v not in strings:
            strings.append(v)
        return strings.index(v)

    for table, name, ts, dur, thread, dims in events:
        if table == "cpu_ops":
            rows[table].append([intern(name), ts, dur, thread, None, intern(dims or []), intern([])])
        elif table == "ranges":
            rows[table].append([intern(name), ts, dur, thread, None])
        else:
            rows[table].append([intern(name), ts, dur, thread, 0, None])
    return {"columns": {"cpu_ops": ["name", "ts_us", "dur_us", "thread", "external_id", "input_dims", "input_types"],
                        "ranges": ["name", "ts_us", "dur_us", "thread", "external_id"],
                        "runtime": ["name", "ts_us", "dur_us", "thread", "correlation", "external_id"],
                        "gpu": [], "gpu_ranges": []},
            "strings": strings, "threads": list(threads), "steps": [[0.0, 1000.0]], **rows}


def test_hook_self_time_leaves_out_what_runs_inside():
    from kernelcast.calibrate.parallel_fit import fsdp_hook_points, range_self_times

    compact = _compact([
        ("ranges", "FSDP::pre_forward (blocks.0)", 0.0, 100.0, 0, None),
        ("ranges", "FSDP::all_gather (blocks.0)", 10.0, 50.0, 0, None),
        ("cpu_ops", "fsdp::all_gather_copy_in", 20.0, 15.0, 0, [[[8], [8], [8]], [24]]),  # 3 parameters
        ("cpu_ops", "aten::copy_", 22.0, 5.0, 0, None),  # inside the copy-in: the op's, not the range's
        ("runtime", "cudaEventRecord", 40.0, 2.0, 0, None),
        ("cpu_ops", "aten::view", 70.0, 4.0, 0, None),
    ])
    selfs = {r.name: r for r in range_self_times(compact)}
    # pre_forward: 100 - all_gather 50 - view 4 = 46; all_gather: 50 - copy-in 15 - event record 2 = 33
    assert selfs["FSDP::pre_forward (blocks.0)"].self_us == pytest.approx(46.0)
    assert selfs["FSDP::all_gather (blocks.0)"].self_us == pytest.approx(33.0)
    points = {p.kind: p for p in fsdp_hook_points("toy", compact, speed={0: 2.0})}  # the host ran 2x slow
    assert points["pre_forward"].params == 3 and points["pre_forward"].self_us == pytest.approx(23.0)


def test_thread_speed_index_and_hook_fit():
    from kernelcast.calibrate.parallel_fit import HookPoint, fit_hooks, thread_speed_index

    def views(us):  # 20 aten::view calls on the autograd thread
        return [("cpu_ops", "aten::view", 10.0 * i, us, 1, None) for i in range(20)]

    assert thread_speed_index(_compact(views(2.0)), _compact(views(1.0)))[1] == pytest.approx(2.0)
    fits = fit_hooks([HookPoint("a", "pre_forward", "u", 3, 130.0, 1), HookPoint("b", "pre_forward", "v", 9, 190.0, 1),
                      HookPoint("a", "root_pre_forward", "", 3, 100.0, 1),
                      HookPoint("b", "root_pre_forward", "", 4, 140.0, 1)])
    assert (fits["pre_forward"].base_us, fits["pre_forward"].per_param_us) == pytest.approx((100.0, 10.0))
    # the root's hooks: one unit per model, no slope told apart: the median
    assert (fits["root_pre_forward"].base_us, fits["root_pre_forward"].per_param_us) == (120.0, 0.0)


def test_fsdp_copy_ops_cost_their_fitted_call_and_collectives_their_issue():
    from kernelcast.calibrate.parallel_fit import host_issue_from_tiny_messages, tiny_message_kernel_us
    from kernelcast.predict.parallel_host import HookCost, ParallelHostCosts, fsdp_op_us

    costs = ParallelHostCosts(fsdp_ops={"fsdp.all_gather_copy_in": HookCost(88.0, 1.0)})
    ops = [_copy_in([(1024,)] * 9, "bfloat16")]
    assert fsdp_op_us(ops, costs) == {0: 88.0 + 9 * 1.0}  # per call, per shard copied
    # NCCL's ring/LL latency for a tiny all_reduce of 2 ranks: 6.6 + 2 steps * 0.6 = 7.8 us (tuning.cc)
    assert tiny_message_kernel_us("all_reduce", 2) == pytest.approx(7.8)
    rows = [{"collective": "all_reduce", "dtype": "float32", "bytes": b, "measured_us": t}
            for b, t in ((1024, 50.0), (4096, 52.0), (16384, 60.0), (2 ** 20, 90.0))]
    assert host_issue_from_tiny_messages(rows, ["all_reduce"], 2) == {"all_reduce": pytest.approx(52.0 - 7.8)}
