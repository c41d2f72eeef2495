"""A vision-language model's prompts in onnxruntime-genai's own loop (`runtime =
"onnxruntime-genai"`), from its `<name>.genai/` bundle (export/genai_vision.py).

Each prompt row, unpadded and one at a time with its own images (the family's `rows`), is
generated greedily for `steps` tokens twice: by the runtime's Generator fed what the processor
returns (`input_ids`, the image inputs, `num_image_tokens`: the features each image makes, which
genai sizes `image_features` by), and by the model's own `generate` on the same inputs (the
reference for the whole pipeline: the model's vision tower, merge and rope index, not our
wrappers). The tokens are compared as generation/genai_runtime.py compares a decoder's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.findings import Finding
from onnx_parity.generation_results import RuntimeGeneration
from onnx_parity.models import Family
from onnx_parity.settings import GENAI, ModelSpec
from onnx_parity.verification.generation.genai_runtime import (
    Greedy,
    genai_greedy,
    genai_model,
    reviewed,
)
from onnx_parity.verification.run_failures import runtime_finding
from onnx_parity.verification.runtime import RuntimeFailure

PROMPT = ("input_ids", "attention_mask")


def check_vision_runtime(model: Any, family: Family, bundle: Path,
                         prompts: dict[str, np.ndarray], spec: ModelSpec
                         ) -> tuple[RuntimeGeneration, list[Finding]]:
    """Every prompt row, with its images, through onnxruntime-genai from `bundle`."""
    assert spec.generate is not None
    steps = spec.generate.steps
    rows = [_unpadded(family.rows(model, prompts, slice(row, row + 1)))
            for row in range(len(prompts["input_ids"]))]
    try:
        runtime = genai_model(bundle)
        runs = [(_pytorch(model, row, steps),
                 genai_greedy(runtime, row["input_ids"][0], steps,
                              _named(family, model, row))) for row in rows]
    except RuntimeFailure as error:
        unrun = RuntimeGeneration(GENAI, steps, (0,) * len(rows), (0,) * len(rows), None)
        return unrun, [runtime_finding(f"{GENAI} cannot generate from {bundle.name}/", error)]
    return reviewed(runs, spec)


def _unpadded(row: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One row's inputs with its padded positions cut from every per-token input."""
    keep = np.asarray(row["attention_mask"][0]) == 1
    length = keep.shape[0]
    return {name: (value[:, keep] if value.ndim == 2 and value.shape == (1, length) else value)
            for name, value in row.items()}


def _pytorch(model: Any, row: dict[str, np.ndarray], steps: int) -> Greedy:
    """The model's own greedy `generate` on the row, with the logits of each pick."""
    import torch

    given = {name: torch.from_numpy(np.asarray(value)) for name, value in row.items()}
    with torch.no_grad():
        out = model.generate(**given, do_sample=False, max_new_tokens=steps,
                             return_dict_in_generate=True, output_logits=True)
    length = given["input_ids"].shape[1]
    tokens = tuple(int(token) for token in out.sequences[0, length:])
    return Greedy(tokens, tuple(np.asarray(step[0].float().numpy()) for step in out.logits))


def _named(family: Family, model: Any, row: dict[str, np.ndarray]) -> Any:
    """What the runtime's processor returns for the row: its ids (int32), its image inputs,
    and each image's feature count."""
    import onnxruntime_genai as og

    inputs = og.NamedTensors()
    inputs["input_ids"] = np.asarray(row["input_ids"]).astype(np.int32)
    images = family.images(row)
    if not images:
        return inputs
    for name in images[0]:
        inputs[name] = np.asarray(row[name])
    counts = [family.image_features(model, image).shape[0] for image in images]
    inputs["num_image_tokens"] = np.asarray(counts, dtype=np.int64)
    return inputs
