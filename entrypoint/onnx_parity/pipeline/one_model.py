"""One model through the stages: samples, build, export, check the export, verify.

`run_model` is the job each worker process runs. It never raises for anything the user's
model, samples or exporter do: every stage turns what it meets into findings, and whatever was
measured before a failure stays in the result. This module decides nothing and builds no
finding: it calls each stage in order and keeps the ledger.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.export import (
    ExportOutcome,
    drop_program_weights,
    export_model,
    inspect_model,
    model_findings,
)
from onnx_parity.findings import Severity
from onnx_parity.model_files import ModelFile
from onnx_parity.models import (
    BoundInputs,
    LoadedModel,
    LoadError,
    ReferenceFailure,
    SampleSet,
    bind_inputs,
    build_model,
    cast_samples,
    load_finding,
    load_samples,
)
from onnx_parity.pipeline.cache.reads import record_reads
from onnx_parity.pipeline.generating.checked import generation_checked
from onnx_parity.pipeline.job import Ledger, ModelJob, Progress, Timer
from onnx_parity.pipeline.threads import use_torch_threads
from onnx_parity.results import ModelResult
from onnx_parity.settings import ModelSpec, at_dtype
from onnx_parity.variants import VerifiedModel, check_variants, skipped_variants
from onnx_parity.verification import (
    Assumed,
    CutRun,
    Exported,
    Localisation,
    TorchSide,
    Verified,
    attach_localised,
    deadline_for,
    frozen,
    localisation_target,
    localise,
    reference_finding,
    sample_notes,
    verify_model,
)

SKIPPED = ("the fp32 model did not pass, so no variant was built from it: fix its findings "
           "first (a variant is only worth checking against a verified fp32 baseline)")


@dataclass(frozen=True)
class Built:
    """What the stages before verification made of the model: its module, bound samples, export."""

    loaded: LoadedModel
    bound: BoundInputs
    samples: SampleSet
    outcome: ExportOutcome


def run_model(job: ModelJob, workdir: Path, progress: Progress) -> ModelResult:
    """The worker's job. Factories and forward run with the repository root as the working
    directory, as its owner runs them: a factory may open "configs/m.json". Every file the
    worker itself writes is at an absolute path in `workdir`, so the change of directory
    touches none of them (and it is undone on return, for run_in_process)."""
    spec, repo, workdir = job.spec, job.repo, workdir.resolve()
    reads = record_reads(repo, unwatched=(workdir,))
    _tolerant_console()
    if job.threads:
        print(f"onnx-parity: {use_torch_threads(job.threads)}; onnxruntime {job.threads}")
    ledger = Ledger(spec)
    try:
        with contextlib.chdir(repo.resolve()):
            _stages(job, workdir, ledger, Timer(ledger, progress, time.monotonic()))
    except LoadError as error:
        ledger.findings.append(load_finding(error))
    except ReferenceFailure as error:  # PyTorch cannot run the samples before any export
        ledger.findings.append(reference_finding(error, error.batch_size or 1, repo))
    return dataclasses.replace(ledger.result(), files_read=reads.snapshot(),
                               max_rss_bytes=_max_rss_bytes())


def _stages(job: ModelJob, workdir: Path, ledger: Ledger, timer: Timer) -> None:
    if job.spec.generate is not None:  # checked the way it generates, token by token
        generation_checked(job, workdir, ledger, timer)
        return
    fp32 = _checked(job, workdir, ledger, timer)
    if fp32 is not None and job.spec.variants:
        # The check's frame is gone, and with it PyTorch's module and dynamo's program (whose
        # graphs hold reference cycles): their weights leave memory before the converters load
        # the model's, which for a model past 2 GiB would otherwise sit beside them.
        gc.collect()
        with timer.step("variants"):
            _variants(fp32, job, workdir, ledger)


def _checked(job: ModelJob, workdir: Path, ledger: Ledger,
             timer: Timer) -> VerifiedModel | None:
    """The fp32 check, into the ledger; what the variants need of it, never PyTorch's module."""
    spec, repo = job.spec, job.repo
    with timer.step("load samples"):
        samples = _load(spec, repo, ledger)
    with timer.step("build model"):
        loaded, bound = _build(spec, repo, samples, ledger)
    # The tolerances the configuration leaves out follow the dtype the model computes in.
    job = dataclasses.replace(job, spec=at_dtype(spec, loaded.dtype))
    spec = ledger.spec = job.spec
    with timer.step("export"):
        outcome = export_model(loaded.module, bound, spec, repo, workdir,
                               deadline_for(spec.timeout_seconds, timer.started))
        _record_export(outcome, ledger)
    if outcome.model is None:
        if outcome.frozen:
            ledger.findings += frozen.before_export(bound, outcome.frozen.evidence,
                                                    outcome.frozen.place)
        return None
    _record_model(outcome.model, ledger)
    built = Built(loaded, bound, samples, outcome)
    with timer.step("verify"):
        verified = _verify(built, job, ledger)
    failure = localisation_target(verified.findings, verified.failed)
    if failure is not None:
        with timer.step("localise"):
            _localise(built, failure, verified, job, ledger, timer)
    ledger.findings = verified.judged(ledger.findings) + verified.findings
    ledger.comparisons += verified.comparisons
    ledger.axis_sizes, ledger.dimension_sizes = verified.axis_sizes, verified.dimension_sizes
    ledger.lengths = verified.lengths
    ledger.linked_axes = verified.linked_axes
    drop_program_weights(outcome.program)  # localisation is done
    # Only the cuts PyTorch ran: a failed one's error keeps its traceback's frames alive.
    ran = [run for run in verified.runs if run.reference is not None]
    return VerifiedModel(outcome.model, ran, verified.bound)


