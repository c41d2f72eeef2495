"""The documents of the bundles a generating model asks for (`bundle`, and the onnxruntime-genai
one `runtime` runs from), rendered in its worker from the model's config: a folder each runtime
loads unchanged (publishing writes them, bundle_files.py). `bundle-error` when one cannot be
made; the decoder's verdict stands.

- onnxruntime-genai (`<name>.genai/`): `genai_config.json` from its model builder
  (genai_config.py); a vision-language model's with its vision and embedding sections and
  the runtime's `processor_config.json` (genai_vision.py).
- optimum (`<name>.optimum/`): `config.json` and `generation_config.json`, as save_pretrained
  writes them, for `ORTModelForCausalLM.from_pretrained(folder)`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from onnx_parity.export.genai_config import BundleError, genai_config
from onnx_parity.export.genai_vision import VisionParts, with_vision
from onnx_parity.findings import Finding
from onnx_parity.generation_results import Bundle
from onnx_parity.settings import GENAI, OPTIMUM, ModelSpec

SUFFIXES = {GENAI: "genai", OPTIMUM: "optimum"}


def wanted(spec: ModelSpec) -> tuple[str, ...]:
    """The runtimes a bundle is made for: `bundle`'s, and `runtime`'s, whose loop runs from it."""
    generate = spec.generate
    if generate is None:
        return ()
    runtime = (generate.runtime,) if generate.runtime else ()
    return tuple(dict.fromkeys((*generate.bundle, *runtime)))  # in order, each once


def make_bundles(module: Any, spec: ModelSpec, names: tuple[tuple[str, ...], ...],
                 scratch: Path, parts: VisionParts | None = None
                 ) -> tuple[tuple[Bundle, ...], list[Finding]]:
    """Each wanted bundle's documents; `names`: the decoder file's inputs and outputs;
    `parts`: a vision-language model's vision and embedding files (genai_vision.py)."""
    made: list[Bundle] = []
    findings: list[Finding] = []
    for runtime in wanted(spec):
        try:
            made.append(Bundle(runtime, SUFFIXES[runtime],
                               _documents(runtime, module, spec, (names, parts), scratch)))
        except BundleError as error:
            findings.append(bundle_error(runtime, spec.name, str(error)))
    return tuple(made), findings


def _documents(runtime: str, module: Any, spec: ModelSpec,
               files: tuple[tuple[tuple[str, ...], ...], VisionParts | None],
               scratch: Path) -> dict[str, dict[str, Any]]:
    names, parts = files
    if getattr(module, "config", None) is None or getattr(module.config, "is_encoder_decoder",
                                                          False):
        raise BundleError("a bundle is written for a decoder-only transformers model (its "
                          "config names the architecture); this model is not one")
    if runtime != GENAI:
        if parts is not None:
            raise BundleError("optimum's ORTModelForCausalLM loads a decoder alone; a "
                              "vision-language model's pipeline has no optimum bundle")
        return optimum_documents(module)
    if not any(name.startswith("past") for name in names[0]):
        raise BundleError("the decoder file takes no past (its model's forward takes no cache, "
                          "so every step runs the whole prefix) and onnxruntime-genai's loop "
                          "feeds the presents back as one")
    document = genai_config(module, spec.transformers, names,
                            scratch / f"{spec.name}.genai-builder", embeds=parts is not None)
    if parts is None:
        return {"genai_config.json": document}
    return with_vision(document, module.config, parts, spec.transformers, names[0])


def optimum_documents(module: Any) -> dict[str, dict[str, Any]]:
    """config.json (with `architectures`, which a model built from a config lacks) and
    generation_config.json, as save_pretrained writes them."""
    config = copy.deepcopy(module.config)
    config.architectures = config.architectures or [type(module).__name__]
    documents = {"config.json": json.loads(config.to_json_string(use_diff=False))}
    generation = getattr(module, "generation_config", None)
    if generation is not None:
        documents["generation_config.json"] = json.loads(generation.to_json_string(use_diff=True))
    return documents


def bundle_error(runtime: str, model: str, reason: str) -> Finding:
    return Finding(
        "bundle-error", f"the {runtime} bundle ({model}.{SUFFIXES[runtime]}/) was not written: "
        f"{reason}", fix="Read the reason: a decoder-only transformers model the runtime "
        "supports gets its bundle; otherwise remove the runtime from `bundle` (the decoder "
        "file's own check is unaffected).")
