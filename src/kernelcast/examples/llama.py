"""A Llama-shaped decoder training step: transformers' LlamaForCausalLM built from a config (no weights),
TinyLlama-1.1B's width (2048, grouped-query attention with 32 query and 4 key/value heads, SwiGLU 5632) cut
to 8 layers, 483M parameters; bf16 autocast, fused AdamW. Needs transformers (the `models` extra).

    kernelcast predict example:llama --gpu h200

The sizes are keyword arguments with these values as defaults, so scripts can build a tiny copy
(scripts/device/validate_distributed.py --dry-run-cpu); build() uses the defaults.
"""

import contextlib
from typing import Callable, ContextManager

import torch
from torch import nn

HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, LAYERS, VOCAB = 2048, 5632, 32, 4, 8, 32000
BATCH, SEQ = 4, 1024


def make_model(*, hidden: int = HIDDEN, intermediate: int = INTERMEDIATE, heads: int = HEADS,
               kv_heads: int = KV_HEADS, layers: int = LAYERS, vocab: int = VOCAB, seq: int = SEQ,
               device: str = "cuda") -> nn.Module:
    """The model, its parameters fp32 and initialised on `device` (no CPU round trip)."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as exc:
        raise ImportError("example:llama needs transformers (pip install 'kernelcast[models]')") from exc
    config = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, num_hidden_layers=layers, vocab_size=vocab,
                         max_position_embeddings=max(seq, 2048), tie_word_embeddings=False)
    config._attn_implementation = "sdpa"  # transformers' default; pinned so versions agree
    with torch.device(device):
        return LlamaForCausalLM(config).train()


def training_step(model: nn.Module, *, batch: int = BATCH, seq: int = SEQ, vocab: int = VOCAB,
                  device: str = "cuda", autocast: bool = True,
                  step_context: Callable[[], ContextManager] = contextlib.nullcontext):
    """(step, args): one fused-AdamW step on a random batch (also used by the DDP/FSDP2 examples). `autocast`:
    bf16 autocast around the forward (off where FSDP2's mixed-precision policy casts the parameters instead).
    `step_context` is entered around forward and backward (DDP's no_sync, for a step without its all-reduce)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=True)
    ids = torch.randint(0, vocab, (batch, seq), device=device)

    def step(ids):
        with step_context():
            with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=autocast):
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (ids,)


def build(batch: int = BATCH, seq: int = SEQ):
    """batch: sequences per step, seq: tokens per sequence."""
    return training_step(make_model(seq=seq), batch=batch, seq=seq)
