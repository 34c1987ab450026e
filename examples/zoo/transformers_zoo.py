"""transformers models from their config classes (no weights), at small real-model shapes: decoders, encoders,
encoder-decoders, vision transformers, MoE, audio encoders and decode steps with a KV cache.

    kernelcast predict examples/zoo/transformers_zoo.py:qwen2_train --gpu h200
"""

import torch

BF16 = torch.bfloat16


def _forward(model, dtype, **inputs):
    model = model.to("cuda", dtype).eval()

    def step(inputs):
        with torch.no_grad():
            return model(**inputs)

    return step, (inputs,)


def _train_autocast(model, **inputs):
    model = model.to("cuda").train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(inputs):
        with torch.autocast("cuda", dtype=BF16):
            loss = model(**inputs).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (inputs,)


def _ids(vocab, batch, seq):
    return torch.randint(0, vocab, (batch, seq), device="cuda")


# -- decoders ------------------------------------------------------------------------------------------------
def gpt2_forward_fp32_b1():
    """GPT-2 small in fp32 at batch 1 x 16 tokens: decode-shaped GEMMs (small M)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config()
    return _forward(GPT2LMHeadModel(cfg), torch.float32, input_ids=_ids(cfg.vocab_size, 1, 16))


def qwen2_train():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=4, num_attention_heads=14,
                      num_key_value_heads=2, vocab_size=32000, max_position_embeddings=2048)
    ids = _ids(cfg.vocab_size, 4, 512)
    return _train_autocast(Qwen2ForCausalLM(cfg), input_ids=ids, labels=ids, use_cache=False)


def opt_forward():
    from transformers import OPTConfig, OPTForCausalLM

    cfg = OPTConfig(hidden_size=768, ffn_dim=3072, num_hidden_layers=6, num_attention_heads=12, vocab_size=50272)
    return _forward(OPTForCausalLM(cfg), BF16, input_ids=_ids(cfg.vocab_size, 8, 256))


def gpt_neox_forward():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    cfg = GPTNeoXConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=6, num_attention_heads=16,
                        vocab_size=50304, rotary_pct=0.25)
    return _forward(GPTNeoXForCausalLM(cfg), BF16, input_ids=_ids(cfg.vocab_size, 4, 512))


def mistral_train():
    from transformers import MistralConfig, MistralForCausalLM

    cfg = MistralConfig(hidden_size=1024, intermediate_size=3584, num_hidden_layers=2, num_attention_heads=16,
                        num_key_value_heads=4, vocab_size=32000, sliding_window=256)
    ids = _ids(cfg.vocab_size, 2, 1024)
    return _train_autocast(MistralForCausalLM(cfg), input_ids=ids, labels=ids, use_cache=False)


def phi_forward():
    from transformers import PhiConfig, PhiForCausalLM

    cfg = PhiConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=4, num_attention_heads=16,
                    vocab_size=51200)
    return _forward(PhiForCausalLM(cfg), BF16, input_ids=_ids(cfg.vocab_size, 4, 512))


# -- encoders ------------------------------------------------------------------------------------------------
def bert_forward_fp16():
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(num_hidden_layers=6)
    return _forward(BertForSequenceClassification(cfg), torch.float16, input_ids=_ids(cfg.vocab_size, 32, 128))


def roberta_train():
    from transformers import RobertaConfig, RobertaForMaskedLM

    cfg = RobertaConfig(num_hidden_layers=4, vocab_size=50265)
    ids = _ids(cfg.vocab_size, 16, 128)
    return _train_autocast(RobertaForMaskedLM(cfg), input_ids=ids, labels=ids)


def distilbert_forward():
    from transformers import DistilBertConfig, DistilBertModel

    cfg = DistilBertConfig()
    ids = _ids(cfg.vocab_size, 16, 256)
    return _forward(DistilBertModel(cfg), BF16, input_ids=ids, attention_mask=torch.ones_like(ids))


# -- encoder-decoders ----------------------------------------------------------------------------------------
def t5_forward():
    """T5-small shaped encoder-decoder forward (relative position bias, RMS-style T5 layer norm)."""
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128)
    return _forward(T5ForConditionalGeneration(cfg), BF16, input_ids=_ids(cfg.vocab_size, 8, 256),
                    decoder_input_ids=_ids(cfg.vocab_size, 8, 64))


def bart_train():
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(d_model=512, encoder_layers=3, decoder_layers=3, encoder_attention_heads=8,
                     decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, vocab_size=50265)
    ids = _ids(cfg.vocab_size, 8, 128)
    return _train_autocast(BartForConditionalGeneration(cfg), input_ids=ids, labels=_ids(cfg.vocab_size, 8, 64))


# -- vision transformers -------------------------------------------------------------------------------------
def vit_forward_b16():
    from transformers import ViTConfig, ViTForImageClassification

    cfg = ViTConfig(num_hidden_layers=6)
    return _forward(ViTForImageClassification(cfg), BF16,
                    pixel_values=torch.randn(16, 3, 224, 224, device="cuda", dtype=BF16))


def swin_forward():
    from transformers import SwinConfig, SwinForImageClassification

    cfg = SwinConfig(depths=[2, 2, 2, 2], embed_dim=64, num_heads=[2, 4, 8, 16])
    return _forward(SwinForImageClassification(cfg), BF16,
                    pixel_values=torch.randn(8, 3, 224, 224, device="cuda", dtype=BF16))


def convnext_hf_forward():
    from transformers import ConvNextConfig, ConvNextForImageClassification

    cfg = ConvNextConfig(depths=[2, 2, 4, 2], hidden_sizes=[64, 128, 256, 512])
    return _forward(ConvNextForImageClassification(cfg), BF16,
                    pixel_values=torch.randn(16, 3, 224, 224, device="cuda", dtype=BF16))


# -- mixture of experts --------------------------------------------------------------------------------------
def mixtral_forward():
    from transformers import MixtralConfig, MixtralForCausalLM

    cfg = MixtralConfig(hidden_size=512, intermediate_size=1792, num_hidden_layers=2, num_attention_heads=8,
                        num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2, vocab_size=32000)
    return _forward(MixtralForCausalLM(cfg), BF16, input_ids=_ids(cfg.vocab_size, 4, 256))


# -- audio ---------------------------------------------------------------------------------------------------
def whisper_encoder_forward():
    from transformers import WhisperConfig, WhisperModel

    cfg = WhisperConfig(d_model=384, encoder_layers=4, decoder_layers=1, encoder_attention_heads=6,
                        decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536)
    model = WhisperModel(cfg).get_encoder()
    feats = torch.randn(4, cfg.num_mel_bins, 3000, device="cuda", dtype=BF16)
    return _forward(model, BF16, input_features=feats)


def wav2vec2_train():
    """wav2vec2's conv1d feature extractor (group norm), then a small transformer encoder, trained."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    cfg = Wav2Vec2Config(num_hidden_layers=2, hidden_size=384, intermediate_size=1536, num_attention_heads=6,
                         vocab_size=32, mask_time_prob=0.0, layerdrop=0.0)
    model = Wav2Vec2ForCTC(cfg)
    audio = torch.randn(4, 32000, device="cuda")
    labels = torch.randint(1, 32, (4, 40), device="cuda")
    return _train_autocast(model, input_values=audio, labels=labels)


