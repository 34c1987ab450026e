"""The host half: calibrated per-event costs, the model's Python timed during capture, streams and events,
host<->device copies, autograd engine nodes, launch-bound ops and the host-speed what-if."""

import time

import pytest
import torch

from kernelcast.capture import capture
from kernelcast.capture.cpu_speed import CpuBench
from kernelcast.capture.router import count_graph_nodes
from kernelcast.costs import cost_of
from kernelcast.predict import predict_capture, step_verdict
from kernelcast.predict.host import HostModel
from kernelcast.records import ENGINE_NODES_OP, OpRecord

from helpers import contiguous, op


def _case(median_us, min_us=None):
    return {"median_us": median_us, "min_us": median_us if min_us is None else min_us}


SECTION = {
    "add (1 kernel)": _case(10.0), "view (no kernel)": _case(1.0), "add, input requires grad (1 kernel)": _case(12.0),
    "mm 16x16 (1 kernel)": _case(13.0), "linear functional (1 kernel)": _case(18.0),
    "linear module (1 kernel)": _case(21.0), "item (sync + memcpy)": _case(12.0), "cpu add (host tensors)": _case(5.0),
    "backward node": _case(20.0), "foreach add_ x8": _case(9.0), "foreach add_ x256": _case(60.0),
    "foreach_tensors": [8, 256], "python bench": _case(9000.0, min_us=8000.0),
}


def test_host_model_derives_each_cost_from_the_calibration_cases():
    model = HostModel.from_profile(SECTION, "test host", CpuBench(python_us=4000.0))
    assert model.kernel_op_us == 10.0
    assert model.grad_extra_us == 2.0  # 12 - 10
    assert model.gemm_extra_us == 3.0  # 13 - 10
    assert model.module_call_us == 3.0  # 21 - 18
    assert model.sync_return_us == 1.0  # item 12 = view 1 + launch 10 + return 1
    assert model.backward_node_us == 10.0  # 20 - 10
    assert model.foreach_per_tensor_us == pytest.approx(51.0 / 248)  # (60 - 9) / (256 - 8)
    assert model.foreach_op_us == pytest.approx(9.0 - 8 * 51.0 / 248)
    assert model.python_scale == 2.0  # fastest runs: 8000 us on the target host, 4000 here


def test_dispatch_costs_by_kind_of_op():
    model = HostModel.from_profile(SECTION, "test host")
    x = contiguous((1024,))
    add = op("aten.add.Tensor", {"self": x, "other": x}, [x], tags=("pointwise",))
    assert model.dispatch_us(add, cost_of(add)) == 10.0
    grad_add = op("aten.add.Tensor", {"self": x, "other": x}, [x], tags=("pointwise", "grad"))
    assert model.dispatch_us(grad_add, cost_of(grad_add)) == 12.0
    view = op("aten.view.default", {"self": x, "size": (32, 32)}, [contiguous((32, 32))], tags=("view",))
    node_view = op("aten.view.default", {"self": x, "size": (32, 32)}, [contiguous((32, 32))], tags=("view", "node"))
    assert model.dispatch_us(view, cost_of(view)) == 1.0
    assert model.dispatch_us(node_view, cost_of(node_view)) == 11.0  # the engine's per-node cost, op or no kernel
    foreach = op("aten._foreach_add_.Scalar", {"self": (x,) * 100, "scalar": 1.0}, [])
    assert model.dispatch_us(foreach, cost_of(foreach)) == pytest.approx(model.foreach_op_us + 100 * 51.0 / 248)
    engine = OpRecord(0, ENGINE_NODES_OP, {"nodes": 7}, (), tags=("host",), phase="backward")
    assert model.dispatch_us(engine, None) == 70.0  # 7 nodes x 10 us


def test_python_between_ops_is_timed_and_torch_calls_are_not():
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(1024, device="cuda")
        y = x * 2
        deadline = time.thread_time() + 0.03  # 30 ms of model Python (CPU time, the capture's clock) between ops
        while time.thread_time() < deadline:
            pass
        z = y + 1
        for _ in range(50):  # torch calls only: the capture's own time, not the model's
            z = z * 1.0
    ops = cap.capture.ops
    busy = next(o for o in ops if o.op == "aten.add.Tensor")
    assert busy.python_us >= 25_000
    chain = [o.python_us for o in ops[ops.index(busy) + 1:]]
    assert sum(chain) < 0.2 * busy.python_us


