"""Sample tensors a model is checked on, read from committed files without running any pickle.

Formats: `.npy`, `.npz`, `.pt` (tensors only, `weights_only=True`), a serialized ONNX
`TensorProto` `.pb`, or a folder in the ONNX Model Zoo layout (`test_data_set_N/input_K.pb`,
optional `output_K.pb` golden outputs). Every file is read into memory once, hashed and parsed
from those same bytes, so the recorded sha256 is the one of the data actually used.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# numpy kinds a sample may have: bool, signed and unsigned integers, floats.
SUPPORTED_KINDS = "biuf"
FORMATS = "`.npy`, `.npz`, `.pt`, `.pb` or a Model Zoo folder"
_ZOO_DATASET = re.compile(r"test_data_set_(\d+)")
_ZOO_INPUT = re.compile(r"input_(\d+)\.pb")
_ZOO_OUTPUT = re.compile(r"output_(\d+)\.pb")
# The part of torch's weights_only refusal that names what was refused.
_REFUSAL = re.compile(r"(?i)unsupported GLOBAL \S+|Unsupported operand \d+")


class SampleError(Exception):
    """A sample file is missing, unreadable or unsafe; the text names the file, key and fix."""


@dataclass(frozen=True)
class GoldenCase:
    """One Model Zoo `test_data_set_N`: its inputs and (possibly no) expected outputs."""

    dataset: str
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...]


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


@dataclass(frozen=True)
class _Where:
    """Where a sample comes from, for messages: the file as the user wrote it and the key."""

    file: str
    key: str

    def error(self, what: str, fix: str) -> SampleError:
        return SampleError(f"Sample file {self.file} (config key `{self.key}`) {what}. Fix: {fix}")


@dataclass
class _Collector:
    """Files read and notes made while loading one model's samples."""

    repo: Path
    files: dict[str, str]
    notes: list[str]

    def where(self, path: Path, key: str) -> _Where:
        try:
            return _Where(path.resolve().relative_to(self.repo.resolve()).as_posix(), key)
        except ValueError:
            return _Where(path.as_posix(), key)


def load_samples(inputs: dict[str, Path] | Path, repo: Path) -> SampleSet:
    """Load the samples `inputs` names (ModelSpec.inputs: absolute paths inside `repo`)."""
    seen = _Collector(repo, {}, [])
    if isinstance(inputs, Path):
        if inputs.is_dir():
            return _load_zoo(inputs, seen)
        named = _bundle_arrays(inputs, seen)
    else:
        named = {name: _table_array(name, path, seen) for name, path in inputs.items()}
    return SampleSet(named, tuple(named.values()), (), seen.files, tuple(seen.notes))


def _table_array(name: str, path: Path, seen: _Collector) -> np.ndarray:
    """One `inputs.NAME = "file"` entry: the file's single array, or its array called NAME."""
    where = seen.where(path, f"inputs.{name}")
    if path.is_dir():
        raise where.error("is a folder", "a Model Zoo folder must be the whole `inputs` value "
                          "(`inputs = \"path/to/folder\"`), not one entry of a table")
    entries = _file_arrays(path, where, seen)
    by_name = {entry_name: array for entry_name, array in entries if entry_name is not None}
    if name in by_name:
        return _checked(by_name[name], where, f"{where.file}[{name}]", seen)
    if len(entries) == 1:
        return _checked(entries[0][1], where, where.file, seen)
    held = ", ".join(str(entry_name) for entry_name, _ in entries) or "nothing"
    raise where.error(f"holds arrays {held} but none called `{name}`",
                      f"store the array under the key `{name}`, or keep exactly one array in "
                      "the file")


