"""Exact FLOP and byte formulas, with the arithmetic beside each number, and invariants."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from helpers import contiguous, op, transposed
from kernelcast.records import TensorMeta
from kernelcast.costs import DEFAULT_CONTEXT, cost_of
from kernelcast.costs.attention import attended_pairs, attention_backward_flops, attention_forward_flops
from kernelcast.costs.foreach import multi_tensor_launches
from kernelcast.costs.matmul import conv_backward_flops, conv_flops


def test_mm_flops_and_bytes():
    a, b, out = contiguous((4, 6)), contiguous((6, 5)), contiguous((4, 5))
    cost = cost_of(op("aten.mm.default", {"self": a, "mat2": b}, [out]))
    assert cost.flops == 240  # 2 * 4 * 5 * 6 = 240
    assert cost.bytes_read == 4 * (24 + 30)  # fp32: (4*6 + 6*5) elements
    assert cost.bytes_written == 4 * 20  # 4*5 outputs
    assert cost.math == "matmul"


def test_addmm_counts_the_product_only():
    bias, a, b, out = contiguous((5,)), contiguous((4, 6)), transposed((6, 5)), contiguous((4, 5))
    cost = cost_of(op("aten.addmm.default", {"self": bias, "mat1": a, "mat2": b}, [out]))
    assert cost.flops == 240  # 2 * 4 * 5 * 6, the bias add is not counted (as torch.utils.flop_counter)
    assert cost.bytes_read == 4 * (5 + 24 + 30)


def test_bmm_flops():
    a, b, out = contiguous((3, 4, 6), "bfloat16"), contiguous((3, 6, 5), "bfloat16"), contiguous((3, 4, 5), "bfloat16")
    cost = cost_of(op("aten.bmm.default", {"self": a, "mat2": b}, [out]))
    assert cost.flops == 720  # 2 * 3 * 4 * 5 * 6
    assert cost.bytes_read == 2 * (72 + 90) and cost.dtype == "bfloat16"


def test_conv_flops_and_backward_is_twice_forward():
    x, w, out = (8, 3, 32, 32), (16, 3, 3, 3), (8, 16, 30, 30)
    assert conv_flops(x, w, out, False) == 2 * 8 * 16 * 3 * 9 * 900  # 2*N*Cout*Cin*k*k*Hout*Wout = 6220800
    assert conv_backward_flops(out, x, w, x, False, (True, True, False)) == 2 * conv_flops(x, w, out, False)


def test_grouped_conv_counts_channels_per_group():
    x, w, out = (1, 8, 10, 10), (8, 2, 3, 3), (1, 8, 8, 8)  # groups = 4: weight holds Cin/groups = 2
    assert conv_flops(x, w, out, False) == 2 * 1 * 8 * 2 * 9 * 64  # 18432


def test_grouped_conv_weight_gradient_is_the_forward_not_groups_times_it():
    # x (100, 2048, 14, 14) fp16, w (2048, 64, 3, 3), stride 2, pad 1, groups 32 -> out (100, 2048, 7, 7).
    # Forward: 2 * 100 * 2048 * 64 * 9 * 49 = 11_560_550_400. The weight gradient has the same multiply-adds
    # (group g's (64, 64, 3, 3) block sums over the batch and the 49 output positions). torch.utils.flop_counter
    # convolves the whole input with the whole gradient as if ungrouped: 32 times that, 369.9 GFLOP.
    x = torch.empty(100, 2048, 14, 14, device="meta", dtype=torch.float16)
    w = torch.empty(2048, 64, 3, 3, device="meta", dtype=torch.float16, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        out = F.conv2d(x, w, stride=2, padding=1, groups=32)
        out.backward(torch.ones_like(out))
    counts = {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}
    forward = conv_flops(tuple(x.shape), tuple(w.shape), tuple(out.shape), False)
    assert forward == 11_560_550_400 == counts["aten.convolution"]
    assert counts["aten.convolution_backward"] == 32 * forward == 369_937_612_800  # flop_counter's, wrong
    weight_only = conv_backward_flops(tuple(out.shape), tuple(x.shape), tuple(w.shape), tuple(x.shape), False,
                                      (False, True, False))
    assert weight_only == forward
    both = conv_backward_flops(tuple(out.shape), tuple(x.shape), tuple(w.shape), tuple(x.shape), False,
                               (True, True, False))
    assert both == 2 * forward  # input gradient (the transposed conv) + weight gradient


def test_grouped_transposed_conv_backward_is_twice_forward():
    # ConvTranspose2d(8 -> 12, groups 4): weight (8, 3, 3, 3), x (2, 8, 5, 5) -> out (2, 12, 7, 7).
    # Forward at the input's positions: 2 * 2 * 8 * 3 * 9 * 25 = 21600.
    x, w, out = (2, 8, 5, 5), (8, 3, 3, 3), (2, 12, 7, 7)
    assert conv_flops(x, w, out, True) == 21600
    assert conv_backward_flops(out, x, w, x, True, (True, True, False)) == 2 * 21600


def test_attention_forward_backward_and_causal_pairs():
    q = k = v = (2, 4, 8, 16)
    assert attention_forward_flops(q, k, v, False) == 2 * 2 * 4 * 64 * 32  # 2*B*H*Sq*Sk*(Dqk+Dv) = 65536
    # backward: the QK^T recompute, dQ, dK (3 * Dqk) and dP, dV (2 * Dv): 2 * 2 * 4 * 64 * 80 = 81920
    assert attention_backward_flops(q, k, v, False) == 81920 == 2.5 * attention_forward_flops(q, k, v, False)
    assert attended_pairs(8, 8, True) == 36  # 1 + 2 + ... + 8
    assert attended_pairs(4, 8, True) == 10  # top-left aligned: 1 + 2 + 3 + 4
    assert attended_pairs(8, 4, True) == 26  # 1+2+3+4 then 4 more rows of 4
    assert attention_forward_flops(q, k, v, True) == 2 * 2 * 4 * 36 * 32


def test_elementwise_fp32_intensity_is_one_eighth():
    n = 1000
    x, out = contiguous((n,)), contiguous((n,))
    cost = cost_of(op("aten.relu.default", {"self": x}, [out], tags=("pointwise",)))
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (n, 4 * n, 4 * n)  # N FLOPs, reads 4N, writes 4N
    assert cost.intensity == pytest.approx(1 / 8)


def test_broadcast_input_is_read_once():
    x, bias, out = contiguous((64, 128)), contiguous((128,)), contiguous((64, 128))
    expanded = type(bias)((64, 128), "float32", (0, 1))
    cost = cost_of(op("aten.add.Tensor", {"self": x, "other": expanded}, [out], tags=("pointwise",)))
    assert cost.bytes_read == 4 * (64 * 128 + 128)  # the broadcast row is read once


def test_reduction_bytes_and_global_reduce_memset():
    x, out = contiguous((4096, 768), "bfloat16"), contiguous((1, 768), "bfloat16")
    cost = cost_of(op("aten.sum.dim_IntList", {"self": x, "dim": (0,), "keepdim": True}, [out], tags=("reduction",)))
    assert cost.flops == 4096 * 768 and cost.bytes_read == 2 * 4096 * 768 and cost.bytes_written == 2 * 768
    assert cost.kernels == 2  # 4096 values per output split across blocks: semaphore memset + reduce
    small = cost_of(op("aten.sum.dim_IntList", {"self": contiguous((128, 768)), "dim": (0,)}, [contiguous((768,))],
                       tags=("reduction",)))
    assert small.kernels == 1


def test_reductions_are_timed_by_how_many_outputs_they_make():
    x = contiguous((128, 768))
    rows = cost_of(op("aten.sum.dim_IntList", {"self": x, "dim": (1,)}, [contiguous((128,))], tags=("reduction",)))
    columns = cost_of(op("aten.sum.dim_IntList", {"self": x, "dim": (0,)}, [contiguous((768,))],
                         tags=("reduction",)))
    whole = cost_of(op("aten.sum.default", {"self": x}, [contiguous(())], tags=("reduction",)))
    assert (rows.kind, columns.kind, whole.kind) == ("reduction", "reduction_outer", "reduction_all")


def test_reductions_that_keep_an_index_are_a_kind_priced_above_their_value_only_kind():
    """max / min over a dim and argmax carry a (value, int64 index) pair (SharedReduceOps.h): each reduction kind
    gets an "_index" variant, priced on the H200 as the value-only curve times the factor the microbenchmark
    section value_index_grid measured (over 1 for every kind: max over rows ran 1.2-1.4x amax over the same
    rows there)."""
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    x = contiguous((4096, 4096))
    values, indices = contiguous((4096, 1)), contiguous((4096, 1), "int64")
    max_rows = cost_of(op("aten.max.dim", {"self": x, "dim": 1, "keepdim": True}, [values, indices],
                          tags=("reduction",)))
    max_cols = cost_of(op("aten.max.dim", {"self": x, "dim": 0, "keepdim": True},
                          [contiguous((1, 4096)), contiguous((1, 4096), "int64")], tags=("reduction",)))
    argmax_all = cost_of(op("aten.argmax.default", {"self": x}, [contiguous((), "int64")], tags=("reduction",)))
    amax = cost_of(op("aten.amax.default", {"self": x, "dim": (1,), "keepdim": True}, [values], tags=("reduction",)))
    assert (max_rows.kind, max_cols.kind, argmax_all.kind, amax.kind) == (
        "reduction_index", "reduction_outer_index", "reduction_all_index", "reduction")
    gpu = get_gpu("h200")
    profile = load_profile("h200").data
    factors = profile["timings"]["value_index"]
    assert all(f > 1.0 for f in factors.values())
    model = CalibratedModel(gpu, CaptureSettings(), profile, gpu)
    as_value_only = dataclasses.replace(max_rows, kind="reduction")
    assert model.estimate(max_rows).time_us == pytest.approx(
        model.estimate(as_value_only).time_us * factors["reduction:4"], rel=1e-6)


def test_h200_prices_a_whole_reduction_slower_than_row_sums():
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)
    x = contiguous((128, 768))
    rows = cost_of(op("aten.sum.dim_IntList", {"self": x, "dim": (1,)}, [contiguous((128,))], tags=("reduction",)))
    whole = cost_of(op("aten.sum.default", {"self": x}, [contiguous(())], tags=("reduction",)))
    # measured on the H200 (validation/h200_calibration_raw.json): 128 x 768 fp32 summed by rows 5.1 µs, to one
    # value 21.4 µs (a handful of blocks share one output)
    assert model.estimate(whole).time_us > 2 * model.estimate(rows).time_us


def test_views_are_free_and_unknown_ops_uncosted():
    x = contiguous((4, 4))
    view = cost_of(op("aten.view.default", {"self": x}, [x], tags=("view",)))
    assert view.kernels == 0 and view.bytes == 0
    assert cost_of(op("aten.some_new_op.default", {"self": x}, [x])) is None


def test_zero_element_ops_launch_nothing():
    empty = contiguous((0, 8))
    assert cost_of(op("aten._to_copy.default", {"self": empty}, [empty])).kernels == 0


def test_cat_batches_inputs_of_one_dtype_and_copies_mixed_ones():
    # ViT's class token and patch embeddings: one batched kernel in bf16; under autocast the fp32 token and
    # bf16 patches go one copy each (as measured on the H200).
    cls, patches = contiguous((32, 1, 768), "bfloat16"), contiguous((32, 196, 768), "bfloat16")
    out = contiguous((32, 197, 768), "bfloat16")
    same = cost_of(op("aten.cat.default", {"tensors": (cls, patches), "dim": 1}, [out]))
    mixed = cost_of(op("aten.cat.default", {"tensors": (contiguous((32, 1, 768)), patches), "dim": 1}, [out]))
    expanded = type(cls)((32, 1, 768), "bfloat16", (0, 768, 1))  # cls_token.expand(batch, -1, -1)
    strided = cost_of(op("aten.cat.default", {"tensors": (expanded, patches), "dim": 1}, [out]))
    five_d = contiguous((2, 2, 2, 2, 2))
    many_dims = cost_of(op("aten.cat.default", {"tensors": (five_d, five_d), "dim": 0}, [contiguous((4, 2, 2, 2, 2))]))
    assert (same.kernels, mixed.kernels, strided.kernels, many_dims.kernels) == (1, 2, 1, 2)


def test_slice_backward_and_padding_fill_then_copy():
    grad, full = contiguous((2, 512, 4096)), contiguous((2, 513, 4096))
    cost = cost_of(op("aten.slice_backward.default", {"grad_output": grad, "input_sizes": (2, 513, 4096), "dim": 1,
                                                      "start": 0, "end": 512, "step": 1}, [full]))
    assert cost.kernels == 2 and cost.bytes_written == full.nbytes + grad.nbytes
    x, padded, cropped = contiguous((8, 100)), contiguous((8, 128)), contiguous((8, 90))
    assert cost_of(op("aten.constant_pad_nd.default", {"self": x, "pad": (0, 28)}, [padded])).kernels == 2
    assert cost_of(op("aten.constant_pad_nd.default", {"self": x, "pad": (0, -10)}, [cropped])).kernels == 1


def test_multi_tensor_apply_launches():
    # 4 KB tables: 110 tensors per launch at depth 1, 320 blocks of 65536 elements
    assert multi_tensor_launches([4096] * 200, depth=1, large_args=False) == 2
    assert multi_tensor_launches([10_000_000] * 50, depth=1, large_args=False) == 24  # 153 chunks each
    assert multi_tensor_launches([4096] * 200, depth=1, large_args=True) == 1
    assert multi_tensor_launches([0, 0], depth=1) == 0


@pytest.mark.parametrize("shapes", [((32, 64), (64, 16)), ((128, 256), (256, 512))])
def test_mm_matches_torch_flop_counter(shapes):
    a_shape, b_shape = shapes
    with FlopCounterMode(display=False) as counter:
        torch.mm(torch.empty(a_shape, device="meta"), torch.empty(b_shape, device="meta"))
    out = contiguous((a_shape[0], b_shape[1]))
    cost = cost_of(op("aten.mm.default", {"self": contiguous(a_shape), "mat2": contiguous(b_shape)}, [out]))
    assert cost.flops == counter.get_total_flops()


def test_conv_and_attention_match_torch_flop_counter():
    x, w = torch.empty(2, 3, 16, 16, device="meta"), torch.empty(8, 3, 3, 3, device="meta")
    with FlopCounterMode(display=False) as counter:
        out = torch.nn.functional.conv2d(x, w, stride=1, padding=1)
    assert conv_flops(tuple(x.shape), tuple(w.shape), tuple(out.shape), False) == counter.get_total_flops()
    q = torch.empty(2, 4, 64, 32, device="meta")
    with FlopCounterMode(display=False) as counter:
        torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, False)
    assert attention_forward_flops(q.shape, q.shape, q.shape, False) == counter.get_total_flops()


def test_default_context_has_no_launch_table():
    assert DEFAULT_CONTEXT.launches is None


def test_an_elementwise_kernel_given_one_tensor_twice_reads_it_once():
    # zoo (H200): Adam's exp_avg_sq.addcmul_(grad, grad) over a foreach list was priced +22% with grad read
    # twice; the second load of each element hits cache. A cat of one tensor twice still reads it twice.
    from kernelcast.records import TensorMeta

    x = TensorMeta((1024, 1024), "float32", (1024, 1), "cuda", storage=7)
    square = cost_of(op("aten.mul.Tensor", {"self": x, "other": x}, [contiguous((1024, 1024), "float32")],
                        tags=("pointwise",)))
    assert square.bytes_read == x.nbytes
    doubled = cost_of(op("aten.cat.default", {"tensors": (x, x), "dim": 0}, [contiguous((2048, 1024), "float32")]))
    assert doubled.bytes_read == 2 * x.nbytes


def test_gathers_of_narrow_rows_take_the_elementwise_kernel():
    """Which gathers run the vectorized kernel (a block per index, 16-byte loads) and which the elementwise one:
    the H200's gather_grid (validation/h200_gather_grid_raw.json.gz, torch 2.11) ran vectorized_gather_kernel for
    rows of 12 and 24 floats and _scatter_gather_elementwise_kernel for 1-D sources and rows of 1-6 and 33 floats
    (1, 3, 6 bf16)."""
    from kernelcast.costs.gather import ELEMENTS_KEY, ROWS_KEY, vectorized_rows

    assert [vectorized_rows(contiguous((4096, w))) for w in (1, 2, 3, 5, 6, 12, 24, 33)] == \
        [False] * 5 + [True, True, False]
    assert [vectorized_rows(contiguous((4096, w), "bfloat16")) for w in (1, 3, 6, 8)] == [False] * 3 + [True]
    assert not vectorized_rows(contiguous((4096,)))
    idx = contiguous((1000,), "int64")
    wide = cost_of(op("aten.index_select.default", {"self": contiguous((4096, 24)), "dim": 0, "index": idx},
                      [contiguous((1000, 24))]))
    narrow = cost_of(op("aten.index_select.default", {"self": contiguous((4096, 3)), "dim": 0, "index": idx},
                        [contiguous((1000, 3))]))
    assert wide.key == (ROWS_KEY, 1000, 4) and narrow.key == (ELEMENTS_KEY, 1000, 3000, 4)


def test_a_few_indices_run_the_small_index_kernel_by_its_path():
    """index_select / embedding of at most 16 indices: indexSelectSmallIndex (Indexing.cu), priced by indices x the
    slice a thread walks, on the specialised or the generic kernel. The H200's and an H100's zoo runs (torch 2.11):
    beam search's cache reorder (a strided int32 index of 8) ran `indexSelectSmallIndex<..., -1, -1, -1>`, decode
    embeddings `<..., 2, 2, -2>`."""
    from kernelcast.costs.gather import GENERIC, SMALL_INDEX_KEY, SPECIALISED, collapsed_dims

    cache = contiguous((8, 12, 32, 64), "bfloat16")
    strided = TensorMeta((8,), "int32", (16,))
    reorder = cost_of(op("aten.index_select.default", {"self": cache, "dim": 0, "index": strided}, [cache]))
    assert reorder.key == (SMALL_INDEX_KEY, GENERIC, 8, 1, 2)
    tokens = contiguous((8, 1), "int64")
    embedded = cost_of(op("aten.embedding.default", {"weight": contiguous((50257, 768), "bfloat16"),
                                                     "indices": tokens}, [contiguous((8, 1, 768), "bfloat16")]))
    assert embedded.key == (SMALL_INDEX_KEY, SPECIALISED, 8, 1, 2)
    # a sliced cache does not collapse to the output's dims: the generic kernel, even with a contiguous index
    sliced = TensorMeta((8, 4, 40, 64), "float32", (4 * 80 * 64, 80 * 64, 64, 1))
    assert (collapsed_dims(sliced, 0), collapsed_dims(contiguous((8, 4, 40, 64)), 0)) == (3, 2)
    index = contiguous((8,), "int64")
    assert cost_of(op("aten.index_select.default", {"self": sliced, "dim": 0, "index": index},
                      [contiguous((8, 4, 40, 64))])).key[1] == GENERIC
    # 2M-element slices: 8 x 132 blocks of 128 threads walk 16 elements each per index on the H200
    wide = cost_of(op("aten.index_select.default", {"self": contiguous((64, 2097152)), "dim": 0, "index": index},
                      [contiguous((8, 2097152))]))
    assert wide.key == (SMALL_INDEX_KEY, SPECIALISED, 8, 16, 4)
    # 17 indices go to gather_out: the row gather
    many = cost_of(op("aten.index_select.default", {"self": contiguous((64, 768)), "dim": 0,
                                                   "index": contiguous((17,), "int64")}, [contiguous((17, 768))]))
    assert many.key[0] != SMALL_INDEX_KEY


def test_index_add_of_a_few_indices_runs_the_small_index_kernel():
    """index_add_ of at most 16 indices: indexFuncSmallIndex (Indexing.cu, index_add_cuda_impl), the small index
    select's grid and paths with an atomic add per element; more go to indexFuncLargeIndex, priced per element.
    The out-of-place op copies self first, a kernel of its own."""
    from kernelcast.costs.gather import GENERIC, SMALL_INDEX_ADD_KEY, SPECIALISED
    from kernelcast.costs.indexing import ATOMICS_KEY

    hidden = contiguous((64, 4096), "bfloat16")  # an expert's tokens added back into the hidden states
    two = contiguous((2,), "int64")
    added = cost_of(op("aten.index_add_.default", {"self": hidden, "dim": 0, "index": two,
                                                    "source": contiguous((2, 4096), "bfloat16")}, [hidden]))
    assert added.key == (SMALL_INDEX_ADD_KEY, SPECIALISED, 2, 1, 8192, 2) and added.kernels == 1
    assert added.bytes_written == 2 * 4096 * 2  # the rows it adds into, not the whole destination
    out_of_place = cost_of(op("aten.index_add.default", {"self": hidden, "dim": 0, "index": two,
                                                         "source": contiguous((2, 4096), "bfloat16")}, [hidden]))
    assert out_of_place.key == added.key and out_of_place.kernels == 2
    assert [p.kind for p in out_of_place.parts] == ["copy"] and out_of_place.parts[0].bytes_read == hidden.nbytes
    # along the middle dim of (8, 64, 128): self and source each collapse to 3 dims, the specialised kernel; a
    # strided index, the generic one
    cache = contiguous((8, 64, 128))
    middle = {"self": cache, "dim": 1, "index": contiguous((8,), "int64"), "source": contiguous((8, 8, 128))}
    assert cost_of(op("aten.index_add_.default", middle, [cache])).key[1:4] == (SPECIALISED, 8, 1)
    strided = {**middle, "index": TensorMeta((8,), "int64", (2,))}
    assert cost_of(op("aten.index_add_.default", strided, [cache])).key[1] == GENERIC
    many = cost_of(op("aten.index_add_.default", {"self": hidden, "dim": 0, "index": contiguous((17,), "int64"),
                                                   "source": contiguous((17, 4096), "bfloat16")}, [hidden]))
    assert many.key == (ATOMICS_KEY, 17 * 4096, 2)


def test_small_index_times_follow_the_device_grid_and_the_zoo():
    """The H200 profile's small-index lines (calibrate/unit_rates.py, fitted on an H100's small_index_grid) against
    zoo kernels they were not fitted on (validation/zoo_measured.json.gz, H200; validation/h100/
    zoo_issue31_measured_h100.json.gz): gpt2_forward_fp32_b1's embeddings of 16 tokens 10.6 µs (the step's first
    kernels: cold), beam search's cache reorders of 8 rows 7.3 µs (median of 192; the cache the step had just
    written: warm), greedy generation's embeddings of 4 tokens 2.9 µs (median of 30). Those ran at the L2 line:
    the LM head had just streamed the tied table, which the L2 tracker (predict/l2.py) does not follow, being
    larger than the L2, so the capture prices them cold (4.2 µs): a known miss."""
    from kernelcast.costs.gather import GENERIC, SMALL_INDEX_KEY, SPECIALISED
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)

    def predicted(path, indices, itemsize, warm):
        cost = dataclasses.replace(cost_of(op("aten.index_select.default", {
            "self": contiguous((64, 768)), "dim": 0, "index": contiguous((indices,), "int64")},
            [contiguous((indices, 768))])), key=(SMALL_INDEX_KEY, path, indices, 1, itemsize))
        return model.estimate(cost, warm).time_us

    assert predicted(SPECIALISED, 16, 4, 0.0) == pytest.approx(10.6, rel=0.15)
    assert predicted(GENERIC, 8, 2, 1.0) == pytest.approx(7.3, rel=0.15)
    assert predicted(SPECIALISED, 4, 2, 1.0) == pytest.approx(2.9, rel=0.15)


def test_small_index_add_times_follow_the_held_out_device_cases():
    """The profile's small_index_add lines (calibrate/unit_rates.py, fitted on an H100's small_index_add_grid, added
    along dim 0) against the same run's adds along the middle dim of (8, 64, D), held out of the fit
    (validation/h100_small_index_add_grid_raw.json.gz, kind small_index_add_check; torch 2.11): 16 indices into
    1024-element bf16 slices 14.9 µs, 8 into 32768-element fp32 slices 8.3 µs, 2 into 1024-element fp32 slices
    2.9 µs. Priced per element added (indexFuncLargeIndex's line) they had been 2.4, 4.3 and 2.5 µs."""
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)

    def predicted(indices, width, dtype):
        dst = contiguous((8, 64, width), dtype)
        add = op("aten.index_add_.default", {"self": dst, "dim": 1, "index": contiguous((indices,), "int64"),
                                              "source": contiguous((8, indices, width), dtype)}, [dst])
        return model.estimate(cost_of(add)).time_us

    assert predicted(16, 128, "bfloat16") == pytest.approx(14.9, rel=0.15)
    assert predicted(8, 4096, "float32") == pytest.approx(8.3, rel=0.15)
    assert predicted(2, 128, "float32") == pytest.approx(2.9, rel=0.15)