def test_streams_and_events_become_markers_and_overlap():
    with capture("h200") as cap:
        with cap.paused():
            a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
            side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        x = a @ a
        with torch.cuda.stream(side):
            y = b @ b
        torch.cuda.current_stream().wait_stream(side)
        (x + y).sum()
    ops = cap.capture.ops
    mms = [o for o in ops if o.op == "aten.mm.default"]
    assert [o.stream for o in mms] == [0, side.stream_id]
    markers = [(o.op, o.stream) for o in ops if o.op.startswith("host.") and "event" in o.op]
    assert markers == [("host.record_event", 0), ("host.wait_event", side.stream_id),
                       ("host.record_event", side.stream_id), ("host.wait_event", 0)]
    pred = predict_capture(cap.capture, "h200")
    mm_us = [p.time_us for p in pred.ops if p.op == "aten.mm.default"]
    # The two products run side by side on the GPU. Compared on GPU spans, not the step time: the step also
    # holds the model Python timed during capture, which depends on how fast this machine is.
    mm_spans = [s for s in pred.timeline.spans
                if s.gpu_start_us is not None and abs((s.gpu_end_us - s.gpu_start_us) - mm_us[0]) < 1e-6]
    assert len(mm_spans) == 2 and mm_spans[0].stream != mm_spans[1].stream
    first, second = sorted(mm_spans, key=lambda s: s.gpu_start_us)
    assert second.gpu_start_us < first.gpu_end_us
    gpu_spans = [s for s in pred.timeline.spans if s.gpu_start_us is not None]
    gpu_window_us = max(s.gpu_end_us for s in gpu_spans) - min(s.gpu_start_us for s in gpu_spans)
    assert gpu_window_us < pred.gpu_time_us


def test_host_copies_sync_unless_pinned_and_non_blocking():
    with capture("h200") as cap:
        with cap.paused():
            pageable = torch.randn(1 << 20)
            pinned = torch.randn(1 << 20).pin_memory()
        pageable.to("cuda")
        pinned.to("cuda", non_blocking=True)
        pinned.to("cuda")
    copies = [o for o in cap.capture.ops if o.op == "aten._to_copy.default"]
    assert [o.sync for o in copies] == ["h2d pageable", None, "h2d blocking"]
    kinds = [cost_of(o).kind for o in copies]
    assert kinds == ["h2d_pageable", "h2d_pinned", "h2d_pinned"]
    pred = predict_capture(cap.capture, "h200")
    copy_us = [p.time_us for p in pred.ops if p.op == "aten._to_copy.default"]
    assert copy_us[0] > copy_us[1]  # pageable memory is staged: slower (calibrated H200 host link)
    assert copy_us[1] > 4 * 1024 * 1024 / 80e9 * 1e6  # 4 MiB over a link well under 80 GB/s


def test_a_copy_into_a_pageable_buffer_the_step_holds_is_priced_apart_from_one_that_allocates():
    """Shared case d2h_nonblocking_pageable: eight 4096 x 4096 fp32 matmul + tanh, then 64 MiB copied into a
    reused pageable host buffer; the H200 measured the copy at 4.3 ms and the step at 26.7 ms. `.to("cpu")` into
    a fresh pageable tensor pages the memory in as it copies (1.6 GB/s on the H200 host: 40 ms); a reused
    buffer's pages are mapped already (14.7 GB/s)."""
    with capture("h200") as cap:
        with cap.paused():
            buf = torch.empty(4096, 4096)
            w = torch.randn(4096, 4096, device="cuda")
            x = torch.randn(4096, 4096, device="cuda")
        y = x
        for _ in range(8):
            y = torch.tanh(y @ w)
        buf.copy_(y, non_blocking=True)
        y.to("cpu")
    into, fresh = [o for o in cap.capture.ops if o.op in ("aten.copy_.default", "aten._to_copy.default")]
    assert cost_of(into).kind == "d2h_pageable_into" and cost_of(fresh).kind == "d2h_pageable"
    pred = predict_capture(cap.capture, "h200")
    into_us, fresh_us = (next(p.time_us for p in pred.ops if p.index == o.index) for o in (into, fresh))
    assert into_us == pytest.approx(4300, rel=0.15)
    assert fresh_us > 4 * into_us