# -- decode with a KV cache ----------------------------------------------------------------------------------
def llama_decode_static_cache():
    """One decode step (batch 8, 1 new token) of a 4-layer Llama with nn-style RMSNorm, against a static
    KV cache of 1024 positions, 512 of them filled."""
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=4, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000)
    model = LlamaForCausalLM(cfg).to("cuda", BF16).eval()
    cache = StaticCache(config=cfg, max_cache_len=1024)
    with torch.no_grad():
        model(input_ids=_ids(cfg.vocab_size, 8, 512), past_key_values=cache, use_cache=True)
    ids = _ids(cfg.vocab_size, 8, 1)
    position = torch.tensor([512], device="cuda")

    def step(ids, position):
        with torch.no_grad():
            return model(input_ids=ids, past_key_values=cache, cache_position=position, use_cache=True).logits

    return step, (ids, position)


def gpt2_decode_dynamic_cache():
    """One decode step of GPT-2 small (batch 4) with a DynamicCache rebuilt from a 256-token prefix each step."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config()
    model = GPT2LMHeadModel(cfg).to("cuda", BF16).eval()
    prefix = _ids(cfg.vocab_size, 4, 256)
    with torch.no_grad():
        past = model(input_ids=prefix, use_cache=True).past_key_values
    ids = _ids(cfg.vocab_size, 4, 1)

    def step(ids):
        with torch.no_grad():
            return model(input_ids=ids, past_key_values=past, use_cache=True).logits

    return step, (ids,)