def _bundle_arrays(path: Path, seen: _Collector) -> dict[str, np.ndarray]:
    """`inputs = "file"`: every array the file holds; an unnamed one is named after the file."""
    where = seen.where(path, "inputs")
    entries = _file_arrays(path, where, seen)
    if not entries:
        raise where.error("holds no arrays", "save at least one array in it")
    named = {}
    for entry_name, array in entries:
        label = f"{where.file}[{entry_name}]" if entry_name else where.file
        named[entry_name or path.stem] = _checked(array, where, label, seen)
    return named


def _file_arrays(path: Path, where: _Where, seen: _Collector) -> list[tuple[str | None, np.ndarray]]:
    """The (name or None, array) pairs one sample file holds, chosen by its suffix."""
    suffix = path.suffix.lower()
    loaders = {".npy": _npy, ".npz": _npz, ".pt": _pt, ".pb": _pb}
    if suffix not in loaders:
        raise where.error(f"has an unknown format `{suffix or '(no suffix)'}`",
                          f"save the samples as {FORMATS}")
    return loaders[suffix](_read(path, where, seen), where)


def _read(path: Path, where: _Where, seen: _Collector) -> bytes:
    if not path.exists():
        raise where.error("does not exist", f"commit the file, or correct the path in "
                          f"`{where.key}` (paths are relative to the repository root)")
    if not path.resolve().is_relative_to(seen.repo.resolve()):
        raise where.error("resolves to a place outside the repository (a symbolic link?)",
                          "commit the file itself inside the repository")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise where.error(f"could not be read ({error.strerror or error})",
                          "check the file is a regular readable file") from error
    if not data:
        raise where.error("is empty (0 bytes)", "commit the real file; if it is stored with "
                          "Git LFS, check out LFS files before running the action")
    seen.files[where.file] = hashlib.sha256(data).hexdigest()
    return data


def _unreadable(where: _Where, kind: str, error: BaseException) -> SampleError:
    return where.error(f"could not be read as {kind} ({type(error).__name__}: {error})",
                       "the file is probably truncated or not in that format; save it again "
                       "and commit it")


def _npy(data: bytes, where: _Where) -> list[tuple[str | None, np.ndarray]]:
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as error:  # numpy raises many types on corrupt bytes; all mean "unreadable"
        raise _numpy_error(where, "a .npy array", error) from error
    if not isinstance(array, np.ndarray):
        array.close()
        raise where.error("is a .npz archive saved under a .npy name", "rename it to .npz")
    return [(None, array)]


def _npz(data: bytes, where: _Where) -> list[tuple[str | None, np.ndarray]]:
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise where.error("is a single .npy array saved under a .npz name",
                              "rename it to .npy")
        with archive:
            return [(name, archive[name]) for name in archive.files]
    except SampleError:
        raise
    except Exception as error:  # zipfile, zlib and numpy all raise on corrupt bytes
        raise _numpy_error(where, "a .npz archive", error) from error


def _numpy_error(where: _Where, kind: str, error: Exception) -> SampleError:
    if isinstance(error, ValueError) and "allow_pickle" in str(error):
        return where.error("holds pickled Python objects (a pickle, or an array of dtype "
                           "object); it was refused because loading it would execute code",
                           "save a numeric array, e.g. `np.save(path, np.asarray(x, "
                           "np.float32))`")
    return _unreadable(where, kind, error)


def _pt(data: bytes, where: _Where) -> list[tuple[str | None, np.ndarray]]:
    import torch  # imported here: the CLI must start without paying for torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as error:
        raise _refused_or_unreadable(where, error) from error
    except Exception as error:  # torch raises RuntimeError, EOFError, ... on corrupt files
        raise _unreadable(where, "a torch.save file", error) from error
    if isinstance(loaded, torch.Tensor):
        return [(None, _from_torch(loaded, where, where.file))]
    if isinstance(loaded, dict) and all(isinstance(v, torch.Tensor) for v in loaded.values()):
        return [(str(k), _from_torch(v, where, f"{where.file}[{k}]")) for k, v in loaded.items()]
    raise where.error(f"holds a {type(loaded).__name__}, not a tensor or a dict of tensors",
                      "save `torch.save(tensor, path)` or `torch.save({\"x\": tensor}, path)`")