def test_abs_and_angle_of_complex_copy_the_real_part():
    # UnaryOps.cpp (unary_op_impl_with_complex_to_float_out): a complex -> complex kernel into a temporary, then a
    # copy of its real part. The H200 (zoo audio_spectrogram_forward, torch 2.11) ran |STFT| of 8 x 201 x 1001
    # complex64 as abs_kernel then direct_copy_kernel: 2 work items.
    spec = contiguous((8, 1001, 201), "complex64")
    for name in ("aten.abs.default", "aten.angle.default"):
        cost = cost_of(op(name, {"self": spec}, [contiguous((8, 1001, 201))], tags=("pointwise",)))
        assert cost.kernels == 2
        numel = 8 * 1001 * 201
        assert cost.bytes_read == numel * 8 + numel * 8  # the input, then every sector of the temporary
        assert cost.bytes_written == numel * 8 + numel * 4  # the complex temporary, then the float result
        assert [p.kind for p in cost.parts] == ["copy"]
    real = contiguous((8, 1001, 201))
    assert cost_of(op("aten.abs.default", {"self": real}, [real], tags=("pointwise",))).kernels == 1
    as_complex = cost_of(op("aten.sgn.default", {"self": spec}, [spec], tags=("pointwise",)))
    assert as_complex.kernels == 1


