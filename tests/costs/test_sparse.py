"""Sparse COO gradients (nn.Embedding / nn.EmbeddingBag with sparse=True) captured as CUDA runs them.

Expected work items come from the H200 (torch 2.11, CUDA 13): the op-by-op probe
validation/probes/sparse_probe.json (`PYTHONPATH=src python3 scripts/device/probe_sparse.py --out ...`) and the zoo's
sparse recommenders in validation/zoo_measured.json.gz (sparse_embedding_sgd, sparse_bag_adagrad,
sparse_embedding_sparse_adam, examples/zoo/recsys_moe_graph.py).
"""

import pytest
import torch
import torch.nn as nn

from helpers import contiguous, op
from kernelcast.capture import capture_workload
from kernelcast.costs import cost_of
from kernelcast.costs.sparse import coalesce_kernels, merge_passes

ROWS = 50_000


def _kernels(cap, name: str) -> list[int]:
    """Work items of each recorded op of this name (children of decomposed ops counted, parents not)."""
    return [cost_of(o).kernels for o in cap.ops if o.op == name and "decomposed" not in o.tags]


def _descendants(cap, parent: int) -> list:
    """Ops recorded under the decomposed op at `parent`, at any depth, that launch work themselves."""
    def under(i):
        while i >= 0:
            if i == parent:
                return True
            i = cap.ops[i].parent
        return False

    return [o for o in cap.ops if o.parent >= 0 and under(o.parent) and "decomposed" not in o.tags]


def _embedding_step(optimizer: str):
    def build():
        torch.manual_seed(0)
        emb = nn.Embedding(ROWS, 32, sparse=True).cuda()
        opt = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1), "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
               "sparse_adam": lambda p: torch.optim.SparseAdam(p, lr=1e-3)}[optimizer](list(emb.parameters()))
        ids = torch.randint(0, ROWS, (512, 8), device="cuda")

        def step(ids):
            emb(ids).sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step, (ids,)
    return build


def test_sgd_adds_the_sparse_gradient_with_one_index_add_and_no_clone():
    cap = capture_workload(_embedding_step("sgd"), "h200")
    # zoo sparse_embedding_sgd on the H200: no clone (AccumulateGrad steals the fresh gradient), and the SGD
    # update `param.add_(grad, alpha=-lr)` ran one indexFuncLargeIndex (add_ -> index_add_)
    assert not [o for o in cap.ops if o.op == "aten.copy_.default" and o.phase == "backward"
                and o.args["self"].shape == (ROWS, 32)]
    assert _kernels(cap, "aten.index_add_.default") == [1]
    adds = [o for o in cap.ops if o.op == "aten.add_.Tensor" and o.phase == "optimizer"]
    assert adds and all("decomposed" in o.tags for o in adds)
    assert not [o.op for o in cap.ops if cost_of(o) is None and o.args and "decomposed" not in o.tags
                and not o.op.startswith("host.")]


@pytest.mark.slow
def test_adagrad_and_sparse_adam_capture_with_the_coalesce_sync():
    for optimizer, masks, index_adds in (("adagrad", 1, 2), ("sparse_adam", 2, 3)):
        cap = capture_workload(_embedding_step(optimizer), "h200")
        coalesces = [o for o in cap.ops if o.op == "aten._coalesce.default"]
        # thrust's unique_by_key reads the count back: a sync point (H200: a DtoH memcpy and
        # cudaStreamSynchronize calls under coalesce)
        assert [o.sync for o in coalesces] == ["coalesce"]
        # 4096 indices, all distinct under the value hints' spread: 4096 rows out, 1 merge pass, 10 items (probe)
        assert coalesces[0].outputs[0].shape == (ROWS, 32)
        assert cost_of(coalesces[0]).kernels == 10
        # dense.sparse_mask(grad) -> ones, index (gather), clone of the indices, mul: 4 (zoo sparse_bag_adagrad)
        masked = [i for i, o in enumerate(cap.ops) if o.op == "aten.sparse_mask.default"]
        assert len(masked) == masks
        assert [sum(cost_of(o).kernels for o in _descendants(cap, i)) for i in masked] == [4] * masks
        assert len(_kernels(cap, "aten.index_add_.default")) == index_adds