def _copy_then_matmul(pinned: bool):
    with capture("h200") as cap:
        with cap.paused():
            batch = torch.randn(4096, 4096)
            batch = batch.pin_memory() if pinned else batch
            w = torch.randn(4096, 4096, device="cuda")
        (batch.to("cuda", non_blocking=pinned) @ w).sum()
    return predict_capture(cap.capture, "h200")


@pytest.mark.slow
def test_pageable_copy_saving_prices_the_pinned_copy_its_advice_asks_for():
    pageable, pinned = _copy_then_matmul(False), _copy_then_matmul(True)
    (group,) = pageable.sync_groups
    assert group.kind == "h2d pageable" and "pin" in group.advice
    # following the advice gives the pinned step: the saving is the difference, not only the host's wait
    assert group.saving_us == pytest.approx(pageable.step_time_us - pinned.step_time_us, rel=0.02)


def test_every_autograd_node_pays_the_engine_once():
    with capture("h200") as cap:
        with cap.paused():
            model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda()
            x = torch.randn(8, 64, device="cuda")
        loss = model(x).sum()
        nodes = count_graph_nodes((loss,))
        loss.backward()
    # Sum, 2 x (Addmm, T, AccumulateGrad x 2), Relu: 10 nodes. Each is charged once: at its first op, or
    # through the marker for nodes that dispatch none.
    assert nodes == 10
    backward = [o for o in cap.capture.ops if o.phase == "backward"]
    engine = [o for o in backward if o.op == ENGINE_NODES_OP]
    assert len(engine) == 1
    assert sum("node" in o.tags for o in backward) + engine[0].args["nodes"] == nodes


def test_tiny_ops_are_launch_bound_and_host_speed_moves_the_step():
    with capture("h200") as cap:
        with cap.paused():
            x = torch.randn(256, device="cuda")
        for _ in range(100):
            x = x * 1.0001
    pred = predict_capture(cap.capture, "h200")
    assert pred.bound == "host"
    assert pred.launch_bound_ops == 100
    slower = dict(pred.step_time_by_host_speed)[2.0]
    assert slower == pytest.approx(2 * pred.step_time_us, rel=0.05)  # host-bound: the step follows the CPU


def test_verdict_has_a_mixed_band_between_gpu_and_host_bound():
    assert step_verdict(gpu_time_us=90.0, step_time_us=100.0) == "gpu"
    assert step_verdict(gpu_time_us=70.0, step_time_us=100.0) == "mixed"
    assert step_verdict(gpu_time_us=50.0, step_time_us=100.0) == "host"
    assert step_verdict(gpu_time_us=250.0, step_time_us=100.0) == "gpu"  # two streams busy at once


def test_a_calibrated_library_call_is_priced_at_its_case_not_as_a_launch():
    from kernelcast.predict.host import LIBRARY_CASES

    x, w = contiguous((1, 16, 8, 8)), contiguous((16, 16, 3, 3))
    conv = op("aten.convolution.default", {"input": x, "weight": w, "bias": None, "stride": (1, 1),
                                           "padding": (1, 1), "dilation": (1, 1), "transposed": False,
                                           "output_padding": (0, 0), "groups": 1}, [x])
    launch_priced = HostModel.from_profile(SECTION, "test host")
    assert launch_priced.dispatch_us(conv, cost_of(conv)) == 10.0  # no case: one launch, as an add
    section = {**SECTION, LIBRARY_CASES["convolution"]: _case(45.0)}
    assert HostModel.from_profile(section, "test host").dispatch_us(conv, cost_of(conv)) == 45.0


