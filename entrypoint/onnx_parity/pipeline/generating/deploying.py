"""A generating model's deployment bundles (`bundle`) and its prompts in a runtime's own loop
(`runtime`), in its worker once the decoder is exported and checked: export/ renders the
bundles' documents from the model's config, the onnxruntime-genai folder is written into the
work folder for its generator, and verification/ compares that loop's tokens with PyTorch's.
It decides nothing and builds no finding; publishing writes the bundles beside the decoder.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from onnx_parity.bundle_files import bundle_folder, write_bundle
from onnx_parity.export import make_bundles
from onnx_parity.findings import Finding
from onnx_parity.generation_results import GenerationResult
from onnx_parity.model_files import ModelFile
from onnx_parity.settings import GENAI, ModelSpec
from onnx_parity.verification import Decoders, check_runtime


@dataclass
class Deployed:
    """The generation result with its bundles and the runtime's tokens, and their findings."""

    result: GenerationResult
    findings: list[Finding] = field(default_factory=list)


def deployed(decoders: Decoders, names: tuple[tuple[str, ...], ...],
             prompts: dict[str, np.ndarray], spec: ModelSpec, workdir: Path,
             result: GenerationResult) -> Deployed:
    """`names`: the decoder file's inputs and outputs, which genai_config.json names."""
    bundles, findings = make_bundles(decoders.module, spec, names, workdir)
    done = Deployed(dataclasses.replace(result, bundles=bundles), findings)
    genai = next((bundle for bundle in bundles if bundle.runtime == GENAI), None)
    if spec.generate is None or spec.generate.runtime != GENAI or genai is None:
        return done
    folder = write_bundle(bundle_folder(workdir, spec.name, genai),
                          ModelFile.at(decoders.model), genai)
    runtime, more = check_runtime(decoders, folder, prompts, spec)
    done.result = dataclasses.replace(done.result, runtime=runtime)
    done.findings += more
    return done