def test_coalesce_work_items_follow_the_merge_sort_passes():
    # H200 probe: 100 -> 8, 4096 -> 10, 32768 -> 16, 262144 -> 22, 1048576 -> 26 work items
    assert [coalesce_kernels(n, 1, True) for n in (100, 4096, 32768, 262144, 1 << 20)] == [8, 10, 16, 22, 26]
    assert [merge_passes(n) for n in (2048, 2049, 16384, 20480)] == [0, 1, 3, 4]
    assert coalesce_kernels(1, 1, True) == 0  # one row is coalesced already: _coalesce is not called
    record = op("aten._coalesce.default", {"self": contiguous((ROWS, 16)), "self_indices": contiguous((1, 16384),
                "int64"), "self_values": contiguous((16384, 16))}, [contiguous((ROWS, 16))])
    assert cost_of(record).kernels == 14  # zoo sparse_bag_adagrad: 1024 bags x 16 indices, 14 items each


@pytest.mark.slow
def test_embedding_bag_sparse_backward_is_recorded_op_by_op():
    def build(mode):
        def inner():
            bag = nn.EmbeddingBag(ROWS, 16, mode=mode, sparse=True).cuda()
            ids = torch.randint(0, ROWS, (256 * 8,), device="cuda")
            offsets = torch.arange(0, 256 * 8, 8, device="cuda")

            def step(ids, offsets):
                bag.weight.grad = None  # a second sparse gradient would be added to the first (not modelled)
                bag(ids, offsets).sum().backward()

            return step, (ids, offsets)
        return inner

    # H200 probe (embedding_bag_sparse_backward): sum -> one index_select; mean -> 6 work items (index_select,
    # the bag sizes' copy to float, fill, div, their gather per index, mul)
    for mode, items in (("sum", 1), ("mean", 6)):
        cap = capture_workload(build(mode), "h200")
        parent = next(i for i, o in enumerate(cap.ops) if o.op == "aten._embedding_bag_backward.default")
        assert "decomposed" in cap.ops[parent].tags
        children = _descendants(cap, parent)
        assert sum(cost_of(o).kernels for o in children) == items, mode
        assert all(cost_of(o) is not None for o in children)


def test_a_clone_outside_accumulate_grad_copies_indices_and_values():
    def build():
        emb = nn.Embedding(ROWS, 8, sparse=True).cuda()
        ids = torch.randint(0, ROWS, (1000,), device="cuda")

        def step(ids):
            emb(ids).sum().backward()
            return emb.weight.grad.clone()

        return step, (ids,)

    cap = capture_workload(build, "h200")
    clones = [i for i, o in enumerate(cap.ops) if o.op == "aten.clone.default" and o.phase == "post-backward"
              and "decomposed" in o.tags and o.args["self"].stride == (0, 0)]
    assert len(clones) == 1
    copies = [o for o in _descendants(cap, clones[0]) if cost_of(o).kernels]
    assert len(copies) == 2  # H200 probe sparse_clone: two DtoD copies (indices, values)


def test_dense_plus_sparse_out_of_place_copies_then_adds():
    def build():
        dense = torch.zeros(ROWS, 8, device="cuda")
        i = torch.randint(0, ROWS, (1, 300), device="cuda")
        v = torch.randn(300, 8, device="cuda")

        def step(dense, i, v):
            return dense + torch.sparse_coo_tensor(i, v, (ROWS, 8))

        return step, (dense, i, v)

    cap = capture_workload(build, "h200")
    parent = next(i for i, o in enumerate(cap.ops) if o.op == "aten.add.Tensor")
    children = [o for o in _descendants(cap, parent) if cost_of(o).kernels]
    # H200 probe add_out_of_place: a DtoD copy of the dense tensor, then indexFuncLargeIndex
    assert [o.op for o in children] == ["aten.copy_.default", "aten.index_add_.default"]


def test_coalesce_and_embedding_bag_times_from_the_shipped_fits():
    """The profile's sparse fits (calibrate/sparse_fit.py on calibrate's sparse_grid) against H200 measurements
    they were not fitted on: scripts/device/probe_sparse.py's coalesce of 32768 rows x 16 fp32 (kernels summed: 66.2 µs)
    and zoo sparse_bag_adagrad's EmbeddingBag forward (16384 indices in 1024 bags of 64 fp32: 6.7 µs a table)."""
    from kernelcast.predict.sparse_time import coalesce_us, embedding_bag_bytes, embedding_bag_us
    from kernelcast.profiles import load_profile

    fits = load_profile("h200").data["timings"]["sparse"]
    assert abs(coalesce_us(fits["coalesce"], 32768, 32768 * 16 * 4) / 66.2 - 1) < 0.15
    bag_us = embedding_bag_us(fits["embedding_bag"], 16384, embedding_bag_bytes(16384, 1024, 64, 4))
    assert abs(bag_us / 6.7 - 1) < 0.35


