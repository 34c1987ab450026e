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