def _variants(fp32: VerifiedModel, job: ModelJob, workdir: Path, ledger: Ledger) -> None:
    """Deployment variants, built only from an fp32 model that passed."""
    spec = job.spec
    if any(finding.severity == Severity.ERROR for finding in ledger.findings):
        checked = skipped_variants(spec, fp32.model.size_bytes, SKIPPED)
    else:
        folder = workdir / f"{spec.name}.variants"
        checked = check_variants(fp32, spec, job.repo, folder, job.threads)
    ledger.variants += checked.results
    ledger.findings += checked.findings


def _verify(built: Built, job: ModelJob, ledger: Ledger) -> Verified:
    outcome = built.outcome
    assert outcome.model is not None  # only an exported model is verified
    facts = inspect_model(outcome.model)
    ledger.opset = facts.opset
    ledger.findings += model_findings(facts, job.spec)
    exported = Exported(outcome.model, facts, outcome.export_batch, outcome.frozen,
                        outcome.findings, Assumed(outcome.assumptions, outcome.constant_shapes,
                                                      outcome.loops))
    torch_side = TorchSide(built.loaded.module, built.bound, built.samples.golden)
    return verify_model(torch_side, exported, job.spec, job.repo, job.threads)


def _localise(built: Built, failure: tuple[CutRun, str, bool], verified: Verified,
              job: ModelJob, ledger: Ledger, timer: Timer) -> None:
    outcome, spec = built.outcome, job.spec
    assert outcome.model is not None
    # A call with structure was exported through a flat wrapper: localisation runs that.
    module, bound = outcome.exported or (built.loaded.module, built.bound)
    request = Localisation(
        module, outcome.program, outcome.exporter or "", outcome.model,
        bound, spec, job.repo, deadline_for(spec.timeout_seconds, timer.started),
        outcome.attempts)
    localised = localise(request, *failure)
    ledger.divergence, ledger.repro = localised.divergence, localised.repro
    verified.findings = attach_localised(verified.findings, localised, job.repo)


def _load(spec: ModelSpec, repo: Path, ledger: Ledger) -> SampleSet:
    samples = cast_samples(load_samples(spec.inputs, repo), spec.dtype)
    ledger.sample_sha256.update(samples.files)
    ledger.findings += sample_notes(samples.notes)
    return samples


def _build(spec: ModelSpec, repo: Path, samples: SampleSet,
           ledger: Ledger) -> tuple[LoadedModel, BoundInputs]:
    loaded = build_model(spec, repo)
    ledger.findings += loaded.findings
    bound = bind_inputs(loaded.module, spec, samples.named, samples.positional, samples.golden)
    ledger.findings += bound.findings()
    return loaded, bound


def _record_export(outcome: ExportOutcome, ledger: Ledger) -> None:
    ledger.attempts += outcome.attempts
    ledger.findings += outcome.findings
    ledger.exporter = outcome.exporter


def _record_model(model: ModelFile, ledger: Ledger) -> None:
    """The exported files, where the export wrote them, with each one's size and sha256."""
    ledger.onnx_path = str(model.path)
    ledger.onnx_files = model.stored()
    ledger.onnx_sha256 = ledger.onnx_files[0].sha256


def _max_rss_bytes() -> int:
    """The worker's peak resident memory so far (Linux counts ru_maxrss in KiB; the zygote's
    pages it was forked with count from the start)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _tolerant_console() -> None:
    """An ascii console must not turn an exporter's emoji into a crash."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure: Any = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def run_in_process(spec: ModelSpec, repo: Path, workdir: Path,
                   progress: Progress = lambda _step: None) -> ModelResult:
    """For tests: the same job without a worker process (build_model seeds as usual)."""
    return run_model(ModelJob(spec, repo), workdir, progress)