def test_sparse_fits_recover_the_models_they_are_fitted_with():
    """calibrate/sparse_fit.py on cases made from known models: the coefficients and rates come back."""
    from kernelcast.calibrate import sparse_fit
    from kernelcast.predict.sparse_time import coalesce_us, embedding_bag_bytes, embedding_bag_us

    truth = {"coefficients": [20.0, 11.0, 1e-4, 1.2e-5, 3e-7]}
    cases = [{"kind": "coalesce", "nnz": n, "dim": d, "rows": 5000, "dtype": "float32",
              "device_us": coalesce_us(truth, n, n * d * 4)}
             for n in (2, 48, 1500, 6000, 24000, 96000, 384000, 1_500_000) for d in (1, 32, 256)]
    bag_truth = {"floor_us": 3.5, "us_per_index": 8e-5, "bytes_per_us": 1.6e6}
    cases += [{"kind": "embedding_bag_fwd", "batch": b, "bag": k, "dim": d, "mode": "sum",
               "device_us": embedding_bag_us(bag_truth, b * k, embedding_bag_bytes(b * k, b, d, 4))}
              for b, k in ((64, 4), (512, 10), (2048, 30), (8192, 8)) for d in (1, 4, 8, 16, 384)]
    fit = sparse_fit.fit(cases)
    assert all(abs(a / b - 1) < 1e-6 for a, b in zip(fit["coalesce"]["coefficients"], truth["coefficients"]))
    assert fit["coalesce"]["held_out_by_nnz"]["worst_error"] < 1e-6
    bag = fit["embedding_bag"]
    assert (bag["floor_us"], round(bag["us_per_index"] * 1e6), round(bag["bytes_per_us"] / 1e6, 2)) == (3.5, 80, 1.6)


def test_a_second_sparse_gradient_is_concatenated_not_added_densely():
    """A backward without zeroing the gradients: AccumulateGrad adds the new sparse gradient to the old one
    (add_out_sparse_cuda: the indices and the values concatenated, two cat kernels), not the table densely."""
    def build():
        emb = nn.Embedding(ROWS, 16, sparse=True).cuda()
        ids = torch.randint(0, ROWS, (2048,), device="cuda")

        def step(ids):
            emb(ids).sum().backward()

        return step, (ids,)

    cap = capture_workload(build, "h200")
    adds = [i for i, o in enumerate(cap.ops) if o.op == "aten.add_.Tensor" and o.phase == "backward"
            and "self_indices" in o.args]
    assert adds and all("decomposed" in cap.ops[i].tags for i in adds)
    assert [o.op for o in _descendants(cap, adds[0]) if cost_of(o).kernels] == ["aten.cat.default"] * 2
    assert any("without zeroing" in n for n in cap.notes)


def test_per_sample_weights_backward_reads_the_rows_it_touches():
    record = op("aten._embedding_bag_per_sample_weights_backward.default",
                {"grad": contiguous((1024, 64)), "weight": contiguous((750_000, 64)),
                 "indices": contiguous((8192,), "int64"), "offsets": contiguous((1024,), "int64"),
                 "offset2bag": contiguous((8192,), "int64"), "mode": 0}, [contiguous((8192,))])
    # 8192 rows of 64 floats, the 1024 x 64 gradient and the indices: 2.4 MB, not the 192 MB table
    assert cost_of(record).bytes_read == 8192 * 64 * 4 + 1024 * 64 * 4 + 8192 * 8


def test_a_gcn_layer_sparse_matmul_captures_forward_and_backward():
    """torch.sparse.mm(adj, x) of a coalesced COO adjacency (a GCN layer): FakeTensor has no sparse addmm, and
    every such step failed to capture. Recorded as SparseCUDATensorMath.cu runs it (capture/sparse.py): the row
    indices cast and converted to CSR offsets, the column indices cast, the output zeroed and made column-major,
    cuSPARSE's SpMM, the copy back. Its backward to x is adj.t() @ grad: the transpose clones and swaps the index
    rows (uncoalesced), so the backward's SpMM follows a coalesce, a sync point. Kernel counts from the source;
    scripts/device/probe_user_kinds.py measures them."""
    def build():
        ids = torch.randint(0, 2000, (2, 8000), device="cuda")
        adj = torch.sparse_coo_tensor(ids, torch.rand(8000, device="cuda"), (2000, 2000)).coalesce()
        x = torch.randn(2000, 32, device="cuda", requires_grad=True)
        return (lambda x: torch.sparse.mm(adj, x).sum().backward()), (x,)

    cap = capture_workload(build, "h200")
    spmm = [o for o in cap.ops if o.op == "kernelcast.cusparse_spmm_.default"]
    assert len(spmm) == 2 and [o.phase for o in spmm] == ["forward", "backward"]
    assert cost_of(spmm[0]).flops == 2 * 8000 * 32
    assert [o.sync for o in cap.ops if o.sync] == ["coalesce"]  # the transposed adjacency's, in backward
    assert _kernels(cap, "aten._convert_indices_from_coo_to_csr.default") == [1, 1]
    assert all(cost_of(o).kernels is not None for o in cap.ops)
    addmm = next(i for i, o in enumerate(cap.ops) if o.op == "aten._sparse_addmm.default")
    # after _sparse_mm's zero fill: two casts, CSR offsets, zero_, the column-major copy, SpMM's three kernels
    # (partition, scaling, product), the copy back: with the fill, the 10 work items an H100 ran for every graph
    # of scripts/device/probe_user_kinds.py (validation/h100/user_kinds_dec08)
    assert sum(cost_of(o).kernels for o in _descendants(cap, addmm)) == 9
    backward_mm = next(i for i, o in enumerate(cap.ops) if o.op == "aten.mm.default")
    assert cap.ops[backward_mm].phase == "backward" and len(_descendants(cap, backward_mm)) >= 8


