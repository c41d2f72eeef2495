"""Qwen3-Next and Qwen3.5 (`Qwen3NextForCausalLM`, `Qwen3_5ForCausalLM`): full-attention layers
with keys and values, and gated delta net (`linear_attention`) layers, each with a conv state
`past.N.conv` (batch, 2 * key_dim + value_dim, linear_conv_kernel_dim - 1) and a recurrent
state `past.N.recurrent` (batch, linear_num_value_heads, linear_key_head_dim,
linear_value_head_dim), the layout onnxruntime-genai 0.18's Qwen3.5 builder writes.

The step is exported from the chunked rule over a past state (`torch_chunk_gated_delta_rule`
with `initial_state`), which computes the one-token recurrence too. dynamo specialises the
rule's chunk padding at a dynamic sequence, so it is TorchScript that exports it, and
TorchScript has no `linalg.solve_triangular`: the model's own export branch (forward
substitution) is taken during any ONNX export, as it is under torch.export; PyTorch's own
runs keep `solve_triangular`.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from onnx_parity.models.generating.base import DecoderFamily
from onnx_parity.models.generating.state_cache import TORCHSCRIPT_FIRST, StateFamily

MODULES = ("transformers.models.qwen3_next.modeling_qwen3_next",
           "transformers.models.qwen3_5.modeling_qwen3_5")


def take_export_branch(module: Any) -> None:
    """`is_torchdynamo_exporting()` in the models' modules, true during any ONNX export (the
    TorchScript exporter's trace too), once per process."""
    del module  # the branch is the library's, shared by every such model
    for name in MODULES:
        _exporting_in_onnx_export(name)


@functools.cache
def _exporting_in_onnx_export(name: str) -> None:
    import torch

    library = importlib.import_module(name)
    original = getattr(library, "is_torchdynamo_exporting")  # noqa: B009  (untyped module)

    def exporting() -> bool:
        return bool(torch.onnx.is_in_onnx_export() or original())

    setattr(library, "is_torchdynamo_exporting", exporting)  # noqa: B010  (untyped module)


FAMILY: DecoderFamily = StateFamily("gated-delta", ("qwen3_next", "qwen3_5_text"),
                                    prepare=take_export_branch, exporters=TORCHSCRIPT_FIRST)
