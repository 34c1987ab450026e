"""transformers models built from their config classes (no weights download), as kernelcast workloads.

    kernelcast predict examples/hf_models.py:gpt2_train --gpu h100
    kernelcast predict examples/hf_models.py:llama_forward --gpu h200

Sizes default to the real models' configs; the KC_* environment variables shrink them for tests.
"""

import os

import torch

BATCH = int(os.environ.get("KC_BATCH", "8"))
SEQ = int(os.environ.get("KC_SEQ", "512"))
LAYERS = int(os.environ.get("KC_LAYERS", "0")) or None  # 0: the model's own depth
DTYPE = getattr(torch, os.environ.get("KC_DTYPE", "bfloat16"))


def _layers(config, attr):
    if LAYERS:
        setattr(config, attr, LAYERS)
    return config


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = _layers(GPT2Config(), "n_layer")
    return GPT2LMHeadModel(cfg), cfg.vocab_size


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    # Llama-2-7B's shape; KC_LAYERS shrinks it.
    cfg = _layers(LlamaConfig(hidden_size=4096, intermediate_size=11008, num_attention_heads=32,
                              num_key_value_heads=32, num_hidden_layers=32, vocab_size=32000), "num_hidden_layers")
    return LlamaForCausalLM(cfg), cfg.vocab_size


def _bert():
    from transformers import BertConfig, BertForMaskedLM

    cfg = _layers(BertConfig(), "num_hidden_layers")
    return BertForMaskedLM(cfg), cfg.vocab_size


def _text_forward(make):
    def build():
        model, vocab = make()
        model = model.to("cuda", DTYPE).eval()
        ids = torch.randint(0, vocab, (BATCH, SEQ), device="cuda")

        def step(ids):
            with torch.no_grad():
                return model(input_ids=ids).logits

        return step, (ids,)

    return build


def _text_train(make):
    def build():
        model, vocab = make()
        model = model.to("cuda").train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, vocab, (BATCH, SEQ), device="cuda")

        def step(ids):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step, (ids,)

    return build


gpt2_forward, gpt2_train = _text_forward(_gpt2), _text_train(_gpt2)
llama_forward, llama_train = _text_forward(_llama), _text_train(_llama)
bert_forward, bert_train = _text_forward(_bert), _text_train(_bert)


def _vit():
    from transformers import ViTConfig, ViTForImageClassification

    cfg = _layers(ViTConfig(num_labels=1000), "num_hidden_layers")
    return ViTForImageClassification(cfg), cfg


def vit_forward():
    model, cfg = _vit()
    model = model.to("cuda", DTYPE).eval()
    images = torch.randn(BATCH, 3, cfg.image_size, cfg.image_size, device="cuda", dtype=DTYPE)

    def step(images):
        with torch.no_grad():
            return model(pixel_values=images).logits

    return step, (images,)


def vit_train():
    model, cfg = _vit()
    model = model.to("cuda").train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    images = torch.randn(BATCH, 3, cfg.image_size, cfg.image_size, device="cuda")
    labels = torch.randint(0, 1000, (BATCH,), device="cuda")

    def step(images, labels):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(pixel_values=images, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (images, labels)