def test_a_reduction_casts_an_input_of_another_dtype_first():
    # make_reduction_from_out_ty (ReduceOpsUtils.h): `self.to(dtype)` before the reduce. The H200 (zoo losses_train,
    # torch 2.11) ran cross_entropy's bool count into int64 as a reduce and a copy: 2 work items.
    mask = contiguous((1024,), "bool")
    cost = cost_of(op("aten.sum.dim_IntList", {"self": mask, "dim": ()}, [contiguous((), "int64")], tags=("reduction",)))
    assert cost.kernels == 2 and [p.kind for p in cost.parts] == ["copy_cast"]
    assert cost.parts[0].bytes_read == 1024 and cost.parts[0].bytes_written == 1024 * 8
    # a bfloat16 input summed into float32 is read as it is on CUDA (gpu_lowp_to_f32); same dtypes need no cast
    bf16 = contiguous((1024,), "bfloat16")
    assert cost_of(op("aten.sum.dim_IntList", {"self": bf16, "dim": ()}, [contiguous(())], tags=("reduction",))).kernels == 1
    x = contiguous((1024,))
    assert cost_of(op("aten.sum.dim_IntList", {"self": x, "dim": ()}, [contiguous(())], tags=("reduction",))).kernels == 1
    # any/all read every dtype as it is on CUDA (get_allany_iter)
    assert cost_of(op("aten.any.default", {"self": x}, [contiguous((), "bool")], tags=("reduction",))).kernels == 1


