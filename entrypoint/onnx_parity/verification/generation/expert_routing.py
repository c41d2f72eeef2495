"""A mixture-of-experts decoder's routing in PyTorch over the compared steps, and its coverage.

An expert no compared token is routed to is an expert whose weights the check never compared:
its file may be wrong there and every step still agree. PyTorch's router choices are recorded
by a hook while PyTorch decodes the steps the check compares (models/generating/moe.py), not
by a second run; each layer's tokens per expert are counted on the positions compared (padded
positions and rows stopped at the end-of-sequence token left out), and an expert left without
a token is an `expert-coverage` warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from onnx_parity.findings import Finding
from onnx_parity.generation_results import ExpertLayer, ExpertsCheck
from onnx_parity.models import (
    RoutingLog,
    exported_implementations,
    implementations,
    recorded_routing,
)
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.generation.torch_steps import RecordedChunk, torch_steps

if TYPE_CHECKING:
    from onnx_parity.verification.generation.decoders import Decoders


def routed_steps(decoders: Decoders, prompt: tuple[np.ndarray, np.ndarray],
                 spec: ModelSpec) -> tuple[list[RecordedChunk], ExpertsCheck | None]:
    """PyTorch's steps (torch_steps.py), its experts' routing recorded as they run."""
    with recorded_routing(decoders.module) as log:
        chunks = torch_steps(decoders, prompt, spec)
    if not log.experts:
        return chunks, None
    compared = [(step.mask[:, -step.ids.shape[1]:] > 0) & step.live[:, None]
                for chunk in chunks for step in chunk.steps]
    routing = tuple(ExpertLayer(name, _counts(log, name, compared)) for name in log.experts)
    # an `export-command` traced the file in its own process, with what it chose
    exported = () if spec.export_command is not None else exported_implementations(
        decoders.module)
    return chunks, ExpertsCheck(implementations(decoders.module), exported, routing)


def _counts(log: RoutingLog, name: str, compared: list[np.ndarray]) -> tuple[int, ...]:
    """Tokens per expert of one layer. Its calls are the forward passes in order, one each;
    a layer called otherwise (not once per pass) is counted on every position it saw."""
    experts, calls = log.experts[name], log.calls.get(name, [])
    paired = len(calls) == len(compared) and all(
        len(chosen) == positions.size for chosen, positions in zip(calls, compared, strict=True))
    kept = [chosen[positions.reshape(-1)] for chosen, positions in zip(
        calls, compared, strict=True)] if paired else calls
    flat = np.concatenate([chosen.reshape(-1) for chosen in kept]) if kept else np.zeros(0)
    flat = flat[(flat >= 0) & (flat < experts)].astype(np.int64)  # no expert-parallel sentinel
    return tuple(int(count) for count in np.bincount(flat, minlength=experts))


def coverage_findings(check: ExpertsCheck | None) -> list[Finding]:
    """`expert-coverage` when some expert of some layer received no compared token."""
    if check is None or check.routed == check.total:
        return []
    unrouted = {layer.layer: [index for index, count in enumerate(layer.tokens) if not count]
                for layer in check.routing if layer.routed < len(layer.tokens)}
    where = "; ".join(f"{layer} experts {', '.join(map(str, experts))}"
                      for layer, experts in unrouted.items())
    missing = check.total - check.routed
    return [Finding(
        "expert-coverage",
        f"{missing} of {check.total} experts received no token at any compared step, so their "
        f"weights were never compared ({len(unrouted)} of {len(check.routing)} mixture-of-"
        f"experts layers): {where}",
        details={"unrouted": unrouted},
        fix="Give prompts that reach every expert: more prompts or longer ones (each token goes "
            "to its top-k experts at every layer), or `eval-tokens` rows of real text for the "
            "variants; report.json's generation.routing has the tokens each expert received.")]
