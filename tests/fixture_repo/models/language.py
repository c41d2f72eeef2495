"""Real architectures from transformers, built from small configs (weights seeded, never
downloaded): the models people export with `input_ids` and `attention_mask` by keyword."""

from torch import nn


def tiny_gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0, use_cache=False)
    return GPT2LMHeadModel(config)

