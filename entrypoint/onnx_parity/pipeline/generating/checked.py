"""One generating model (`generate`) through the stages, in its worker: the prompts, the model,
the export of one decoder-with-past step, and greedy decoding on both sides.

Like one_model.py it decides nothing and builds no finding: models/ says what the cache holds
and synthesises the step's spec and samples (optimum's layout, every axis declared), export/
exports them as any structured call (both exporters, or `export-command`), and verification/
decodes and judges.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.export import (
    ExportOutcome,
    ModelFacts,
    drop_program_weights,
    export_model,
    inspect_model,
    model_findings,
    wanted,
)
from onnx_parity.findings import Severity
from onnx_parity.models import (
    BoundInputs,
    EvalTokens,
    OffloadedWeights,
    bind_inputs,
    build_model,
    cache_shape,
    cast_samples,
    declared_family,
    decoder_module,
    encoder_module,
    encoder_spec,
    load_eval_tokens,
    load_samples,
    position_limits,
    step_samples,
    step_spec,
)
from onnx_parity.pipeline.generating.deploying import deployed
from onnx_parity.pipeline.generating.step_localising import Failed, localised_step
from onnx_parity.pipeline.generating.vl_generating import vl_generation_checked
from onnx_parity.pipeline.job import Ledger, ModelJob, Timer
from onnx_parity.settings import ModelSpec, at_dtype
from onnx_parity.variants import GeneratingModel, generation_variants, skipped_variants
from onnx_parity.verification import (
    Decoders,
    EncoderSide,
    check_generation,
    check_thresholds,
    deadline_for,
)

SKIPPED = ("the fp32 model did not pass, so no variant was built from it: fix its findings "
           "first (a variant is only worth checking against a verified fp32 baseline)")


def generation_checked(job: ModelJob, workdir: Path, ledger: Ledger, timer: Timer) -> None:
    spec, repo = job.spec, job.repo
    with timer.step("load samples"):
        samples = cast_samples(load_samples(spec.inputs, repo), spec.dtype)
        ledger.sample_sha256.update(samples.files)
    with timer.step("build model"):
        loaded = build_model(spec, repo)
        ledger.findings += loaded.findings
        spec = ledger.spec = at_dtype(spec, loaded.dtype)
        given = tuple(spec.inputs) if isinstance(spec.inputs, dict) else ()
        family = declared_family(loaded.module, spec.name, given)
        if family is None:
            shape = cache_shape(loaded.module, spec)
            module, step = decoder_module(loaded.module, spec, shape), step_spec(spec, shape)
            dtype = _numpy_dtype(loaded.dtype)
            bound = bind_inputs(module, step, step_samples(samples.named, shape, dtype), ())
            ledger.findings += bound.findings()
            text = _eval_tokens(spec, repo, loaded.module, ledger)
    if family is not None:  # a vision-language model: its three files (vl_generating.py)
        vl_generation_checked(job, workdir, ledger, timer, (loaded, family, samples.named))
        return
    with timer.step("export"):
        outcome = export_model(module, bound, step, repo, workdir,
                               deadline_for(spec.timeout_seconds, timer.started))
        ledger.attempts += outcome.attempts
        ledger.findings += outcome.findings
        ledger.exporter = outcome.exporter
    if outcome.model is None:
        return
    ledger.onnx_path, ledger.onnx_files = str(outcome.model.path), outcome.model.stored()
    ledger.onnx_sha256 = ledger.onnx_files[0].sha256
    facts = inspect_model(outcome.model)
    ledger.opset = facts.opset
    ledger.findings += model_findings(facts, step)
    encoder = None
    if shape.encoder:
        with timer.step("export encoder"):
            encoder = _encoder(loaded.module, samples.named, job, workdir, ledger)
        if encoder is None:
            return
    # Its file is saved: the program's ONNX graph is not read again (localisation reads its
    # exported_program), and its initializers would keep the weights when they are written out.
    drop_program_weights(outcome.program)
    flat = spec.generate is not None and spec.generate.cache == "flat"
    weights = OffloadedWeights(loaded.module, workdir / f".{spec.name}.weights")
    decoders = Decoders(loaded.module, outcome.model.path, shape, flat, dtype, job.threads,
                        encoder, weights)
    try:
        _generated(Exported(outcome, step, (module, bound), facts, text), decoders,
                   (job, samples.named, workdir), ledger, timer)
    finally:
        weights.discard()


@dataclass(frozen=True)
class Exported:
    """The decoder's export: its outcome, the step's spec (step_spec), the module the exporters
    saw with its call, the file's facts, and `eval-tokens` for the variants."""

    outcome: ExportOutcome
    step: ModelSpec
    module: tuple[Any, BoundInputs]
    facts: ModelFacts
    text: EvalTokens | None


