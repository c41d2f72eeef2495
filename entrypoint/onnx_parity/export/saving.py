"""Write an exporter's model into the work folder: `<name>.onnx`, and `<name>.onnx.data` beside
it when the model is too large for one protobuf.

dynamo: `ONNXProgram.save`, which keeps a small model one file (the same bytes as its
`model_proto`) and writes a model whose weights pass torch's threshold (1.5 GiB) with external
data, straight from its tensors. TorchScript: `torch.onnx.export` to a path writes a small
model as one file (the same bytes as into a buffer) and a model past 2 GiB as one file per
tensor, named after the tensors (measured on torch 2.13: 18 files beside the .onnx for nine
8192x8192 layers); that export runs in a private folder and its tensors are gathered into the
one data file, so models exported side by side cannot overwrite each other's tensors.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from onnx_parity.model_files import ModelFile, data_file, remove_model

# ONNX keeps tensors of at least this many bytes in the data file, smaller ones in the graph.
_DATA_THRESHOLD = 1024


def save_program(program: Any, destination: Path) -> ModelFile:
    """dynamo's ONNXProgram at `destination`, with external data when torch says it is large."""
    remove_model(destination)
    program.save(str(destination))
    return ModelFile.at(destination)


@contextmanager
def export_folder(destination: Path) -> Iterator[Path]:
    """Where an exporter that writes files named after its tensors writes its model: a
    private folder beside `destination`, removed afterwards."""
    folder = destination.with_name(f".{destination.name}.export")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        yield folder / destination.name
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def gathered(exported: Path, destination: Path) -> ModelFile:
    """The model `exported` in its private folder moved to `destination`: as it is when it is
    one file, else with every external tensor gathered into `<destination>.data`."""
    remove_model(destination)
    if len(list(exported.parent.iterdir())) == 1:
        exported.replace(destination)
    else:
        _one_data_file(exported, destination)
    return ModelFile.at(destination)


def _one_data_file(exported: Path, destination: Path) -> None:
    import onnx

    proto = onnx.load(str(exported))  # every tensor file read (the model's weights, once)
    onnx.save(proto, str(destination), save_as_external_data=True,
              all_tensors_to_one_file=True, location=data_file(destination).name,
              size_threshold=_DATA_THRESHOLD)


def drop_program_weights(program: Any) -> None:
    """dynamo's ONNXProgram once its model is saved and nothing reads its ONNX graph again
    (localisation reads only its `exported_program`): onnxscript's rewrite rules, objects of
    its modules, keep the last graph they matched, and that graph's initializers hold
    PyTorch's own weight tensors (and the optimizer's folded copies of them, a transposed copy
    of each Linear's weight), which would outlive the module otherwise."""
    graph = getattr(getattr(program, "model", None), "graph", None)
    for value in getattr(graph, "initializers", {}).values():
        value.const_value = None
