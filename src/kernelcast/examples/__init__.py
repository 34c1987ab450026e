"""Example workloads shipped with kernelcast: `kernelcast predict example:NAME`. Pure PyTorch, but for the
llama* examples, which build transformers' LlamaForCausalLM from a config (the `models` extra)."""
