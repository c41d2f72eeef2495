"""A vision-language model's failing vision or embedding file localised as any failing model
is.

Each failing call runs through its file again as a cut against the module the file was
exported from (the family's wrapper). Where the two agree, the file is not to blame: the
wrapper computes otherwise than the model's own code, and the call's finding says so. The
first call where they differ is localised (verification/localisation/localise.py): its first diverging node
named at the user's (or the library's) line, and the repro folder that runs that subgraph of
the file alone (repro.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from onnx_parity.export import ExportOutcome
from onnx_parity.findings import Finding
from onnx_parity.models import bind_inputs, embedding_samples, vision_samples
from onnx_parity.pipeline.job import Ledger, ModelJob, Timer
from onnx_parity.settings import ModelSpec
from onnx_parity.verification import (
    Cut,
    CutRun,
    FailingCall,
    Localisation,
    attach_localised,
    deadline_for,
    file_repro,
    localisation_target,
    localise,
    open_session,
    run_cut,
)

# What each file's wrapper stands for in the model's own code.
MODEL_CODE = {"vision": "the model's own get_image_features",
              "embedding": "the model's own placeholder merge"}


@dataclass(frozen=True)
class Part:
    """One of the pipeline's other files as exported: the module, its spec and outcome."""

    module: Any
    spec: ModelSpec
    outcome: ExportOutcome


def localised_parts(parts: dict[str, Part], failing: list[FailingCall],
                    findings: list[Finding], run: tuple[ModelJob, Ledger, Timer]
                    ) -> list[Finding]:
    """The findings with each failing call's told apart: the wrapper's own difference, or the
    file's, the first of which is localised and moved to its line."""
    for call in failing:
        part = parts[call.file]
        if part.outcome.model is None:
            continue
        bound, cut = _cut(part, call, run[0].threads)
        mine = [finding for finding in findings if finding.message.startswith(call.where)]
        target = localisation_target(mine, [cut])
        if target is None:  # the file computes what the wrapper computes there
            findings = [_wrapper_differs(finding, cut, call.file) if finding in mine
                        else finding for finding in findings]
        elif run[1].repro is None:
            localised = _localised(part, bound, target, run)
            attached = dict(zip(map(id, mine), attach_localised(mine, localised, run[0].repo),
                                strict=True))  # each in its place: the calls' order stays
            findings = [attached.get(id(finding), finding) for finding in findings]
    return findings


def _cut(part: Part, call: FailingCall, threads: int) -> tuple[Any, CutRun]:
    """The call through the file and its wrapper again (the samples laid as exported)."""
    assert part.outcome.model is not None
    samples = (vision_samples(call.feed) if call.file == "vision" else
               embedding_samples(call.feed["input_ids"], call.feed["image_features"]))
    bound = bind_inputs(part.module, part.spec, samples, ())
    session = open_session(part.outcome.model.path, part.spec.runtime_optimization, threads)
    rows = len(call.feed["input_ids"]) if "input_ids" in call.feed else 1
    feed = {name: np.asarray(value) for name, value in call.feed.items()}
    return bound, run_cut(part.module, session, bound, part.spec, Cut(feed, rows))


def _localised(part: Part, bound: Any, target: tuple[CutRun, str, bool],
               run: tuple[ModelJob, Ledger, Timer]) -> Any:
    job, ledger, timer = run
    outcome, spec = part.outcome, part.spec
    assert outcome.model is not None
    request = Localisation(
        part.module, outcome.program, outcome.exporter or "", outcome.model, bound, spec,
        job.repo, deadline_for(spec.timeout_seconds, timer.started), outcome.attempts)
    localised = localise(request, *target)
    ledger.divergence, ledger.repro = localised.divergence, localised.repro
    if ledger.repro is None:  # no node named: the file alone, rerun at that call
        ledger.repro = file_repro(ledger.spec.name, outcome.model, target[0], spec, job.repo)
    return localised


def _wrapper_differs(finding: Finding, cut: CutRun, file: str) -> Finding:
    """A finding told that the exported file agrees with the module it was exported from:
    the wrapper's code, not the export, differs from the model's own."""
    if not cut.rows or any(not row.passed for row in cut.rows):
        return finding
    worst = max((row.max_abs_diff or 0.0 for row in cut.rows), default=0.0)
    return replace(finding, message=(
        f"{finding.message}. The file agrees with the module it was exported from there "
        f"(max abs diff {worst:.2g}): that module, the family's {file} wrapper, computes "
        f"otherwise than {MODEL_CODE[file]}, so no node of the file is to blame"))
