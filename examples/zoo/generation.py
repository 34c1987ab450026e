"""Generation loops: transformers' generate() and Python loops whose exit reads the GPU.

    kernelcast predict examples/zoo/generation.py:gpt2_generate_greedy --gpu h200

Each step is one generate() call: a prefill, then one decode step per new token, each ending on the host's read
of whether every sequence has finished (a sync point). transformers builds the models from configs (no weights).
"""

import torch

BF16 = torch.bfloat16
NEW_TOKENS = 16


def _gpt2(layers=6):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=layers)
    return cfg, GPT2LMHeadModel(cfg).to("cuda", BF16).eval()


def _generate(model, ids, **kwargs):
    # eos disabled: every call makes NEW_TOKENS tokens, as the measurement does (min_new_tokens alone would
    # still let a finished sequence end the loop early)
    kwargs = {"max_new_tokens": NEW_TOKENS, "eos_token_id": None, "pad_token_id": 0, **kwargs}

    def step(ids):
        with torch.no_grad():
            return model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)

    return step, (ids,)


def gpt2_generate_greedy():
    """Greedy generation, 6-layer GPT-2 small in bf16, batch 4 x 32 prompt tokens, 16 new, dynamic KV cache."""
    cfg, model = _gpt2()
    return _generate(model, torch.randint(0, cfg.vocab_size, (4, 32), device="cuda"), do_sample=False)


def gpt2_generate_sample():
    """Sampling (temperature 0.8, top-k 50, top-p 0.9), same model and prompt as the greedy one."""
    cfg, model = _gpt2()
    return _generate(model, torch.randint(0, cfg.vocab_size, (4, 32), device="cuda"), do_sample=True,
                     temperature=0.8, top_k=50, top_p=0.9)


def gpt2_generate_beam():
    """Beam search, 4 beams, batch 2 x 32 prompt tokens, 16 new (eos disabled: no beam finishes early)."""
    cfg, model = _gpt2()
    return _generate(model, torch.randint(0, cfg.vocab_size, (2, 32), device="cuda"), num_beams=4,
                     do_sample=False, early_stopping=False)


def llama_generate_static_cache():
    """Greedy generation with a static KV cache: a 4-layer Llama in bf16, batch 2 x 64 prompt tokens, 16 new."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000)
    model = LlamaForCausalLM(cfg).to("cuda", BF16).eval()
    return _generate(model, torch.randint(0, cfg.vocab_size, (2, 64), device="cuda"), do_sample=False,
                     cache_implementation="static")


def gpt2_generate_eos():
    """Greedy generation that may stop at eos (the tokenizer's default): the loop's length depends on the
    tokens the GPU picks; kernelcast's capture states what it assumed."""
    cfg, model = _gpt2()
    ids = torch.randint(0, cfg.vocab_size, (4, 32), device="cuda")
    return _generate(model, ids, do_sample=False, eos_token_id=cfg.eos_token_id)
