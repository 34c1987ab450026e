"""The Llama-shaped step of example:llama, fully sharded with FSDP2 as torchtitan does it: fully_shard per
decoder layer, then the root, with a mixed-precision policy (bf16 parameters for compute, all-gathered in
bf16; gradients reduce-scattered in fp32; fp32 sharded parameters and fused AdamW). No autocast: the policy
casts. One rank's step. Needs transformers.

    kernelcast predict example:llama_fsdp --world-size 8 --interconnect nvlink

Under torchrun on GPUs the same build() runs for real; scripts/device/validate_distributed.py measures it through
wrap() and example:llama's make_model and training_step, the functions build() calls.
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from kernelcast.examples.llama import BATCH, make_model, training_step

MP_POLICY = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
STEP_OPTIONS = {"autocast": False}  # example:llama's training_step without autocast: the policy casts


def wrap(model: nn.Module) -> nn.Module:
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=MP_POLICY)
    return fully_shard(model, mp_policy=MP_POLICY)


def build(batch: int = BATCH):
    """batch: sequences per rank per step."""
    if not dist.is_initialized():  # torchrun without an initialised group; a kernelcast capture has one
        dist.init_process_group("nccl")
    return training_step(wrap(make_model()), batch=batch, **STEP_OPTIONS)
