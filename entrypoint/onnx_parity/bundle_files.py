"""A runtime's bundle folder on disk (`bundle`): `<model>.genai/` or `<model>.optimum/`, the
decoder as `model.onnx` beside its config documents, written for any decoder file (the fp32
decoder, or a variant's) by the worker (the folder onnxruntime-genai's loop runs from) and by
publishing (the output folder).

The external data file is copied, never linked: onnx refuses a data file with more than one
hard link, and onnxruntime a symbolic link that points out of the model's folder. It keeps the
name the .onnx gives it (a relative location), so the renamed `model.onnx` still finds it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from onnx_parity.generation_results import Bundle
from onnx_parity.model_files import ModelFile, link_or_copy

MODEL = "model.onnx"  # what optimum's ORTModelForCausalLM and genai_config.json load


def bundle_folder(beside: Path, model: str, bundle: Bundle) -> Path:
    """`<model>.<suffix>/` in the folder `beside` (a variant: `<model>.<variant>`)."""
    return beside / f"{model}.{bundle.suffix}"


def write_bundle(folder: Path, decoder: ModelFile, bundle: Bundle) -> Path:
    """The folder, made anew: the decoder's .onnx linked (or copied) as model.onnx, its data
    file copied under its own name, each document as indented JSON."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    link_or_copy(decoder.path, folder / MODEL)
    if decoder.data_path is not None:
        shutil.copyfile(decoder.data_path, folder / decoder.data_path.name)
    for name, document in bundle.documents.items():
        (folder / name).write_text(json.dumps(document, indent=4) + "\n", encoding="utf-8")
    return folder
