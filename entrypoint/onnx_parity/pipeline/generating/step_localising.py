"""A generating model's failing decoding step localised as any failing cut is, with its repro
folder (verification/generation/step_repro.py); shared by the decoder-only, encoder-decoder and
vision-language paths (generating/checked.py, generating/vl_generating.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onnx_parity.export import ExportOutcome
from onnx_parity.findings import Finding
from onnx_parity.models import BoundInputs
from onnx_parity.pipeline.job import Ledger, ModelJob, Timer
from onnx_parity.settings import ModelSpec
from onnx_parity.verification import (
    FailingStep,
    Localisation,
    StepCase,
    attach_localised,
    deadline_for,
    failing_cut,
    localisation_target,
    localise,
    not_localised,
    step_repro,
)


@dataclass(frozen=True)
class Failed:
    """A step outside the tolerance, with what its export made and the findings so far."""

    outcome: ExportOutcome
    step: ModelSpec  # the decoding step's spec (step_spec)
    failing: FailingStep
    findings: list[Finding]


def localised_step(failed: Failed, exported: tuple[Any, BoundInputs], job: ModelJob,
                   ledger: Ledger, timer: Timer) -> list[Finding]:
    """The failing step localised as any failing cut is (its inputs are ordinary tensors),
    with its repro folder: the localised subgraph's files when a node is named, and the
    step's whole feed in any case; the findings with the localised one moved to its line."""
    outcome, spec = failed.outcome, failed.step
    assert outcome.model is not None
    module, bound = outcome.exported or exported
    cut = failing_cut(module, outcome.model.path, bound, spec, failed.failing)
    target = localisation_target(failed.findings, [cut])
    localised = None
    if target is not None:  # else explained by a baked branch: no node to name
        request = Localisation(
            module, outcome.program, outcome.exporter or "", outcome.model, bound, spec,
            job.repo, deadline_for(spec.timeout_seconds, timer.started),
            outcome.attempts)
        localised = localise(request, *target)
        ledger.divergence = localised.divergence
    case = StepCase(ledger.spec.name, outcome.model.path, failed.failing, job.threads)
    ledger.repro = step_repro(case, ledger.spec, localised.repro if localised else None,
                              not_localised(failed.findings, localised))
    return attach_localised(failed.findings, localised, job.repo) if localised else failed.findings
