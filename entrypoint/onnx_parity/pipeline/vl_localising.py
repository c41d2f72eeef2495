"""A vision-language model's failing vision file localised as any failing model is: the
failing image's call as a cut of the vision file, its first diverging node named at the
user's (or the library's) line, and the repro folder that runs that subgraph of the vision
file alone (verification/localise.py, repro.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from onnx_parity.export import ExportOutcome
from onnx_parity.findings import Finding
from onnx_parity.models import Image, bind_inputs, vision_samples
from onnx_parity.settings import ModelSpec
from onnx_parity.verification import (
    Cut,
    CutRun,
    attach_localised,
    localise,
    open_session,
    run_cut,
)

if TYPE_CHECKING:
    from onnx_parity.pipeline.one_model import Ledger, ModelJob, Timer


@dataclass(frozen=True)
class Part:
    """One of the pipeline's other files as exported: the module, its spec and outcome."""

    module: Any
    spec: ModelSpec
    outcome: ExportOutcome


def localised_vision(part: Part, failing: tuple[str, Image, np.ndarray],
                     findings: list[Finding], run: tuple[ModelJob, Ledger, Timer]
                     ) -> list[Finding]:
    """The failing image through the vision file again as a cut, localised; the findings with
    the localised one moved to its line (unchanged when nothing can be localised)."""
    job, ledger, timer = run
    outcome, spec = part.outcome, part.spec
    if outcome.model is None:
        return findings
    _, image, _ = failing
    bound = bind_inputs(part.module, spec, vision_samples(image), ())
    session = open_session(outcome.model.path, spec.runtime_optimization, job.threads)
    cut = run_cut(part.module, session, bound, spec,
                  Cut({name: np.asarray(value) for name, value in image.items()}, 1))
    target = localise.target(findings, [cut])
    if target is None:  # the file computes what the family's wrapper computes
        return [_wrapper_differs(finding, cut) for finding in findings]
    request = localise.Localisation(
        part.module, outcome.program, outcome.exporter or "", outcome.model, bound, spec,
        job.repo, localise.deadline_for(spec.timeout_seconds, timer.started), outcome.attempts)
    localised = localise.localise(request, *target)
    ledger.divergence, ledger.repro = localised.divergence, localised.repro
    return attach_localised(findings, localised, job.repo)


def _wrapper_differs(finding: Finding, cut: CutRun) -> Finding:
    """A vision finding told that the exported file agrees with the module it was exported
    from: the wrapper's code, not the export, differs from the model's own."""
    worst = max((row.max_abs_diff or 0.0 for row in cut.rows), default=0.0)
    if not cut.rows or any(not row.passed for row in cut.rows) or "vision file" not in (
            finding.message):
        return finding
    return replace(finding, message=(
        f"{finding.message}. The file agrees with the module it was exported from there "
        f"(max abs diff {worst:.2g}): that module, the family's vision wrapper, computes "
        "otherwise than the model's own get_image_features, so no node of the file is to "
        "blame"))