def _generated(exported: Exported, decoders: Decoders,
               given: tuple[ModelJob, dict[str, np.ndarray], Path], ledger: Ledger,
               timer: Timer) -> None:
    """The decoding on both sides (PyTorch's weights out of memory while onnxruntime decodes,
    verification/generation/checked.py), then whatever runs PyTorch again with its weights read back:
    the threshold steps, localisation of a failing step, the bundles' loop, the variants."""
    (job, prompts, workdir), spec, outcome = given, ledger.spec, exported.outcome
    assert outcome.model is not None
    assert decoders.weights is not None
    with timer.step("generate"):
        generated = check_generation(decoders, prompts, spec, ledger.findings)
    with timer.step("thresholds"):  # the config's position thresholds, crossed
        context = spec.generate.max_context if spec.generate else None
        limits = position_limits(decoders.module, context)
        if limits.thresholds:  # PyTorch's steps beside the generation check's session
            decoders.weights.restore()
        crossed = check_thresholds(decoders, prompts, spec, limits, generated.session)
    generated.session = None  # onnxruntime's memory back before localisation
    if generated.failing is not None or wanted(spec) or spec.variants:
        decoders.weights.restore()  # they run PyTorch again
    findings = generated.findings
    if generated.failing is not None:  # a step outside the tolerance: where it starts
        with timer.step("localise"):
            findings = localised_step(Failed(outcome, exported.step, generated.failing, findings),
                                  exported.module, job, ledger, timer)
    ledger.findings += findings + crossed.findings
    ledger.comparisons += generated.comparisons
    ledger.generation = dataclasses.replace(generated.result, thresholds=crossed.runs)
    if wanted(spec):  # `bundle`, `runtime`: the folders each runtime loads, its own loop
        with timer.step("bundles"):
            facts = exported.facts
            done = deployed(decoders, (tuple(facts.inputs), tuple(facts.outputs)),
                            prompts, spec, workdir, ledger.generation)
        ledger.findings += done.findings
        ledger.generation = done.result
    if spec.variants:
        with timer.step("variants"):
            _variants(GeneratingModel(outcome.model, decoders, prompts, spec,
                                      workdir / f"{spec.name}.variants", exported.text), ledger)


def _eval_tokens(spec: ModelSpec, repo: Path, module: Any, ledger: Ledger) -> EvalTokens | None:
    """`eval-tokens`, read (and checked against the vocabulary) before the export, when a
    variant will be scored on it."""
    if spec.eval_tokens is None or not spec.variants:
        return None
    vocab = getattr(getattr(module, "config", None), "vocab_size", None)
    text = load_eval_tokens(spec.eval_tokens, repo, vocab if isinstance(vocab, int) else None)
    ledger.sample_sha256[text.file] = text.sha256
    return text


def _encoder(module: Any, samples: dict[str, np.ndarray], job: ModelJob, workdir: Path,
             ledger: Ledger) -> EncoderSide | None:
    """An encoder-decoder's encoder, exported beside the decoder as `<name>.encoder.onnx` and
    stored as the model's second file (publishing moves it beside `<name>.onnx`)."""
    spec = encoder_spec(ledger.spec, tuple(samples))
    wrapped = encoder_module(module)
    bound = bind_inputs(wrapped, spec, samples, ())
    outcome = export_model(wrapped, bound, spec, job.repo, workdir)
    ledger.attempts += outcome.attempts
    ledger.findings += outcome.findings
    if outcome.model is None:
        return None
    ledger.onnx_files = (*ledger.onnx_files, *outcome.model.stored())
    return EncoderSide(outcome.model.path, dict(samples))


def _variants(model: GeneratingModel, ledger: Ledger) -> None:
    """Deployment variants, built only from an fp32 decoder that passed, checked by decoding."""
    if any(finding.severity == Severity.ERROR for finding in ledger.findings):
        checked = skipped_variants(model.spec, model.fp32.size_bytes, SKIPPED)
    else:
        checked = generation_variants(model)
    ledger.variants += checked.results
    ledger.findings += checked.findings


def _numpy_dtype(name: str) -> Any:
    try:
        return np.dtype(name)
    except TypeError:  # bfloat16: numpy has none; the cache is then float32 on both sides
        return np.dtype("float32")
