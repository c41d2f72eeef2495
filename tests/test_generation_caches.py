"""The past a generating model's file takes is what its own cache holds (issue 34, §4): read
after a prompt pass, not computed from `num_key_value_heads x head_dim`. DeepSeek-V3's MLA
caches a latent of one head (keys 16 wide, values 8), Falcon's multi-query attention one head;
config arithmetic made both fail in PyTorch ("Sizes of tensors must match"). A cache of
convolution states that no hybrid family takes is a load-error naming its layer, not a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_repo.harness import left_padded_prompts, run_cli, write_model_repo
from test_generation import onnx_layout

MODELS = '''
import torch
from transformers import AutoConfig, AutoModelForCausalLM

BASE = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=64)


def build(kind, **extra):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **BASE, **extra)).eval()


def deepseek_v3():
    """MLA with its dense layers only (first_k_dense_replace covers both)."""
    return build("deepseek_v3", num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=24,
                 qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=12,
                 first_k_dense_replace=2, n_routed_experts=4, num_experts_per_tok=2,
                 moe_intermediate_size=32, n_group=1, topk_group=1)


def falcon():
    return build("falcon", multi_query=True, new_decoder_architecture=False)

'''

INPUTS = ('inputs = { input_ids = "samples/input_ids.npy", attention_mask = '
          '"samples/attention_mask.npy" }\n')


@pytest.mark.slow
def test_the_past_is_what_the_models_own_cache_holds(tmp_path: Path) -> None:
    config = "".join(f'[[model]]\nname = "{name}"\nfactory = "models.library:{name}"\n'
                     + INPUTS + "generate = { steps = 4 }\n"
                     for name in ("deepseek_v3", "falcon"))
    repo = write_model_repo(tmp_path, ("library", MODELS), left_padded_prompts(6), config)
    run = run_cli("check", "--jobs", "1", cwd=repo, out=tmp_path / "out")
    assert run.code == 0, run.stdout + run.stderr
    models = run.models()
    for name, key, value in (("deepseek_v3", 16, 8), ("falcon", 8, 8)):
        result = models[name]
        assert result["passed"], result["findings"]
        assert result["generation"]["tokens_agree"] == [4] * 4
        layout = onnx_layout(tmp_path / "out" / f"{name}.onnx")
        assert layout["past_key_values.1.key"] == ["batch", 1, "past_sequence", key]
        assert layout["past_key_values.1.value"] == ["batch", 1, "past_sequence", value]


def test_each_layers_heads_and_width_are_read_from_the_cache() -> None:
    """Falcon's new decoder architecture caches every query head (4), not num_kv_heads (2);
    Gemma 3's sliding and full layers alike."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from onnx_parity.models.generating.base import PastTensor
    from onnx_parity.models.generating.cache_layout import read_layout

    base = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=64)
    for kind, extra, expected in (
            ("falcon", dict(new_decoder_architecture=True, num_kv_heads=2), PastTensor(4, 8)),
            ("gemma3_text", dict(num_key_value_heads=2, head_dim=16, sliding_window=4,
                                 layer_types=["sliding_attention", "full_attention"]),
             PastTensor(2, 16))):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **base, **extra))
        layout = read_layout(model.eval(), {})
        assert (layout.tensors, layout.whole_prefix) == ((expected,) * 4, "")


def test_a_cache_no_file_can_carry_says_why_the_loop_reruns_the_prefix() -> None:
    """LFM2's convolution layer, read as if it held keys and values (its own family,
    models/generating/lfm2.py, takes it before the dense one asks); MiniMax's own cache class,
    which keeps its linear-attention states beside its layers; a BertLMHeadModel built
    without is_decoder, which returns no cache at all. Llama's rebuilt step is its own."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from onnx_parity.models.generating.cache_layout import read_layout

    base = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=64, num_key_value_heads=2)
    for kind, extra, reason in (
            ("lfm2", dict(layer_types=["conv", "full_attention"]),
             "layer 0 of its cache is a LinearAttentionLayer holding conv_states"),
            ("minimax", dict(layer_types=["linear_attention", "full_attention"],
                             num_local_experts=2, num_experts_per_tok=1, head_dim=8),
             "layer 0 of its MiniMaxCache holds no keys or values: the cache keeps "
             "linear_cache beside its layers"),
            ("bert", dict(), "forward returns no cache after a prompt pass"),
            ("llama", dict(), "")):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **base, **extra))
        layout = read_layout(model.eval(), {})
        assert layout.whole_prefix.startswith(reason), (kind, layout.whole_prefix)
        assert bool(layout.whole_prefix) == bool(reason), kind
