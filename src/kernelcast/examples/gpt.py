"""A GPT-2-small-sized decoder (124M parameters) training step: bf16 autocast, fused attention, AdamW.

    kernelcast predict example:gpt --gpu h100

The sizes are keyword arguments with GPT-2 small's values as defaults, so scripts can build a tiny copy
(scripts/device/validate_distributed.py --dry-run-cpu); build() uses the defaults.
"""

import contextlib
import math
from typing import Callable, ContextManager

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 50304  # GPT-2's 50257 padded to a multiple of 64, as nanoGPT does
LAYERS, HEADS, WIDTH, CONTEXT = 12, 12, 768, 1024
BATCH, SEQ = 8, 1024


class Block(nn.Module):
    def __init__(self, width: int = WIDTH, heads: int = HEADS) -> None:
        super().__init__()
        self.width, self.heads = width, heads
        self.ln_1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(self.width, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers: int = LAYERS, width: int = WIDTH, heads: int = HEADS, vocab: int = VOCAB,
                 context: int = CONTEXT) -> None:
        super().__init__()
        self.vocab = vocab
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))


def make_model(*, device: str = "cuda", **sizes) -> GPT:
    """GPT(**sizes) on `device` (initialised on the CPU first, as build() has always done)."""
    return GPT(**sizes).to(device)


def training_step(model: nn.Module, *, batch: int = BATCH, seq: int = SEQ, vocab: int = VOCAB,
                  device: str = "cuda", step_context: Callable[[], ContextManager] = contextlib.nullcontext):
    """(step, args): one AdamW step with bf16 autocast on a random batch (also used by the DDP/FSDP2 examples).
    `step_context` is entered around forward and backward (DDP's no_sync, for a step without its all-reduce)."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(0, vocab, (batch, seq), device=device)
    targets = torch.randint(0, vocab, (batch, seq), device=device)

    def step(idx, targets):
        with step_context():
            with torch.autocast(idx.device.type, dtype=torch.bfloat16):
                loss = model(idx, targets)
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (idx, targets)


def build(batch: int = BATCH, seq: int = SEQ):
    """batch: sequences per step, seq: tokens per sequence (at most the context, 1024)."""
    return training_step(make_model(), batch=batch, seq=seq)
