"""The GPT-2-small step of example:gpt, data-parallel with DDP: one rank's step (gradients all-reduced in
25 MiB buckets during backward).

    kernelcast predict example:gpt_ddp --world-size 8 --interconnect nvlink

Under torchrun on GPUs the same build() runs for real (scripts/validate_distributed.py).
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from kernelcast.examples.gpt import BATCH, GPT, SEQ, VOCAB


def build():
    if not dist.is_initialized():  # torchrun without an initialised group; a kernelcast capture has one
        dist.init_process_group("nccl")
    model = DistributedDataParallel(GPT().to("cuda"))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")

    def step(idx, targets):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (idx, targets)
