"""Sample tensors a model is checked on, read from committed files without running any pickle.

Formats: `.npy`, `.npz`, `.pt` (tensors only, `weights_only=True`), a serialized ONNX
`TensorProto` `.pb` (files.py), or a folder in the ONNX Model Zoo layout
(`test_data_set_N/input_K.pb`, optional `output_K.pb` golden outputs; model_zoo.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx_parity.models.dtypes import cast_array
from onnx_parity.models.load_errors import SampleError
from onnx_parity.models.samples.files import Collector, checked, file_arrays
from onnx_parity.models.samples.model_zoo import GoldenCase, load_zoo

__all__ = ["GoldenCase", "SampleError", "SampleSet", "cast_samples", "load_samples"]


@dataclass(frozen=True)
class SampleSet:
    # Input name -> array, axis 0 = samples. A bundle gives every array it holds.
    named: dict[str, np.ndarray]
    # The same inputs by position: table order, the bundle's own order, or for a Model Zoo
    # folder input_0, input_1, ... (the model's parameter order), datasets concatenated.
    positional: tuple[np.ndarray, ...]
    golden: tuple[GoldenCase, ...]
    # Each file read, relative to the repository -> sha256 hex of its bytes.
    files: dict[str, str]
    notes: tuple[str, ...]


def load_samples(inputs: dict[str, Path] | Path, repo: Path) -> SampleSet:
    """Load the samples `inputs` names (ModelSpec.inputs: absolute paths inside `repo`)."""
    seen = Collector(repo, {}, [])
    if isinstance(inputs, Path):
        if inputs.is_dir():
            zoo = load_zoo(inputs, seen)
            return SampleSet(zoo.named, zoo.positional, zoo.golden, seen.files, tuple(seen.notes))
        named = _bundle_arrays(inputs, seen)
    else:
        named = {name: _table_array(name, path, seen) for name, path in inputs.items()}
    return SampleSet(named, tuple(named.values()), (), seen.files, tuple(seen.notes))


def cast_samples(samples: SampleSet, dtype: str | None) -> SampleSet:
    """The float samples cast to `dtype` (the `dtype` key; None: as committed)."""
    if dtype is None:
        return samples
    return dataclasses.replace(
        samples, named={name: cast_array(array, dtype) for name, array in samples.named.items()},
        positional=tuple(cast_array(array, dtype) for array in samples.positional))


def _table_array(name: str, path: Path, seen: Collector) -> np.ndarray:
    """One `inputs.NAME = "file"` entry: the file's single array, or its array called NAME."""
    where = seen.where(path, f"inputs.{name}")
    if path.is_dir():
        raise where.error("is a folder", "a Model Zoo folder must be the whole `inputs` value "
                          "(`inputs = \"path/to/folder\"`), not one entry of a table")
    entries = file_arrays(path, where, seen)
    by_name = {entry_name: array for entry_name, array in entries if entry_name is not None}
    if name in by_name:
        return checked(by_name[name], where, f"{where.file}[{name}]", seen)
    if len(entries) == 1:
        return checked(entries[0][1], where, where.file, seen)
    held = ", ".join(str(entry_name) for entry_name, _ in entries) or "nothing"
    raise where.error(f"holds arrays {held} but none called `{name}`",
                      f"store the array under the key `{name}`, or keep exactly one array in "
                      "the file")


def _bundle_arrays(path: Path, seen: Collector) -> dict[str, np.ndarray]:
    """`inputs = "file"`: every array the file holds; an unnamed one is named after the file."""
    where = seen.where(path, "inputs")
    entries = file_arrays(path, where, seen)
    if not entries:
        raise where.error("holds no arrays", "save at least one array in it")
    named = {}
    for entry_name, array in entries:
        label = f"{where.file}[{entry_name}]" if entry_name else where.file
        named[entry_name or path.stem] = checked(array, where, label, seen)
    return named


