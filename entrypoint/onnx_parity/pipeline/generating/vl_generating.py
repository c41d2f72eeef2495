"""A vision-language model (`generate` on a model whose family models/vision_language/
knows) through the stages, in its worker: its three files exported, the vision and embedding
files checked against the model's own code, then greedy decoding through the three files.

Like generating.py it decides nothing and builds no finding: models/ says what each file
takes (its family), export/ exports each as any call (both exporters in order, the user's
`export-command` for none of them), verification/ runs and judges.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.export import (
    ExportOutcome,
    drop_program_weights,
    export_model,
    inspect_model,
    model_findings,
    wanted,
)
from onnx_parity.findings import Finding
from onnx_parity.generation_results import PipelineChecks
from onnx_parity.models import (
    Family,
    Image,
    LoadedModel,
    LoadError,
    OffloadedWeights,
    PipelineContract,
    ReferenceFailure,
    bind_inputs,
    cache_shape,
    decoder_samples,
    decoder_spec,
    embedding_samples,
    embedding_spec,
    position_limits,
    vision_samples,
    vision_spec,
)
from onnx_parity.pipeline.generating.step_localising import Failed, localised_step
from onnx_parity.pipeline.generating.vl_deploying import Exported, vl_deployed
from onnx_parity.pipeline.generating.vl_localising import Part, localised_parts
from onnx_parity.pipeline.job import Ledger, ModelJob, Timer
from onnx_parity.settings import ModelSpec
from onnx_parity.variants import skipped_variants
from onnx_parity.verification import (
    Decoders,
    FilesChecked,
    PipelineSide,
    check_files,
    check_generation,
    check_vl_thresholds,
    deadline_for,
    open_pipeline,
)

UNBUILT = ("variants of a vision-language model's files are not built yet: the fp32 pipeline "
           "(its vision, embedding and decoder files) is what was checked")
DECODING = ("parity-mismatch", "generation-mismatch", "nan-or-inf", "runtime-error")
POSITIONS = {True: "3-D (3, batch, sequence): the model's rope index at the prompt "
                   "(_prepare_position_ids_for_generation), then each position plus one",
             False: "the mask's cumulative sum at the prompt, then each position plus one"}


def vl_generation_checked(job: ModelJob, workdir: Path, ledger: Ledger, timer: Timer,
                          loaded: tuple[LoadedModel, Family, dict[str, np.ndarray]]) -> None:
    """The whole check of a vision-language model (built, its family found, its samples
    read), into the ledger."""
    spec, (built, family, samples) = ledger.spec, loaded
    model = built.module
    contract, prompts = _contract(family, model, spec, samples)
    dtype = np.dtype("float32") if built.dtype == "bfloat16" else np.dtype(built.dtype)
    decoder, step = decoder_spec(spec, contract), family.decoder_module(model)
    bound = bind_inputs(step, decoder, decoder_samples(len(prompts["input_ids"]), contract,
                                                        dtype), ())
    with timer.step("export"):
        outcome = export_model(step, bound, decoder, job.repo, workdir,
                               deadline_for(spec.timeout_seconds, timer.started))
        _record(outcome, ledger)
    if outcome.model is None:
        return
    ledger.onnx_path, ledger.onnx_sha256 = str(outcome.model.path), ledger.onnx_files[0].sha256
    facts = inspect_model(outcome.model)
    ledger.opset = facts.opset
    ledger.findings += model_findings(facts, decoder)
    with timer.step("export vision and embedding"):
        parts = _parts(family, model, (contract, prompts), job, ledger, workdir)
    if parts is None:
        return
    drop_program_weights(outcome.program)
    vision, embedding = parts
    assert vision.outcome.model is not None
    assert embedding.outcome.model is not None
    side = PipelineSide(family, contract, vision.outcome.model.path,
                        embedding.outcome.model.path, prompts)
    with timer.step("vision and embedding"):
        files = check_files(side, open_pipeline(side, spec.runtime_optimization, job.threads),
                            model, spec)
    if files.failing:  # where a file differs from its wrapper, localised
        with timer.step("localise vision and embedding"):
            files.findings = localised_parts({"vision": vision, "embedding": embedding},
                                             files.failing, files.findings,
                                             (job, ledger, timer))
    weights = OffloadedWeights(model, workdir / f".{spec.name}.weights")
    decoders = Decoders(model, outcome.model.path, contract.cache, False, dtype, job.threads,
                        None, weights, side)
    try:
        _generated((outcome, decoder, (step, bound)), decoders, files, (job, ledger, timer))
        if wanted(spec):  # `bundle`, `runtime`: the folder genai loads, its own loop
            weights.restore()  # the runtime's loop runs the model's own generate
            with timer.step("bundles"):
                vl_deployed(model, side, Exported(facts, outcome.model.path, vision,
                                                  embedding), ledger, workdir)
    finally:
        weights.discard()


def _contract(family: Family, model: Any, spec: ModelSpec, samples: dict[str, np.ndarray]
              ) -> tuple[PipelineContract, dict[str, np.ndarray]]:
    """The family's contract and the prompts completed with what it derives; a sample the
    architecture cannot take is a load-error naming the model and its files."""
    contract = family.contract(model, cache_shape(model, spec))
    try:
        prompts, derived = family.derive(model, samples, contract)
    except LoadError as error:
        files = (", ".join(f"{name} = {path.name}" for name, path in spec.inputs.items())
                 if isinstance(spec.inputs, dict) else str(spec.inputs))
        raise LoadError(f'model "{spec.name}" ({family.name}; {files}): {error}',
                        fix=error.fix) from error
    return dataclasses.replace(contract, derived=derived), prompts


def _record(outcome: ExportOutcome, ledger: Ledger, file: str = "") -> None:
    """An export's attempts, findings (named by the `file` they are about) and file."""
    ledger.attempts += outcome.attempts
    ledger.findings += [dataclasses.replace(finding, message=f"{file}: {finding.message}")
                        if file else finding for finding in outcome.findings]
    if ledger.exporter is None:
        ledger.exporter = outcome.exporter
    if outcome.model is not None:
        ledger.onnx_files = (*ledger.onnx_files, *outcome.model.stored())


