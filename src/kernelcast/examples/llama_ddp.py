"""The Llama-shaped step of example:llama (bf16 autocast, fused AdamW), data-parallel with DDP: one rank's
step (gradients all-reduced in 25 MiB buckets during backward, the rotary-embedding buffer broadcast before
each forward). Needs transformers.

    kernelcast predict example:llama_ddp --world-size 8 --interconnect nvlink

Under torchrun on GPUs the same build() runs for real; scripts/device/validate_distributed.py measures it through
wrap() and example:llama's make_model and training_step, the functions build() calls.
"""

import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from kernelcast.examples.llama import BATCH, make_model, training_step


def wrap(model: nn.Module) -> DistributedDataParallel:
    """DDP with its defaults (25 MiB buckets, buffers broadcast before each forward)."""
    return DistributedDataParallel(model)


def build(batch: int = BATCH):
    """batch: sequences per rank per step."""
    if not dist.is_initialized():  # torchrun without an initialised group; a kernelcast capture has one
        dist.init_process_group("nccl")
    return training_step(wrap(make_model()), batch=batch)