def test_sparse_conversions_keep_their_rows_and_half_spmm_fails_as_on_cuda():
    """FakeTensor's sparse conversions came back empty (nnz 0), so whatever followed priced nothing: `.half()` /
    `.to(dtype)` copy the indices and values (TensorConversions.cpp), to_dense is a zero fill and dense += sparse,
    a sparse tensor times a number copies its indices and multiplies its values. SpMM has no half kernel on CUDA
    (AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES): the capture raises what the GPU raises."""
    from kernelcast.capture import capture
    from kernelcast.errors import CaptureError

    with capture("h200") as block:
        with block.paused():
            ids = torch.randint(0, 100, (2, 300), device="cuda")
            adj = torch.sparse_coo_tensor(ids, torch.rand(300, device="cuda"), (100, 100)).coalesce()
        half, scaled, dense = adj.half(), adj * 2.0, adj.to_dense()
        assert half._nnz() == scaled._nnz() == 300 and half.dtype == torch.float16 and dense.shape == (100, 100)
        assert half.is_coalesced() and scaled.is_coalesced()
        with pytest.raises(RuntimeError, match="addmm_sparse_cuda. not implemented for 'Half'"):
            torch.sparse.mm(half, torch.randn(100, 8, device="cuda", dtype=torch.float16))
        with block.paused():
            rows = torch.randn(8, 100, device="cuda")
        assert (rows @ adj).shape == (8, 100)  # dense @ sparse: (adj.t() @ rows.t()).t(), a transpose's coalesce
        with pytest.raises(CaptureError, match="_sparse_softmax.default on a sparse COO tensor is not modelled"):
            torch.sparse.softmax(adj, 1)
    copies = [o for o in block.capture.ops if o.op == "aten._to_copy.default" and "decomposed" not in o.tags]
    assert [o.outputs[0].dtype for o in copies][:2] == ["int64", "float16"]  # then SpMM's int32 index casts
    assert any(o.op == "aten.index_add_.default" for o in block.capture.ops)  # to_dense's dense += sparse
    assert [o.sync for o in block.capture.ops if o.sync] == ["coalesce"]  # dense @ sparse's transposed matrix


def test_sparse_addmm_follows_cuda_for_beta_bias_empty_and_strided_operands():
    """s_addmm_out_sparse_dense_cuda's branches: beta != 0 copies `self` (a 1-D bias expanded) where beta 0 zeroes,
    and SpMM then reads the output too; an empty matrix is one mul; a dense operand with gaps is copied contiguous
    first (SparseBlasLegacy.cpp); a size mismatch raises as CUDA does."""
    from kernelcast.capture import capture

    with capture("h200") as block:
        with block.paused():
            ids = torch.randint(0, 64, (2, 200), device="cuda")
            adj = torch.sparse_coo_tensor(ids, torch.rand(200, device="cuda"), (64, 64)).coalesce()
            empty = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long, device="cuda"),
                                            torch.zeros(0, device="cuda"), (64, 64))
            x, bias = torch.randn(64, 32, device="cuda"), torch.randn(32, device="cuda")
        torch.addmm(bias, adj, x, beta=0.5)
        torch.sparse.mm(empty, x)
        torch.sparse.mm(adj, x[:, :16])  # a row stride of 32 over 16 columns: not packed
        with pytest.raises(RuntimeError, match="Expected dim 0 size 64, got 32"):
            torch.sparse.mm(adj, x[:32])
    spmm = [o for o in block.capture.ops if o.op == "kernelcast.cusparse_spmm_.default"]
    assert [o.args["beta"] for o in spmm] == [1.0, 0.0]
    nnz = spmm[0].args["values"].numel
    # the product: values, column indices, row offsets, one dense row per value, the output it adds into; the
    # partition: the row offsets; the scaling by beta 0.5: the output
    assert cost_of(spmm[0]).bytes_read == (nnz * 4 + nnz * 4 + 65 * 4 + nnz * 32 * 4 + 64 * 32 * 4) + 65 * 4 \
        + 64 * 32 * 4
    assert any(o.op == "aten.mul.out" for o in block.capture.ops)  # the empty matrix
    assert spmm[1].args["dense"].stride == (16, 1)  # the strided slice was copied before SpMM