def refused_pickle(error: BaseException) -> str | None:
    """What torch.load(weights_only=True) refused to unpickle, or None if it refused nothing."""
    text = str(error)
    if "GLOBAL" not in text and "Unsupported operand" not in text:
        return None
    found = _REFUSAL.search(text)
    return found.group(0) if found else "a pickle feature outside tensors"


def _refused_or_unreadable(where: _Where, error: pickle.UnpicklingError) -> SampleError:
    reason = refused_pickle(error)
    if reason is None:
        return _unreadable(where, "a torch.save file", error)
    return where.error("was refused because loading it would execute code: it holds Python "
                       f"objects other than tensors (torch.load with weights_only says: {reason})",
                       "save plain tensors only (`torch.save({\"x\": tensor}, path)`) or use "
                       ".npy/.npz")


def _from_torch(tensor: object, where: _Where, label: str) -> np.ndarray:
    import torch

    assert isinstance(tensor, torch.Tensor)
    if tensor.dtype == torch.bfloat16:
        raise where.error(f"holds a bfloat16 tensor ({label}); onnxruntime comparison needs "
                          "float32/float16 samples", "save `tensor.float()` instead")
    try:
        dense = tensor.to_dense() if tensor.layout != torch.strided else tensor
        return dense.detach().cpu().resolve_conj().resolve_neg().numpy().copy()
    except (TypeError, RuntimeError) as error:
        raise where.error(f"holds a tensor numpy cannot represent ({label}: {tensor.dtype}, "
                          f"{error})", "save it as float32, float16, an integer type or bool"
                          ) from error


def _pb(data: bytes, where: _Where) -> list[tuple[str | None, np.ndarray]]:
    name, array = _tensor_proto(data, where)
    return [(name, array)]


def _tensor_proto(data: bytes, where: _Where) -> tuple[str | None, np.ndarray]:
    import onnx
    from onnx import numpy_helper

    proto = onnx.TensorProto()
    try:
        proto.ParseFromString(data)
    except Exception as error:  # protobuf's DecodeError and friends
        raise _unreadable(where, "an ONNX TensorProto", error) from error
    if proto.data_location == onnx.TensorProto.EXTERNAL:
        # to_array would open the file the tensor names, wherever it is: never follow it.
        raise where.error("keeps its data in an external file", "save the tensor with its data "
                          "inside (`onnx.numpy_helper.from_array(array).SerializeToString()`)")
    try:
        array = numpy_helper.to_array(proto)
    except Exception as error:  # undefined or corrupt element type, size mismatch
        raise _unreadable(where, "an ONNX TensorProto", error) from error
    return (proto.name or None), np.asarray(array)


def _checked(array: np.ndarray, where: _Where, label: str, seen: _Collector) -> np.ndarray:
    """A sample array with a sample axis and a numeric dtype; NaN/Inf become a note."""
    if array.dtype.kind not in SUPPORTED_KINDS:
        raise where.error(f"holds {label} of dtype {array.dtype}, which cannot be compared",
                          "save float32, float16, float64, an integer type or bool "
                          "(bfloat16: save `tensor.float()`)")
    if array.ndim == 0:
        raise where.error(f"holds {label} as a single value with no sample axis",
                          "give the array a leading samples axis, e.g. `x[None]`")
    if array.shape[0] == 0:
        raise where.error(f"holds {label} with zero samples (axis 0 has length 0)",
                          "save at least one sample along axis 0")
    note = _nonfinite_note(array, label)
    if note:
        seen.notes.append(note)
    return array


def _nonfinite_note(array: np.ndarray, label: str) -> str | None:
    if array.dtype.kind != "f":
        return None
    nan, inf = int(np.isnan(array).sum()), int(np.isinf(array).sum())
    if not nan and not inf:
        return None
    return f"{label} holds {nan} NaN and {inf} Inf values; they are compared position by position"