def test_cublas_operand_copies_follow_blas_cpp():
    """aten/src/ATen/native/cuda/Blas.cpp hands cuBLAS row- or column-major matrices only: an operand in neither
    layout is cloned inside mm / bmm (one more kernel), a dense or transposed one is not."""
    from kernelcast.costs.matmul import bmm_operand_copies, mm_operand_copies
    from kernelcast.records import TensorMeta
    a, b = contiguous((64, 32)), transposed((32, 16))
    assert mm_operand_copies(a, b) == ()
    every_other_column = TensorMeta((64, 32), "float32", (64, 2))  # x[:, ::2] of a (64, 64) tensor
    assert len(mm_operand_copies(every_other_column, b)) == 1
    permuted = TensorMeta((256, 16, 32), "complex64", (1, 8192, 256))  # einsum's view of a (B, C, X, Y) spectrum
    assert len(bmm_operand_copies(permuted, contiguous((256, 32, 32), "complex64"))) == 1
    conjugated = TensorMeta((256, 32, 16), "complex64", (512, 1, 32), conj=True)  # .conj().transpose(1, 2) of a row-major batch
    assert len(bmm_operand_copies(contiguous((256, 16, 32), "complex64"), conjugated)) == 0  # cuBLAS's 'c'
    assert len(bmm_operand_copies(conjugated.__class__((256, 16, 32), "complex64", (512, 32, 1), conj=True),
                                  contiguous((256, 32, 16), "complex64"))) == 1  # conjugated in place: a copy
    cost = cost_of(op("aten.bmm.default", {"self": permuted, "mat2": contiguous((256, 32, 32), "complex64")},
                      [contiguous((256, 16, 32), "complex64")]))
    assert cost.kernels == 2 and len(cost.parts) == 1


