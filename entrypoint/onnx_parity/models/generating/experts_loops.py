"""A mixture-of-experts layer dispatched by a Python loop over the experts a batch hit.

`for expert in expert_hit:` (transformers' `eager` experts, or a user's own) runs once per
expert the batch routed to: dynamo refuses the data-dependent count, and TorchScript unrolls
the loop over the experts its export batch hit, so the file computes only those experts, and
wrongly for any token routed elsewhere. The finding names the loop's line (moe.py finds it in
the module's own forward) and the data-independent implementation that replaces it; the export
stage adds it to the export's findings (export/outcome.py), since it is what the trace gets
wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onnx_parity.findings import Finding
from onnx_parity.locations import repo_relative, scrub_paths
from onnx_parity.models.generating.moe import DispatchLoop, dispatch_loops

LIBRARY_FIX = (
    'Run the experts data-independently: model.set_experts_implementation("batched_mm") (or '
    'experts_implementation="batched_mm" in from_pretrained or the config), which computes '
    "every expert's weights in the graph. Left at transformers' default `grouped_mm`, the tool "
    "exports `batched_mm` itself while PyTorch runs `grouped_mm`.")
USER_FIX = (
    "Replace the loop with a data-independent dispatch that holds every expert in the graph: "
    "gather each (token, expert) pair's weights and multiply them in one batch, as transformers' "
    "`batched_mm` does (transformers.integrations.moe.batched_mm_experts_forward), or decorate "
    "the experts module with transformers' `@use_experts_implementation` (weights stacked as "
    "gate_up_proj and down_proj), which the tool exports as `batched_mm`.")


def loop_findings(module: Any, repo: Path) -> list[Finding]:
    """One `expert-dispatch-loop` error per loop of the module's experts, at the user's line
    where it is theirs."""
    return [_finding(loop, repo) for loop in dispatch_loops(module)]


def _installed(path: str, repo: Path) -> str:
    """`transformers/models/...`: the path inside the packages' folder, as other findings say."""
    marker = "site-packages/"
    return path.split(marker, 1)[1] if marker in path else scrub_paths(path, [repo])


def _finding(loop: DispatchLoop, repo: Path) -> Finding:
    relative = repo_relative(loop.path, repo)
    where = (f"{relative}:{loop.line}" if relative is not None
             else f"{_installed(loop.path, repo)}:{loop.line} (an installed package)")
    whose = ("transformers' `eager` experts" if loop.library_eager
             else f"{loop.kind}'s own forward")
    return Finding(
        "expert-dispatch-loop",
        f"{loop.module} ({loop.kind}) dispatches its experts by a Python loop over the experts "
        f"a batch hit, {whose} at {where}: `{loop.source}`. dynamo refuses the data-dependent "
        "count; a TorchScript trace unrolls it over the experts its export batch hit, so the "
        "file computes no other expert",
        file=relative, line=loop.line if relative is not None else None,
        fix=LIBRARY_FIX if loop.library_eager else USER_FIX)
