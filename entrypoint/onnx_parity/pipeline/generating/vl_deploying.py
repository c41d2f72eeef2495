"""A vision-language model's bundles (`bundle`) and its prompts in onnxruntime-genai's own loop
(`runtime`), in its worker once its three files are exported and checked: export/ renders the
documents, naming each file's inputs and outputs as exported; the onnxruntime-genai folder is
written into the work folder for its generator; verification/ compares that loop's tokens with
the model's own `generate`. It decides nothing and builds no finding; publishing writes the
bundles beside the decoder (the vision and embedding files with it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.bundle_files import bundle_folder, write_bundle
from onnx_parity.export import ModelFacts, VisionParts, inspect_model, make_bundles
from onnx_parity.export import Part as FileNames
from onnx_parity.model_files import ModelFile
from onnx_parity.pipeline.generating.vl_localising import Part
from onnx_parity.pipeline.job import Ledger
from onnx_parity.settings import GENAI
from onnx_parity.verification import PipelineSide, check_vision_runtime


@dataclass(frozen=True)
class Exported:
    """The three files as exported: the decoder's facts and path, the vision and embedding."""

    decoder: ModelFacts
    decoder_path: Path
    vision: Part
    embedding: Part


def vl_deployed(model: Any, side: PipelineSide, exported: Exported, ledger: Ledger,
                workdir: Path) -> None:
    """The bundles' documents into the ledger's generation result; with `runtime`, the
    prompts generated from the onnxruntime-genai bundle against the model's own."""
    spec = ledger.spec
    parts = VisionParts(*(_names(part) for part in (exported.vision, exported.embedding)))
    names = (tuple(exported.decoder.inputs), tuple(exported.decoder.outputs))
    bundles, findings = make_bundles(model, spec, names, workdir, parts)
    ledger.findings += findings
    assert ledger.generation is not None
    ledger.generation = dataclasses.replace(ledger.generation, bundles=bundles)
    genai = next((bundle for bundle in bundles if bundle.runtime == GENAI), None)
    if spec.generate is None or spec.generate.runtime != GENAI or genai is None:
        return
    folder = write_bundle(bundle_folder(workdir, spec.name, genai),
                          ModelFile.at(exported.decoder_path), genai)
    runtime, more = check_vision_runtime(model, side.family, folder, side.prompts, spec)
    ledger.generation = dataclasses.replace(ledger.generation, runtime=runtime)
    ledger.findings += more


def _names(part: Part) -> FileNames:
    assert part.outcome.model is not None
    facts = inspect_model(part.outcome.model)
    return FileNames(tuple(facts.inputs), tuple(facts.outputs))
