"""The GPT-2-small step of example:gpt, data-parallel with DDP: one rank's step (gradients all-reduced in
25 MiB buckets during backward).

    kernelcast predict example:gpt_ddp --world-size 8 --interconnect nvlink

Under torchrun on GPUs the same build() runs for real (scripts/validate_distributed.py).
"""

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from kernelcast.examples.gpt import GPT, training_step


def build():
    if not dist.is_initialized():  # torchrun without an initialised group; a kernelcast capture has one
        dist.init_process_group("nccl")
    model = DistributedDataParallel(GPT().to("cuda"))
    return training_step(model)