def test_sparse_transpose_edge_cases_match_torch():
    """t() of a 1-D COO tensor is a clone; transposing a dense dim of a hybrid tensor raises."""
    from kernelcast.capture import capture

    with capture("h200"):
        vector = torch.sparse_coo_tensor(torch.tensor([[1, 3]], device="cuda"), torch.ones(2, device="cuda"), (5,))
        assert vector.t()._nnz() == 2
        hybrid = torch.sparse_coo_tensor(torch.tensor([[0, 2]], device="cuda"), torch.ones(2, 4, device="cuda"), (3, 4))
        with pytest.raises(RuntimeError, match="transposed dimensions must be sparse"):
            hybrid.transpose(0, 1)


def test_a_transposed_coalesced_matrix_coalesces_without_an_assumption():
    """A transpose permutes a coalesced tensor's coordinates and cannot make two equal: the backward's coalesce of
    adj.t() keeps every row, with its sync point but without the "assumed distinct" note."""
    from kernelcast.capture import capture

    with capture("h200") as block:
        with block.paused():
            ids = torch.stack([torch.arange(64, device="cuda"), torch.arange(64, device="cuda").flip(0)])
            adj = torch.sparse_coo_tensor(ids, torch.rand(64, device="cuda"), (64, 64), is_coalesced=True)
            x = torch.randn(64, 8, device="cuda", requires_grad=True)
        torch.sparse.mm(adj, x).sum().backward()
    assert [o.sync for o in block.capture.ops if o.sync] == ["coalesce"]
    assert not [n for n in block.capture.notes if n.startswith("coalesce of a sparse tensor")]


def _sparse_mm_predicted(nodes: int, edges: int, features: int):
    """torch.sparse.mm of a coalesced random graph and a dense (nodes x features) matrix, as
    scripts/device/probe_user_kinds.py ran it, captured and predicted for the H100."""
    from kernelcast.capture import capture

    with capture("h100-sxm") as block:
        with block.paused():
            torch.manual_seed(0)
            ids = torch.randint(0, nodes, (2, edges), device="cuda")
            adj = torch.sparse_coo_tensor(ids, torch.rand(edges, device="cuda"), (nodes, nodes)).coalesce()
            x = torch.randn(nodes, features, device="cuda")
        torch.sparse.mm(adj, x)
    return block.predict("h100-sxm")


def test_spmm_kernel_times_follow_the_h100_probe():
    """cuSPARSE SpMM's three kernels priced by predict/sparse_time.py's lines against what an H100 measured for a
    graph of 20000 nodes, 200000 edges and 64 features (validation/h100/user_kinds_dec08, scripts/device/
    probe_user_kinds.py, two runs: partition 4.10 / 4.00 µs, scaling 2.72 / 2.72, product 67.7 / 68.5), predicted
    for the H100 from the H200 profile: within 10% of their sum, 74.6-75.2 µs. The product alone was priced as an
    index_select's gather before: about half that."""
    pred = _sparse_mm_predicted(20000, 200000, 64)
    spmm = [o for o in pred.ops if o.op == "kernelcast.cusparse_spmm_.default"]
    assert len(spmm) == 1 and spmm[0].kernels == 3
    assert 0.9 * 75.2 <= spmm[0].time_us <= 1.1 * 74.6


def test_a_sparse_mm_call_costs_the_host_what_cusparse_takes():
    """cuSPARSE's SpMM makes its descriptors and workspace on every call: torch.sparse.mm of a 2708-node graph (16
    features) ran 109, 159 and 174 µs a call on H100 hosts in three processes, host-bound (validation/h100/
    user_kinds_dec08, _dec08b), where its ops alone are priced 47 µs (predict/host.py LIBRARY_CALL_EXTRA_US). The
    step is host-bound and within 25% of the median, 159 µs."""
    pred = _sparse_mm_predicted(2708, 10556, 16)
    assert pred.bound == "host" and 0.75 * 159 <= pred.step_time_us <= 1.25 * 159
