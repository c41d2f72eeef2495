"""Granite-4 hybrid and Falcon-H1 (`GraniteMoeHybridForCausalLM`, `FalconH1ForCausalLM`): Mamba2
mixers beside attention (Granite-4: a layer is one or the other; Falcon-H1: every layer both),
each mixer with a conv state `past.N.conv` (batch, intermediate + 2 * groups * d_state,
d_conv - 1) and an SSM state `past.N.recurrent` (batch, heads, head_dim, d_state), in the
pattern of onnxruntime-genai's names (its 0.18 builder runs neither with its mamba layers).

The step is exported from the chunked scan over a past state (`initial_states`), which
computes the one-token recurrence too. dynamo specialises the scan's chunk padding at a dynamic
sequence, so TorchScript exports it; its `permute` rejects negative axes (the scan's
`decay_states.permute(0, -2, -1, 1)`), so they are made positive while it traces.
"""

from __future__ import annotations

import functools
from typing import Any

from onnx_parity.models.generating.base import DecoderFamily
from onnx_parity.models.generating.state_cache import TORCHSCRIPT_FIRST, StateFamily


def normalise_permute(module: Any) -> None:
    """torch's `Tensor.permute` with its negative axes made positive during an ONNX export
    (the same permutation; eager runs call torch's own), once per process."""
    del module  # the scan is the library's, shared by every such model
    _permute_traced_positive()


@functools.cache
def _permute_traced_positive() -> None:
    import torch

    original = torch.Tensor.permute

    def permute(self: Any, *dims: Any) -> Any:
        if torch.onnx.is_in_onnx_export():
            given = dims[0] if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims
            dims = tuple(dim % self.dim() if isinstance(dim, int) else dim for dim in given)
        return original(self, *dims)

    setattr(torch.Tensor, "permute", permute)  # noqa: B010  (torch's own, traced right)


FAMILY: DecoderFamily = StateFamily("mamba-hybrid", ("granitemoehybrid", "falcon_h1"),
                                    prepare=normalise_permute, exporters=TORCHSCRIPT_FIRST)
