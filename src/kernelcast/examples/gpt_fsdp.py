"""The GPT-2-small step of example:gpt, fully sharded with FSDP2 (fully_shard per block, then the root):
one rank's step (parameters all-gathered before each block, gradients reduce-scattered after its backward).
Parameters stay fp32 (all-gathered as fp32); bf16 comes from example:gpt's autocast.

    kernelcast predict example:gpt_fsdp --world-size 8 --interconnect nvlink

Under torchrun on GPUs the same build() runs for real; scripts/device/validate_distributed.py measures it through
wrap() and example:gpt's make_model and training_step, the functions build() calls.
"""

import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

from kernelcast.examples.gpt import BATCH, make_model, training_step


def wrap(model: nn.Module) -> nn.Module:
    for block in model.blocks:
        fully_shard(block)
    return fully_shard(model)


def build(batch: int = BATCH):
    """batch: sequences per rank per step."""
    if not dist.is_initialized():  # torchrun without an initialised group; a kernelcast capture has one
        dist.init_process_group("nccl")
    return training_step(wrap(make_model()), batch=batch)