def test_a_cudnn_call_pays_for_each_kernel_it_launches_beyond_its_case():
    """cuDNN launches an RNN's per-step kernels, and a convolution's layout transforms and memsets, from the host
    inside one op: past the case's own items, each costs the probe's per-item host time
    (scripts/device/probe_library_launches.py; scripts/device/probe_conv_host.py for the convolutions)."""
    from kernelcast.costs import Cost
    from kernelcast.predict.host import LIBRARY_CASE_ITEMS, LIBRARY_CASES, LIBRARY_LAUNCH_CASE

    section = {**SECTION, LIBRARY_CASES["_cudnn_rnn"]: _case(60.0), LIBRARY_LAUNCH_CASE: _case(7.0),
               LIBRARY_CASES["convolution"]: _case(45.0)}
    model = HostModel.from_profile(section, "test host")
    rnn = op("aten._cudnn_rnn.default", {}, [contiguous((4, 1, 16))])
    items = LIBRARY_CASE_ITEMS["_cudnn_rnn"]
    assert model.dispatch_us(rnn, Cost(kernels=items, kind="cudnn_rnn")) == 60.0
    assert model.dispatch_us(rnn, Cost(kernels=items + 100, kind="cudnn_rnn")) == 60.0 + 100 * 7.0
    conv = op("aten.convolution.default", {}, [contiguous((1, 16, 8, 8))])
    assert model.dispatch_us(conv, Cost(kernels=LIBRARY_CASE_ITEMS["convolution"], kind="conv")) == 45.0
    assert model.dispatch_us(conv, Cost(kernels=5, kind="conv")) == 45.0 + (5 - LIBRARY_CASE_ITEMS["convolution"]) * 7.0


def test_the_step_is_given_over_the_hosts_own_calibration_runs():
    """Issue 33: the same step measured in separate processes moves; the profile's own runs say how much."""
    from kernelcast.predict.host import run_speed_range
    from kernelcast.profiles import load_profile

    section = load_profile("h200").data["host"]
    slow, fast = run_speed_range(section)
    # the H200's 18 runs: each run's costs over their medians span 0.75-1.82; the 10th-90th percentile
    assert 0.85 <= slow < 1.0 < fast <= 1.5
    assert run_speed_range({"runs": ["one"], "add (1 kernel)": {"median_us": 8.0, "per_run_median_us": [8.0]}}) \
        == (1.0, 1.0)


def _decode_capture(growing: bool):
    """A one-token attention step over a key/value cache that grows by a token each call (a DynamicCache) or
    stays the same (a static cache), captured as kernelcast captures a workload (a warm-up step first)."""
    from kernelcast.capture import capture_workload

    def build():
        cache = [torch.randn(4, 12, 256, 64, device="cuda", dtype=torch.bfloat16)]
        q = torch.randn(4, 12, 1, 64, device="cuda", dtype=torch.bfloat16)

        def step(q):
            if growing:
                cache[0] = torch.cat([cache[0], cache[0][:, :, -1:]], dim=2)
            k = cache[0]
            return torch.nn.functional.scaled_dot_product_attention(q, k, k)

        return step, (q,)

    return capture_workload(build, "h200")


def test_cudnn_attention_at_a_new_shape_every_step_pays_a_graph_build():
    """PyTorch builds a cuDNN graph per attention shape (aten/src/ATen/native/cudnn/MHA.cpp): a cache growing every
    step makes each step's shape new, and the build (predict/host.py CUDNN_GRAPH_BUILD_US) is priced and named; the
    same step over a cache that does not grow reruns the warm-up's shape and pays nothing."""
    from kernelcast.predict.host import CUDNN_GRAPH_BUILD_US
    from kernelcast.records import NEW_CUDNN_GRAPH_TAG

    growing, static = _decode_capture(True), _decode_capture(False)
    tagged = [o for o in growing.ops if NEW_CUDNN_GRAPH_TAG in o.tags]
    assert [o.op for o in tagged] == ["aten._scaled_dot_product_cudnn_attention.default"]
    assert not any(NEW_CUDNN_GRAPH_TAG in o.tags for o in static.ops)
    slow, fast = predict_capture(growing, "h200"), predict_capture(static, "h200")
    assert slow.host_time_us - fast.host_time_us > 0.9 * CUDNN_GRAPH_BUILD_US
    assert any("builds a cuDNN graph" in n for n in slow.notes)
    assert not any("builds a cuDNN graph" in n for n in fast.notes)
