"""Deployment variants of a generating model (`generate`), checked by generation.

Each variant of the exported decoder-with-past file is built as for any model, then decoded
greedily against PyTorch's fp32 model the way the fp32 file was (verification's
`check_generation`: the prompts, PyTorch's token fed at every step). Its figure is the token
agreement users of quantized LLMs ask for: the share of (prompt, step) tokens agreed before
each prompt's first difference, as the variant's top-1 agreement of `logits` (judged by
`min-top1-agreement`), with its max logit difference and the decoding said in a note.
`int8-static` needs calibration feeds of the decoding steps, which are not made yet.

With `eval-tokens` each variant is also judged by text (variants/perplexity.py): its
perplexity against PyTorch fp32's, gated by `max-perplexity-ratio`. An int4 variant whose
greedy token differs is decoded again at accuracy_level 0 (variants/int4.py) to name the cause.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx_parity.findings import Finding, Severity
from onnx_parity.generation_results import GenerationResult, TextScore
from onnx_parity.model_files import ModelFile
from onnx_parity.models import EvalTokens
from onnx_parity.results import VariantComparison, VariantResult
from onnx_parity.settings import ModelSpec
from onnx_parity.variants.build import VariantFailure, build_variant
from onnx_parity.variants.checked import VariantsChecked
from onnx_parity.variants.int4 import rerun_at_level0
from onnx_parity.variants.int4 import settings as int4_settings
from onnx_parity.variants.perplexity import TextReference, reference_score, variant_score
from onnx_parity.variants.review import (
    degraded,
    int4_token_difference,
    misses,
    perplexity_degraded,
    variant_error,
)
from onnx_parity.variants.routing import routing_change
from onnx_parity.verification import Decoders, RuntimeFailure, check_generation, open_session

NOT_STATIC = ("int8-static is not built for a generating model yet: its calibration would need "
              "the decoding steps' inputs; check int8-dynamic or fp16")
NO_TEXT = ("eval-tokens not scored: an encoder-decoder's decoder needs its encoder's outputs, "
           "which the text does not give")


@dataclass(frozen=True)
class GeneratingModel:
    """The fp32 decoder file that passed, how to decode, and the prompts."""

    fp32: ModelFile
    decoders: Decoders
    prompts: dict[str, np.ndarray]
    spec: ModelSpec
    folder: Path  # where the variants are built (the worker's work folder)
    text: EvalTokens | None = None  # `eval-tokens`, read in the worker


def generation_variants(model: GeneratingModel) -> VariantsChecked:
    model.folder.mkdir(parents=True, exist_ok=True)
    reference = _reference(model)
    results: list[VariantResult] = []
    findings: list[Finding] = []
    for kind in model.spec.variants:
        result, found = _variant(kind, model, reference)
        results.append(result)
        findings += found
    return VariantsChecked(tuple(results), tuple(findings))


def _reference(model: GeneratingModel) -> TextReference | None:
    """PyTorch fp32 on `eval-tokens`, once for every variant (an encoder-decoder's decoder
    needs its encoder's outputs: its text is not scored, NO_TEXT says so)."""
    if model.text is None or model.decoders.encoder is not None:
        return None
    return reference_score(model.decoders, model.text, model.spec)


def _variant(kind: str, model: GeneratingModel,
             reference: TextReference | None) -> tuple[VariantResult, list[Finding]]:
    spec = model.spec
    base = VariantResult(kind, model.fp32.size_bytes, settings=_settings(kind, spec))
    if kind == "int8-static":
        return dataclasses.replace(base, skipped=NOT_STATIC, notes=(NOT_STATIC,)), []
    target = model.folder / f"{spec.name}.{kind}.onnx"
    try:
        built = build_variant(kind, model.fp32, target, [], spec)
        generation = _decoded(kind, built, model)
        text = None if reference is None else _scored(kind, built, model, reference)
    except VariantFailure as failure:
        return base, [variant_error(failure)]
    files = built.stored()
    unscored = (NO_TEXT,) if model.text is not None and reference is None else ()
    routing = routing_change(model.fp32, built, model.decoders, model.prompts, spec)  # a MoE's
    result = dataclasses.replace(
        base, size_bytes=built.size_bytes, sha256=files[0].sha256, onnx_path=str(built.path),
        files=files, comparisons=(_comparison(generation, spec),),
        notes=(_note(generation), *unscored), text=text, routing=routing)
    missed = misses(result, spec)
    found = [degraded(kind, missed, ())] if missed else []
    if text is not None and text.ratio > spec.max_perplexity_ratio:
        found.append(perplexity_degraded(kind, text, spec))
    first = generation.first_token_difference
    if kind == "int4" and first is not None:
        found.append(int4_token_difference(
            rerun_at_level0(built, model.decoders, model.prompts, spec, first)))
    return result, found


def _settings(kind: str, spec: ModelSpec) -> dict[str, object]:
    made = int4_settings(spec.int4) if kind == "int4" else {}
    return {**made, "min_sqnr_db": spec.min_sqnr_db,
            "min_top1_agreement": spec.min_top1_agreement,
            "max_perplexity_ratio": spec.max_perplexity_ratio}


def _scored(kind: str, built: ModelFile, model: GeneratingModel,
            reference: TextReference) -> TextScore:
    """The variant's decoder file on the text; what stops it is the variant's error."""
    try:
        session = open_session(built.path, model.spec.runtime_optimization,
                               model.decoders.threads)
        return variant_score(reference, session, model.decoders)
    except RuntimeFailure as error:
        raise VariantFailure(kind, "scored on eval-tokens", error) from error


def _decoded(kind: str, built: ModelFile, model: GeneratingModel) -> GenerationResult:
    """The variant decoded; what stops it (it cannot load or run) is the variant's error."""
    decoders = dataclasses.replace(model.decoders, model=built.path)
    generated = check_generation(decoders, model.prompts, model.spec)
    # Its figures judge a variant that decodes, NaN or infinite logits too (variants/review.py)
    stopped = [f for f in generated.findings if f.severity == Severity.ERROR
               and f.code not in ("parity-mismatch", "nan-or-inf", "generation-mismatch")]
    if stopped:
        raise VariantFailure(kind, "decoded", _Stopped(stopped[0].message))
    return generated.result


class _Stopped(Exception):
    """onnxruntime could not decode with the variant (its message)."""


def _comparison(g: GenerationResult, spec: ModelSpec) -> VariantComparison:
    agreed = sum(g.tokens_agree) / (g.rows * g.steps) if g.rows and g.steps else 0.0
    return VariantComparison("logits", max(spec.batch_sizes), {},
                             max(g.max_logit_diff, default=None), None, None, agreed)


def _note(g: GenerationResult) -> str:
    text = (f"checked by greedy decoding against PyTorch's fp32 model: tokens agree "
            f"{sum(g.tokens_agree)} of {g.rows * g.steps} (prompt, step) pairs before each "
            f"prompt's first difference, {g.agreed}/{g.steps} steps in every one of {g.rows} "
            f"prompts; max logit diff {max(g.max_logit_diff, default=0.0):.2g}")
    first = g.first_token_difference
    if first is not None:
        text += (f"; first difference at step {first.step}, row {first.row} "
                 f"({first.pytorch_token} vs {first.onnx_token}, top-2 margin "
                 f"{first.margin:.2g}{', a near-tie' if first.near_tie else ''})")
    return text
