"""The validation zoo: workloads chosen as a user base would bring them, by model family.

Each entry is (name, family, workload spec relative to the repository root). scripts/device/zoo_measure.py measures them
on a GPU; scripts/eval/zoo_validate.py re-captures them here and compares. Families are reported separately.
"""

from __future__ import annotations

_Z = "examples/zoo/"

ZOO: list[tuple[str, str, str]] = [
    # transformers decoders
    ("gpt2_forward_fp32_b1", "decoder", _Z + "transformers_zoo.py:gpt2_forward_fp32_b1"),
    ("qwen2_train", "decoder", _Z + "transformers_zoo.py:qwen2_train"),
    ("opt_forward", "decoder", _Z + "transformers_zoo.py:opt_forward"),
    ("gpt_neox_forward", "decoder", _Z + "transformers_zoo.py:gpt_neox_forward"),
    ("mistral_train", "decoder", _Z + "transformers_zoo.py:mistral_train"),
    ("phi_forward", "decoder", _Z + "transformers_zoo.py:phi_forward"),
    # encoders
    ("bert_forward_fp16", "encoder", _Z + "transformers_zoo.py:bert_forward_fp16"),
    ("roberta_train", "encoder", _Z + "transformers_zoo.py:roberta_train"),
    ("distilbert_forward", "encoder", _Z + "transformers_zoo.py:distilbert_forward"),
    # encoder-decoders
    ("t5_forward", "encoder_decoder", _Z + "transformers_zoo.py:t5_forward"),
    ("bart_train", "encoder_decoder", _Z + "transformers_zoo.py:bart_train"),
    # vision transformers
    ("vit_forward_b16", "vision_transformer", _Z + "transformers_zoo.py:vit_forward_b16"),
    ("swin_forward", "vision_transformer", _Z + "transformers_zoo.py:swin_forward"),
    # CNNs with batch norm
    ("resnet_forward_bf16", "cnn_batchnorm", _Z + "vision.py:resnet_forward_bf16"),
    ("resnet_train_fp32", "cnn_batchnorm", _Z + "vision.py:resnet_train_fp32"),
    ("resnet_train_channels_last", "cnn_batchnorm", _Z + "vision.py:resnet_train_channels_last"),
    ("resnet_forward_mixed_layout", "cnn_batchnorm", _Z + "vision.py:resnet_forward_mixed_layout"),
    ("tabular_batchnorm1d_train", "cnn_batchnorm", _Z + "vision.py:tabular_batchnorm1d_train"),
    # depthwise / grouped convolutions
    ("mobilenet_train", "cnn_depthwise", _Z + "vision.py:mobilenet_train"),
    ("mobilenet_forward_channels_last", "cnn_depthwise", _Z + "vision.py:mobilenet_forward_channels_last"),
    ("convnext_forward_bf16", "cnn_depthwise", _Z + "vision.py:convnext_forward_bf16"),
    ("convnext_train", "cnn_depthwise", _Z + "vision.py:convnext_train"),
    ("convnext_hf_forward", "cnn_depthwise", _Z + "transformers_zoo.py:convnext_hf_forward"),
    ("grouped_conv_channels_last", "cnn_depthwise", _Z + "misc.py:grouped_conv_channels_last"),
    ("grouped_conv_nchw", "cnn_depthwise", _Z + "misc.py:grouped_conv_nchw"),
    # RNNs
    ("lstm_train", "rnn", _Z + "recurrent.py:lstm_train"),
    ("gru_bidirectional_forward", "rnn", _Z + "recurrent.py:gru_bidirectional_forward"),
    ("rnn_tanh_train", "rnn", _Z + "recurrent.py:rnn_tanh_train"),
    ("lstm_packed_forward", "rnn", _Z + "recurrent.py:lstm_packed_forward"),
    ("lstmcell_loop_train", "rnn", _Z + "recurrent.py:lstmcell_loop_train"),
    ("grucell_loop_train", "rnn", _Z + "recurrent.py:grucell_loop_train"),
    # recommenders
    ("dlrm_train_adagrad", "recommender", _Z + "recsys_moe_graph.py:dlrm_train_adagrad"),
    ("dlrm_forward_mean", "recommender", _Z + "recsys_moe_graph.py:dlrm_forward_mean"),
    ("sparse_embedding_sgd", "recommender", _Z + "recsys_moe_graph.py:sparse_embedding_sgd"),
    ("sparse_bag_adagrad", "recommender", _Z + "recsys_moe_graph.py:sparse_bag_adagrad"),
    ("sparse_bag_mean_sgd", "recommender", _Z + "recsys_moe_graph.py:sparse_bag_mean_sgd"),
    ("sparse_embedding_sparse_adam", "recommender", _Z + "recsys_moe_graph.py:sparse_embedding_sparse_adam"),
    # mixture of experts
    ("mixtral_forward", "moe", _Z + "transformers_zoo.py:mixtral_forward"),
    ("moe_train", "moe", _Z + "recsys_moe_graph.py:moe_train"),
    ("moe_forward_bincount", "moe", _Z + "recsys_moe_graph.py:moe_forward_bincount"),
    # LLM decode with a KV cache
    ("llama_decode_static_cache", "decode_kv_cache", _Z + "transformers_zoo.py:llama_decode_static_cache"),
    ("gpt2_decode_dynamic_cache", "decode_kv_cache", _Z + "transformers_zoo.py:gpt2_decode_dynamic_cache"),
    # diffusion-style blocks
    ("unet_block_train", "diffusion", _Z + "blocks.py:unet_block_train"),
    ("unet_block_forward_fp16", "diffusion", _Z + "blocks.py:unet_block_forward_fp16"),
    # graph networks
    ("gcn_train", "graph", _Z + "recsys_moe_graph.py:gcn_train"),
    ("gat_forward_scatter", "graph", _Z + "recsys_moe_graph.py:gat_forward_scatter"),
    # audio
    ("whisper_encoder_forward", "audio", _Z + "transformers_zoo.py:whisper_encoder_forward"),
    ("wav2vec2_train", "audio", _Z + "transformers_zoo.py:wav2vec2_train"),
    ("audio_conv1d_train", "audio", _Z + "blocks.py:audio_conv1d_train"),
    ("audio_spectrogram_forward", "audio", _Z + "blocks.py:audio_spectrogram_forward"),
    ("temporal_conv_train", "audio", _Z + "blocks.py:temporal_conv_train"),
    # mixed precision
    ("amp_fp16_gradscaler_train", "mixed_precision", _Z + "blocks.py:amp_fp16_gradscaler_train"),
    ("amp_bf16_clip_train", "mixed_precision", _Z + "blocks.py:amp_bf16_clip_train"),
    # op kinds
    ("data_dependent", "op_kinds", _Z + "misc.py:data_dependent"),
    ("losses_train", "op_kinds", _Z + "misc.py:losses_train"),
    ("linalg_solve", "op_kinds", _Z + "misc.py:linalg_solve"),
    ("layernorm_odd_widths", "op_kinds", _Z + "misc.py:layernorm_odd_widths"),
    ("d2h_pageable", "op_kinds", _Z + "misc.py:d2h_pageable"),
    ("compiled_mean", "op_kinds", _Z + "misc.py:compiled_mean"),
    ("cnn_train_item", "op_kinds", _Z + "misc.py:cnn_train_item"),
    # generation loops whose exit reads the GPU (issue 31)
    ("gpt2_generate_greedy", "generation", _Z + "generation.py:gpt2_generate_greedy"),
    ("gpt2_generate_sample", "generation", _Z + "generation.py:gpt2_generate_sample"),
    ("gpt2_generate_beam", "generation", _Z + "generation.py:gpt2_generate_beam"),
    ("gpt2_generate_eos", "generation", _Z + "generation.py:gpt2_generate_eos"),
    ("llama_generate_static_cache", "generation", _Z + "generation.py:llama_generate_static_cache"),
    # kinds of program a user hits on day one (issue 31)
    ("vit_checkpointed_train", "checkpointing", _Z + "program_kinds.py:vit_checkpointed_train"),
    ("vit_plain_train", "checkpointing", _Z + "program_kinds.py:vit_plain_train"),
    ("video_conv3d_train", "cnn_3d", _Z + "program_kinds.py:video_conv3d_train"),
    ("volumetric_conv3d_forward_bf16", "cnn_3d", _Z + "program_kinds.py:volumetric_conv3d_forward_bf16"),
    ("fft_layers_train", "op_kinds", _Z + "program_kinds.py:fft_layers_train"),
    ("mlp_tf32_train", "op_kinds", _Z + "program_kinds.py:mlp_tf32_train"),
    ("lstm_inference_fp32", "rnn", _Z + "program_kinds.py:lstm_inference_fp32"),
    ("llama7b_adamw_step", "optimizers", _Z + "program_kinds.py:llama7b_adamw_step"),
    ("nerf_volume_render_train", "op_kinds", _Z + "program_kinds.py:nerf_volume_render_train"),
    ("policy_gradient_train", "op_kinds", _Z + "program_kinds.py:policy_gradient_train"),
    ("gcn_sparse_adjacency_train", "graph", _Z + "program_kinds.py:gcn_sparse_adjacency_train"),
    ("checkpoint_each_step_train", "op_kinds", _Z + "program_kinds.py:checkpoint_each_step_train"),
    ("torchscript_mlp_forward", "op_kinds", _Z + "program_kinds.py:torchscript_mlp_forward"),
    # PyTorch's fused inference path for nn.TransformerEncoder / nn.MultiheadAttention (issue 31)
    ("encoder_fastpath_forward", "encoder", _Z + "program_kinds.py:encoder_fastpath_forward"),
    ("encoder_fastpath_padded_fp16", "encoder", _Z + "program_kinds.py:encoder_fastpath_padded_fp16"),
    ("mha_fastpath_forward", "encoder", _Z + "program_kinds.py:mha_fastpath_forward"),
]

_OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adam_amsgrad", "adamw", "adamw_fused", "adagrad", "rmsprop",
               "adadelta", "adamax", "nadam", "radam", "asgd", "rprop")
ZOO += [(f"optim_{name}", "optimizers", _Z + f"optimizers.py:build_{name}") for name in _OPTIMIZERS]


def families() -> list[str]:
    return sorted({family for _, family, _ in ZOO})
