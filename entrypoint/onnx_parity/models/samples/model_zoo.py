"""ONNX Model Zoo folders: `test_data_set_N/input_K.pb` samples and `output_K.pb` goldens."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx_parity.models.lfs import LFS_FIX, file_pointer, pointer_message
from onnx_parity.models.load_errors import SampleError
from onnx_parity.models.samples.files import (
    SUPPORTED_KINDS,
    Collector,
    Where,
    checked,
    read_sample,
    tensor_proto,
)

_ZOO_DATASET = re.compile(r"test_data_set_(\d+)")
_ZOO_INPUT = re.compile(r"input_(\d+)\.pb")
_ZOO_OUTPUT = re.compile(r"output_(\d+)\.pb")


@dataclass(frozen=True)
class GoldenCase:
    """One Model Zoo `test_data_set_N`: its inputs and (possibly no) expected outputs."""

    dataset: str
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class ZooSamples:
    """A Model Zoo folder's inputs, by TensorProto name and by position, and its goldens."""

    named: dict[str, np.ndarray]
    positional: tuple[np.ndarray, ...]
    golden: tuple[GoldenCase, ...]


def load_zoo(folder: Path, seen: Collector) -> ZooSamples:
    where = seen.where(folder, "inputs")
    datasets = _zoo_datasets(folder, where)
    _refuse_pointers(datasets, where, seen)
    read = [_zoo_case(path, seen) for path in datasets]
    cases = tuple(case for case, _ in read)
    counts = {len(case.inputs) for case in cases}
    if len(counts) > 1:
        raise where.error(f"has datasets with different numbers of inputs ({sorted(counts)})",
                          "give every test_data_set_N the same input_K.pb files")
    positional = tuple(_zoo_input(cases, k, where, seen) for k in range(counts.pop()))
    return ZooSamples(dict(zip(_zoo_names(read[0][1]), positional, strict=True)), positional, cases)


def _zoo_datasets(folder: Path, where: Where) -> list[Path]:
    """test_data_set_0, 1, ... in numeric order; a folder of input_K.pb files is one dataset."""
    found = [(int(m.group(1)), path) for path in folder.iterdir()
             if path.is_dir() and (m := _ZOO_DATASET.fullmatch(path.name))]
    if found:
        return [path for _, path in sorted(found)]
    if any(_ZOO_INPUT.fullmatch(path.name) for path in folder.iterdir()):
        return [folder]
    raise where.error("is a folder without test_data_set_N subfolders or input_K.pb files",
                      "use the ONNX Model Zoo layout: test_data_set_0/input_0.pb, ...")


def _refuse_pointers(datasets: list[Path], where: Where, seen: Collector) -> None:
    """One load error naming how many of the folder's .pb files are Git LFS pointers, before
    any of them is parsed (each would otherwise be "not an ONNX TensorProto")."""
    files = [path for dataset in datasets for path in sorted(dataset.iterdir()) if path.is_file()
             and (_ZOO_INPUT.fullmatch(path.name) or _ZOO_OUTPUT.fullmatch(path.name))]
    pointers = [(path, pointer) for path in files if (pointer := file_pointer(path))]
    if not pointers:
        return
    goldens = sum(1 for path, _ in pointers if _ZOO_OUTPUT.fullmatch(path.name))
    first, pointer = pointers[0]
    kind = "golden file" if _ZOO_OUTPUT.fullmatch(first.name) else "sample file"
    raise SampleError(
        f"Model Zoo folder {where.file} (config key `{where.key}`) holds "
        f"{_count(len(pointers), 'Git LFS pointer')} among its {_count(len(files), 'file')} "
        f"({_count(len(pointers) - goldens, 'input')}, {_count(goldens, 'golden output')}); "
        + pointer_message(f"{kind} {seen.where(first, where.key).file}", pointer),
        fix=LFS_FIX)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _numbered(folder: Path, pattern: re.Pattern[str], where: Where) -> list[Path]:
    """Files matching `pattern` in numeric order, refusing gaps (input_0, input_2)."""
    found = sorted((int(m.group(1)), path) for path in folder.iterdir()
                   if path.is_file() and (m := pattern.fullmatch(path.name)))
    numbers = [number for number, _ in found]
    if numbers != list(range(len(numbers))):
        raise where.error(f"numbers its files {numbers} in {folder.name}; they must count "
                          "0, 1, 2, ... without gaps", "rename the files to input_0.pb, "
                          "input_1.pb, ... (and output_0.pb, ...)")
    return [path for _, path in found]


def _zoo_case(dataset: Path, seen: Collector) -> tuple[GoldenCase, list[str | None]]:
    """One dataset's golden case, and its inputs' TensorProto names (None where unnamed)."""
    where = seen.where(dataset, "inputs")
    inputs = [_zoo_file(path, seen) for path in _numbered(dataset, _ZOO_INPUT, where)]
    if not inputs:
        raise where.error("has no input_K.pb files", "add input_0.pb, input_1.pb, ...")
    outputs = [_zoo_file(path, seen)[1] for path in _numbered(dataset, _ZOO_OUTPUT, where)]
    case = GoldenCase(dataset.name, tuple(array for _, array in inputs), tuple(outputs))
    return case, [name for name, _ in inputs]


def _zoo_file(path: Path, seen: Collector) -> tuple[str | None, np.ndarray]:
    where = seen.where(path, "inputs")
    name, array = tensor_proto(read_sample(path, where, seen), where)
    if array.dtype.kind not in SUPPORTED_KINDS:
        raise where.error(f"holds a tensor of dtype {array.dtype}, which cannot be compared",
                          "store float32, float16, float64, an integer type or bool")
    return name, array


def _zoo_input(cases: tuple[GoldenCase, ...], k: int, where: Where,
               seen: Collector) -> np.ndarray:
    """Input k of every dataset joined along axis 0 when they fit; otherwise the first one."""
    arrays = [case.inputs[k] for case in cases]
    fits = all(a.ndim >= 1 and a.shape[1:] == arrays[0].shape[1:] and a.dtype == arrays[0].dtype
               for a in arrays)
    if fits:
        joined = np.concatenate(arrays, axis=0)
    else:
        joined = arrays[0]
        seen.notes.append(f"{where.file}: input_{k}.pb differs in shape or dtype between "
                          f"datasets; only {cases[0].dataset} is used as samples (every dataset "
                          "is still checked against its golden outputs)")
    return checked(joined, where, f"{where.file} input_{k}", seen)


def _zoo_names(names: list[str | None]) -> list[str]:
    """The inputs' TensorProto names; input_K where a name is missing or repeated."""
    chosen: list[str] = []
    for k, name in enumerate(names):
        chosen.append(name if name and name not in chosen else f"input_{k}")
    return chosen
