"""A generating model's bundles written beside its decoder in the output folder (`bundle`):
`<name>.genai/` and `<name>.optimum/`, each the decoder as model.onnx with the documents its
worker rendered (kept in the result, so a cached model's folders are written the same way).
`write_bundles` takes the decoder file it packs: the fp32 decoder, or a variant's."""

from __future__ import annotations

from pathlib import Path

from onnx_parity.bundle_files import bundle_folder, write_bundle
from onnx_parity.model_files import ModelFile
from onnx_parity.results import ModelResult


def write_bundles(model: ModelResult, decoder: Path, prefix: str | None = None) -> list[Path]:
    """Each bundle of `model` for the `decoder` file beside it, named `<prefix>.<suffix>/`
    (the prefix: the model's name, or `<name>.<variant>`)."""
    generation = model.generation
    if generation is None or not decoder.is_file():
        return []
    return [write_bundle(bundle_folder(decoder.parent, prefix or model.name, bundle),
                         ModelFile.at(decoder), bundle) for bundle in generation.bundles]