def test_a_reduction_over_several_trailing_dims_is_keyed_by_its_row_length():
    """TensorIterator merges contiguous reduced dims: a mean over the last four dims of (128, 16, 14, 30, 30)
    reduces 128 rows of 201600 (KernelBench L2 #23 on the H200: 38 µs, one 2.7 TB/s reduce kernel), not rows of
    30; a last-dim reduction keeps its last dim."""
    x = contiguous((128, 16, 14, 30, 30))
    mean = cost_of(op("aten.mean.dim", {"self": x, "dim": [1, 2, 3, 4], "keepdim": False}, [contiguous((128,))],
                      tags=("reduction",)))
    assert (mean.kind, mean.key) == ("reduction", (16 * 14 * 30 * 30, 4))
    last = cost_of(op("aten.sum.dim_IntList", {"self": x, "dim": (4,)}, [contiguous((128, 16, 14, 30))],
                      tags=("reduction",)))
    assert last.key == (30, 4)


def test_fp32_attention_is_a_kernel_family_of_its_own_at_the_fp32_roof():
    """costs/attention.py: an fp32 call runs the memory-efficient backend's CUDA-core kernels, so its key's backend
    carries FP32_SUFFIX (its own rows in the profile: the sweep section attention_fp32), and its prior is the FP32
    roof with 4-byte operands (predict/shape_kinds.py _attention_work); a bf16 call keeps its backend and roof."""
    from kernelcast.costs.attention import FP32_SUFFIX
    from kernelcast.predict.shape_kinds import SHAPE_WORK

    def sdpa(dtype):
        q = contiguous((2, 8, 256, 64), dtype)
        out = contiguous((2, 8, 256, 64), dtype)
        return cost_of(op("aten._scaled_dot_product_efficient_attention.default",
                          {"query": q, "key": q, "value": q, "is_causal": True}, [out]))

    fp32, bf16 = sdpa("float32"), sdpa("bfloat16")
    assert fp32.key[0] == "EFFICIENT_ATTENTION" + FP32_SUFFIX and bf16.key[0] == "EFFICIENT_ATTENTION"
    assert fp32.key[1:] == bf16.key[1:] and fp32.flops == bf16.flops
    (f32_flops, f32_bytes, f32_dtype, _), (bf_flops, bf_bytes, bf_dtype, _) = SHAPE_WORK["attention"](fp32.key), \
        SHAPE_WORK["attention"](bf16.key)
    assert (f32_dtype, bf_dtype) == ("float32", "bfloat16") and f32_flops == bf_flops and f32_bytes == 2 * bf_bytes


