"""The GPT-2-small step of example:gpt, fully sharded with FSDP2 (fully_shard per block, then the root):
one rank's step (parameters all-gathered before each block, gradients reduce-scattered after its backward).

    kernelcast predict example:gpt_fsdp --world-size 8 --interconnect nvlink

Under torchrun on GPUs the same build() runs for real (scripts/validate_distributed.py).
"""

import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

from kernelcast.examples.gpt import GPT, training_step


def build():
    if not dist.is_initialized():  # torchrun without an initialised group; a kernelcast capture has one
        dist.init_process_group("nccl")
    model = GPT().to("cuda")
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return training_step(model)
