"""What a localisation changes in a failing model's findings: the parity finding of the
localised output moves to the diverging line and says where the drift starts (or why no node
is named), with the first diverging node's details; a reduced output's findings move to where
the bisection found its start (reduce.attach_reduction)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from onnx_parity.finding_details import FirstDivergence
from onnx_parity.findings import CATALOGUE, Finding
from onnx_parity.locations import source_line
from onnx_parity.results import Divergence, NodeCheck
from onnx_parity.verification.localisation.divergence_text import first_sentence
from onnx_parity.verification.localisation.localise import Localised
from onnx_parity.verification.localisation.reduce import attach_reduction


def attach_localised(findings: list[Finding], localised: Localised,
                     repo: Path) -> list[Finding]:
    """The parity finding of the localised output moves to the diverging line and says so;
    a failing finding of a reduced output, to where the bisection found its start."""
    divergence = localised.divergence
    if divergence is not None:
        findings = [_attached(f, divergence, repo)
                    if CATALOGUE[f.code].localised and f.details.get("output") == divergence.output
                    else f
                    for f in findings]
    if localised.reduced is None:
        return findings
    codes = frozenset(code for code, info in CATALOGUE.items() if info.localised)
    return attach_reduction(findings, localised.output, localised.reduced,
                            codes | {"optimizer-drift"})


def _attached(finding: Finding, divergence: Divergence, repo: Path) -> Finding:
    first = divergence.first
    if first is None:
        note = f"Not localised: {divergence.unlocalised}."
        return dataclasses.replace(finding, message=f"{finding.message}. {note}",
                                   details={**finding.details, "localisation": note})
    details = first_details(divergence, first, repo)
    return dataclasses.replace(
        finding, message=f"{finding.message}. {first_sentence(divergence, first)}",
        file=first.file or finding.file, line=first.line if first.file else finding.line,
        fix=finding.fix or _localised_fix(first),
        details={**finding.details, "first_divergence": details},
    )


def _localised_fix(first: NodeCheck) -> str:
    where = f"`{first.file}:{first.line}`" if first.file else f"node `{first.node}`"
    op = (first.op or "").removesuffix(".default")
    return (f"The drift starts at {where} (`{op}`); the nodes after it only inherit it. Change "
            "how that operation is exported (rewrite it with other operators, try the other "
            "exporter or another opset); if the drift is acceptable, raise `atol`/`rtol` for "
            "this model to the smallest passing atol shown.")


def first_details(divergence: Divergence, first: NodeCheck, repo: Path) -> FirstDivergence:
    source = source_line(repo, first.file, first.line) if first.file and first.line else None
    details: FirstDivergence = {
        "node": first.node, "op": first.op, "module": first.module, "file": first.file,
        "line": first.line, "source": source, "max_abs_diff": first.max_abs_diff,
        "max_rel_diff": first.max_rel_diff,
        "inputs_max_abs_diff": divergence.inputs_max_abs_diff,
        "nodes_compared": len(divergence.nodes), "nodes_skipped": divergence.nodes_skipped,
        "runtime_optimization": divergence.optimization, "batch_size": divergence.batch_size,
    }
    if first.library_frame:
        details["library_frame"] = first.library_frame
    return details