def _load_zoo(folder: Path, seen: _Collector) -> SampleSet:
    where = seen.where(folder, "inputs")
    read = [_zoo_case(path, seen) for path in _zoo_datasets(folder, where)]
    cases = tuple(case for case, _ in read)
    counts = {len(case.inputs) for case in cases}
    if len(counts) > 1:
        raise where.error(f"has datasets with different numbers of inputs ({sorted(counts)})",
                          "give every test_data_set_N the same input_K.pb files")
    positional = tuple(_zoo_input(cases, k, where, seen) for k in range(counts.pop()))
    return SampleSet(dict(zip(_zoo_names(read[0][1]), positional)), positional, cases,
                     seen.files, tuple(seen.notes))


def _zoo_datasets(folder: Path, where: _Where) -> list[Path]:
    """test_data_set_0, 1, ... in numeric order; a folder of input_K.pb files is one dataset."""
    found = [(int(m.group(1)), path) for path in folder.iterdir()
             if path.is_dir() and (m := _ZOO_DATASET.fullmatch(path.name))]
    if found:
        return [path for _, path in sorted(found)]
    if any(_ZOO_INPUT.fullmatch(path.name) for path in folder.iterdir()):
        return [folder]
    raise where.error("is a folder without test_data_set_N subfolders or input_K.pb files",
                      "use the ONNX Model Zoo layout: test_data_set_0/input_0.pb, ...")


def _numbered(folder: Path, pattern: re.Pattern[str], where: _Where) -> list[Path]:
    """Files matching `pattern` in numeric order, refusing gaps (input_0, input_2)."""
    found = sorted((int(m.group(1)), path) for path in folder.iterdir()
                   if path.is_file() and (m := pattern.fullmatch(path.name)))
    numbers = [number for number, _ in found]
    if numbers != list(range(len(numbers))):
        raise where.error(f"numbers its files {numbers} in {folder.name}; they must count "
                          "0, 1, 2, ... without gaps", "rename the files to input_0.pb, "
                          "input_1.pb, ... (and output_0.pb, ...)")
    return [path for _, path in found]


def _zoo_case(dataset: Path, seen: _Collector) -> tuple[GoldenCase, list[str | None]]:
    """One dataset's golden case, and its inputs' TensorProto names (None where unnamed)."""
    where = seen.where(dataset, "inputs")
    inputs = [_zoo_file(path, seen) for path in _numbered(dataset, _ZOO_INPUT, where)]
    if not inputs:
        raise where.error("has no input_K.pb files", "add input_0.pb, input_1.pb, ...")
    outputs = [_zoo_file(path, seen)[1] for path in _numbered(dataset, _ZOO_OUTPUT, where)]
    case = GoldenCase(dataset.name, tuple(array for _, array in inputs), tuple(outputs))
    return case, [name for name, _ in inputs]


def _zoo_file(path: Path, seen: _Collector) -> tuple[str | None, np.ndarray]:
    where = seen.where(path, "inputs")
    name, array = _tensor_proto(_read(path, where, seen), where)
    if array.dtype.kind not in SUPPORTED_KINDS:
        raise where.error(f"holds a tensor of dtype {array.dtype}, which cannot be compared",
                          "store float32, float16, float64, an integer type or bool")
    return name, array


def _zoo_input(cases: tuple[GoldenCase, ...], k: int, where: _Where,
               seen: _Collector) -> np.ndarray:
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
    return _checked(joined, where, f"{where.file} input_{k}", seen)


def _zoo_names(names: list[str | None]) -> list[str]:
    """The inputs' TensorProto names; input_K where a name is missing or repeated."""
    chosen: list[str] = []
    for k, name in enumerate(names):
        chosen.append(name if name and name not in chosen else f"input_{k}")
    return chosen
