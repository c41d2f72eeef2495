"""A tiny GPT-2 from transformers, end to end: `attention_mask` sits behind `past_key_values=None`
in forward, so it binds by keyword, through both the exporter and the PyTorch reference."""

from __future__ import annotations

import inspect

import pytest


@pytest.mark.slow
def test_tiny_gpt2_with_ids_and_mask_passes_at_every_shape(check_model):
    config = ('batch-sizes = [1, 3]\n[[model]]\nname = "gpt2"\nfactory = "models.language:tiny_gpt2"\n'
              'inputs = { input_ids = "samples/ids.npy", attention_mask = "samples/mask.npy" }\n'
              'dynamic-axes = { input_ids = { 0 = "batch", 1 = "sequence" }, '
              'attention_mask = { 0 = "batch", 1 = "sequence" } }\n')
    result = check_model(config)
    assert result.passed, [(f.code, f.message) for f in result.findings]
    assert result.exporter == "dynamo"
    assert result.dimension_sizes == {"sequence": (6, 3, 5, 8, 1)}
    shapes = {(c.batch_size, c.input_shapes["input_ids"]) for c in result.comparisons}
    assert shapes == {(batch, (batch, length)) for batch in (1, 3) for length in (6, 3, 5, 8, 1)}
    assert result.max_abs_diff < 1e-4
    assert [c.output for c in result.comparisons][:1] == ["logits"]


def test_the_mask_is_not_the_second_positional_parameter() -> None:
    """What makes positional binding wrong for this model (and keyword binding necessary)."""
    from fixture_repo.models.language import tiny_gpt2

    parameters = list(inspect.signature(tiny_gpt2().forward).parameters)
    assert parameters[:3] == ["input_ids", "past_key_values", "attention_mask"]
