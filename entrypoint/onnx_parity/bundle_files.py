"""A runtime's bundle folder on disk (`bundle`): `<model>.genai/` or `<model>.optimum/`, the
decoder as `model.onnx` beside its config documents, written for any decoder file (the fp32
decoder, or a variant's) by the worker (the folder onnxruntime-genai's loop runs from) and by
publishing (the output folder).

A vision-language model's bundle holds its other files too, under the names its
genai_config.json gives them (`model.vision.filename`, `model.embedding.filename`), taken from
beside the decoder: `<stem>.vision.onnx` and `<stem>.embedding.onnx` for `<stem>.onnx`.

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
PARTS = ("vision", "embedding")  # a vision-language model's files beside its decoder


def bundle_folder(beside: Path, model: str, bundle: Bundle) -> Path:
    """`<model>.<suffix>/` in the folder `beside` (a variant: `<model>.<variant>`)."""
    return beside / f"{model}.{bundle.suffix}"


def write_bundle(folder: Path, decoder: ModelFile, bundle: Bundle) -> Path:
    """The folder, made anew: the decoder's .onnx linked (or copied) as model.onnx, its data
    file copied under its own name, each document as indented JSON."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for file, name in ((decoder, MODEL), *_parts(decoder, bundle)):
        link_or_copy(file.path, folder / name)
        if file.data_path is not None:
            shutil.copyfile(file.data_path, folder / file.data_path.name)
    for name, document in bundle.documents.items():
        (folder / name).write_text(json.dumps(document, indent=4) + "\n", encoding="utf-8")
    return folder


def _parts(decoder: ModelFile, bundle: Bundle) -> list[tuple[ModelFile, str]]:
    """The vision-language files the bundle's genai_config.json names, each with its name
    there, found beside the decoder (`<stem>.<part>.onnx`)."""
    model = bundle.documents.get("genai_config.json", {}).get("model", {})
    stem = decoder.path.name.removesuffix(".onnx")
    named = [(decoder.path.with_name(f"{stem}.{part}.onnx"), model[part]["filename"])
             for part in PARTS if isinstance(model.get(part), dict)]
    return [(ModelFile.at(path), str(name)) for path, name in named if path.is_file()]