def _parts(family: Family, model: Any, given: tuple[PipelineContract, dict[str, np.ndarray]],
           job: ModelJob, ledger: Ledger, workdir: Path) -> tuple[Part, Part] | None:
    """`<name>.vision.onnx` (from the samples' first image, or the family's own when the
    prompts hold none) and `<name>.embedding.onnx` (from the prompts and PyTorch's features),
    stored as the model's other files (publishing copies them beside `<name>.onnx`)."""
    contract, prompts = given
    images = family.images(prompts)
    image = images[0] if images else family.example_image(model)
    features = _image_features(family, model, image, bool(images))
    made = []
    for module, spec, samples in (
            (family.vision_module(model), vision_spec(ledger.spec, contract),
             vision_samples(image)),
            (family.embedding_module(model), embedding_spec(ledger.spec),
             embedding_samples(_with_image(prompts["input_ids"], contract, len(features)),
                               features))):
        outcome = export_model(module, bind_inputs(module, spec, samples, ()), spec, job.repo,
                               workdir)
        _record(outcome, ledger, f"the {spec.name.rsplit('.', 1)[-1]} file {spec.name}.onnx")
        if outcome.model is None:
            return None
        drop_program_weights(outcome.program)
        made.append(Part(module, spec, outcome))
    return made[0], made[1]


def _image_features(family: Family, model: Any, image: Image, sampled: bool) -> np.ndarray:
    """PyTorch's features of the image the embedding file is exported with; PyTorch failing on
    it (a tower whose pooling its image size does not fit) is the model's (ReferenceFailure)."""
    try:
        return family.image_features(model, image)
    except Exception as error:  # whatever get_image_features raises is the model's failure
        which = "the samples' first image" if sampled else f"{family.name}'s example image"
        raise ReferenceFailure(f"{type(error).__name__}: {error} (get_image_features of {which}, "
                               f"shape {list(np.shape(image['pixel_values']))})", error) from error


def _with_image(ids: np.ndarray, contract: PipelineContract, tokens: int) -> np.ndarray:
    """The embedding file's export prompt: the prompts' first row ending in one image's
    tokens (the exporters see the features placed)."""
    row = np.asarray(ids[:1]).astype(np.int64)
    row = row[:, ~np.isin(row[0], [contract.image_token])]
    return np.concatenate([row, np.full((1, tokens), contract.image_token)], axis=1)


def _generated(exported: tuple[ExportOutcome, ModelSpec, tuple[Any, Any]], decoders: Decoders,
               files: FilesChecked, run: tuple[ModelJob, Ledger, Timer]) -> None:
    """Greedy decoding through the three files (PyTorch's weights out of memory while
    onnxruntime decodes), the failing step localised on the decoder file, the report's
    pipeline section."""
    job, ledger, timer = run
    outcome, step, module = exported
    assert decoders.weights is not None
    assert decoders.pipeline is not None
    with timer.step("generate"):
        generated = check_generation(decoders, decoders.pipeline.prompts, ledger.spec,
                                     ledger.findings)
    with timer.step("thresholds"):  # the text config's position thresholds, crossed
        generate = ledger.spec.generate
        limits = position_limits(decoders.module, generate.max_context if generate else None)
        if limits.thresholds:  # PyTorch's steps beside the generation check's session
            decoders.weights.restore()
        crossed = check_vl_thresholds(decoders, ledger.spec, limits, generated.session)
    generated.session = None
    findings = generated.findings
    # Past a failing vision or embedding file the decoding differs downstream of it: the
    # decoder file is localised only when those two agree.
    upstream = any(not check.passed for check in files.checks)
    if generated.failing is not None and not upstream:
        decoders.weights.restore()  # localisation runs PyTorch again
        with timer.step("localise"):
            findings = localised_step(Failed(outcome, step, generated.failing, findings),
                                      module, job, ledger, timer)
    ledger.findings += files.findings + _through(findings, ledger.spec.name, upstream)
    ledger.findings += crossed.findings
    ledger.comparisons += generated.comparisons
    ledger.generation = dataclasses.replace(generated.result, thresholds=crossed.runs,
                                            pipeline=_pipeline(decoders, files, ledger.spec))
    if ledger.spec.variants:  # said, not silently left out
        ledger.variants += skipped_variants(ledger.spec, outcome.model.size_bytes if
                                            outcome.model else 0, UNBUILT).results


def _through(findings: list[Finding], name: str, upstream: bool) -> list[Finding]:
    """The decoding's findings named by the files they ran through (the decoder's, fed by
    the other two, which differ already when `upstream`)."""
    fed = ("fed by the vision and embedding files, which differ already" if upstream
           else "fed by the vision and embedding files")
    return [dataclasses.replace(finding, message=(
        f"decoding through the decoder file {name}.onnx ({fed}): {finding.message}"))
        if finding.code in DECODING else finding for finding in findings]


def _pipeline(decoders: Decoders, files: FilesChecked, spec: ModelSpec) -> PipelineChecks:
    side = decoders.pipeline
    assert side is not None
    derived = tuple(f"{item.name}: {item.reason}" for item in side.contract.derived)
    names = (f"{spec.name}.vision.onnx", f"{spec.name}.embedding.onnx", f"{spec.name}.onnx")
    return PipelineChecks(side.family.name, names, tuple(files.checks), derived,
                          POSITIONS[side.contract.positions_3d])