def test_nll_loss_threads_follow_losscu():
    """Loss.cu nll_loss_threads: clamp(2^round(log2(frames / 16)), 32, 1024), integer division."""
    from kernelcast.costs.losses import nll_loss_threads

    assert [nll_loss_threads(f) for f in (1, 8, 128, 512, 2048, 8192, 32768, 131072)] == \
        [32, 32, 32, 32, 128, 512, 1024, 1024]
    assert nll_loss_threads(3000) == 256  # 187 -> 2^7.55 -> 2^8


def test_nll_loss_is_one_blocks_walk_priced_by_the_device_run():
    """nll_loss with a reduction runs one thread block walking the frames (costs/losses.py nll_walk): its time
    follows the frames a thread walks, not the input's bytes. The profile's nll_walk lines are fitted on an H100's
    nll_loss_grid (validation/h100_nll_loss_grid_raw.json.gz); held out of that fit, the H200's own sweep ran the
    forward over (2048, 32000), (8192, 50304) and (16384, 4096) fp32 in 18.0, 18.8 and 19.2 µs
    (validation/h200_sweep_raw.json.gz, kind nll_loss_fwd, 16 frames a thread each). Priced by its bytes, the
    zoo's MLP steps' forward over (64, 10) had been 0.8 µs against 10.5 measured."""
    from kernelcast.devices import get_gpu
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.profiles import load_profile
    from kernelcast.records import CaptureSettings

    gpu = get_gpu("h200")
    model = CalibratedModel(gpu, CaptureSettings(), load_profile("h200").data, gpu)

    def forward(frames, classes, reduction=1):
        x = contiguous((frames, classes))
        return op("aten.nll_loss_forward.default", {"self": x, "target": contiguous((frames,), "int64"),
                                                    "weight": None, "reduction": reduction, "ignore_index": -100},
                  [contiguous(()), contiguous(())])

    for frames, classes, measured in ((2048, 32000, 18.0), (8192, 50304, 18.8), (16384, 4096, 19.2)):
        cost = cost_of(forward(frames, classes))
        assert cost.key[:3] == ("nll_walk", "forward", 16)
        assert model.estimate(cost).time_us == pytest.approx(measured, rel=0.15)
    # more frames a thread: longer, whatever the classes; from L2, faster
    assert model.estimate(cost_of(forward(131072, 10))).time_us > 5 * model.estimate(cost_of(forward(2048, 10))).time_us
    small = cost_of(forward(512, 10))
    assert model.estimate(small, 1.0).time_us < model.estimate(small).time_us
    # no reduction: a kernel over the frames, by its bytes as before
    assert cost_of(forward(2048, 10, reduction=0)).key[:1] != ("nll_walk",)
    # the backward: the gradient's zero fill, a kernel of its own, then the walk
    x = contiguous((2048, 32000))
    backward = cost_of(op("aten.nll_loss_backward.default",
                          {"grad_output": contiguous(()), "self": x, "target": contiguous((2048,), "int64"),
                           "weight": None, "reduction": 1, "ignore_index": -100, "total_weight": contiguous(())},
                          [x]))
    assert backward.kernels == 2 and [p.kind for p in backward.parts] == ["fill"]
    assert backward.parts[0].bytes_written == 2048 * 32000 * 4
