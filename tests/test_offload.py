"""A model's weights written out while onnxruntime holds its copy (models/offload.py): released,
they hold no memory; read back, the model computes exactly what it computed before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from onnx_parity.models import OffloadedWeights  # noqa: E402


@pytest.fixture(scope="module")
def qwen() -> Any:
    """A tiny Qwen2 with tied embeddings (one Parameter for the embedding and the head)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        tie_word_embeddings=True)).eval()


def logits(model: Any) -> Any:
    ids = torch.arange(3, 15).reshape(2, 6)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits


def test_released_weights_hold_no_memory_and_come_back_bit_for_bit(qwen: Any,
                                                                  tmp_path: Path) -> None:
    before = logits(qwen)
    state = {name: tensor.clone() for name, tensor in qwen.state_dict().items()}
    unique = list({id(p): p for p in [*qwen.parameters(), *qwen.buffers()]}.values())
    held = sum(p.numel() * p.element_size() for p in unique)
    weights = OffloadedWeights(qwen, tmp_path / ".qwen.weights")
    written = weights.release()
    assert written == held
    assert written == (tmp_path / ".qwen.weights").stat().st_size
    assert all(p.numel() == 0 for p in unique)  # every tensor released, the tied one once
    assert qwen.lm_head.weight is qwen.model.embed_tokens.weight
    assert weights.release() == 0  # released once
    weights.restore()
    assert not (tmp_path / ".qwen.weights").exists()
    assert qwen.lm_head.weight is qwen.model.embed_tokens.weight  # still tied
    for name, tensor in qwen.state_dict().items():
        assert tensor.dtype == state[name].dtype
        assert torch.equal(tensor, state[name]), name
    assert torch.equal(logits(qwen), before)


def test_a_tensor_sharing_its_storage_is_left_in_place(tmp_path: Path) -> None:
    """A buffer that views a parameter's storage is kept, and so is the parameter: released
    alone it frees nothing, and read back alone it would no longer share."""
    module = torch.nn.Linear(8, 4)
    module.register_buffer("view", module.weight.data[0])
    weights = OffloadedWeights(module, tmp_path / ".m.weights")
    written = weights.release()
    assert written == 4 * 4  # only the bias: 4 float32
    assert module.weight.numel() == 32
    assert module.view.data_ptr() == module.weight.data_ptr()
    weights.restore()
    assert module.bias.numel() == 4
