"""Sample files read without running any pickle: `.npy`, `.npz`, `.pt`, `.pb` TensorProto.

Every file is read into memory once, hashed and parsed from those same bytes, so the recorded
sha256 is the one of the data actually used. Every problem is a SampleError naming the file
(relative to the repository), the configuration key and the fix.
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

from onnx_parity.models.dtypes import BFLOAT16, is_float, to_array
from onnx_parity.models.lfs import LFS_FIX, lfs_pointer, pointer_message
from onnx_parity.models.load_errors import SampleError

# numpy kinds a sample may have: bool, signed and unsigned integers, floats.
SUPPORTED_KINDS = "biuf"
FORMATS = "`.npy`, `.npz`, `.pt`, `.pb` or a Model Zoo folder"
# The part of torch's weights_only refusal that names what was refused.
_REFUSAL = re.compile(r"(?i)unsupported GLOBAL \S+|Unsupported operand \d+")


@dataclass(frozen=True)
class Where:
    """Where a sample comes from, for messages: the file as the user wrote it and the key."""

    file: str
    key: str

    def error(self, what: str, fix: str) -> SampleError:
        """`what` went wrong with this file; `fix` (a clause) becomes the finding's one fix."""
        return SampleError(f"Sample file {self.file} (config key `{self.key}`) {what}.",
                           fix=f"{fix[:1].upper()}{fix[1:]}.")


@dataclass
class Collector:
    """Files read and notes made while loading one model's samples."""

    repo: Path
    files: dict[str, str]
    notes: list[str]

    def where(self, path: Path, key: str) -> Where:
        try:
            return Where(path.resolve().relative_to(self.repo.resolve()).as_posix(), key)
        except ValueError:
            return Where(path.as_posix(), key)


def file_arrays(path: Path, where: Where, seen: Collector) -> list[tuple[str | None, np.ndarray]]:
    """The (name or None, array) pairs one sample file holds, chosen by its suffix."""
    suffix = path.suffix.lower()
    loaders = {".npy": _npy, ".npz": _npz, ".pt": _pt, ".pb": _pb}
    if suffix not in loaders:
        raise where.error(f"has an unknown format `{suffix or '(no suffix)'}`",
                          f"save the samples as {FORMATS}")
    return loaders[suffix](read_sample(path, where, seen), where)


def read_sample(path: Path, where: Where, seen: Collector) -> bytes:
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
    pointer = lfs_pointer(data)
    if pointer is not None:  # before any parser calls it a pickle or a corrupt file
        raise SampleError(pointer_message(f"Sample file {where.file} (config key "
                                          f"`{where.key}`)", pointer), fix=LFS_FIX)
    seen.files[where.file] = hashlib.sha256(data).hexdigest()
    return data


def _unreadable(where: Where, kind: str, error: BaseException) -> SampleError:
    return where.error(f"could not be read as {kind} ({type(error).__name__}: {error})",
                       "the file is probably truncated or not in that format; save it again "
                       "and commit it")


def _npy(data: bytes, where: Where) -> list[tuple[str | None, np.ndarray]]:
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as error:  # numpy raises many types on corrupt bytes; all mean "unreadable"
        raise _numpy_error(where, "a .npy array", error) from error
    if not isinstance(array, np.ndarray):
        array.close()
        raise where.error("is a .npz archive saved under a .npy name", "rename it to .npz")
    return [(None, array)]


def _npz(data: bytes, where: Where) -> list[tuple[str | None, np.ndarray]]:
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


def _numpy_error(where: Where, kind: str, error: Exception) -> SampleError:
    if isinstance(error, ValueError) and "allow_pickle" in str(error):
        return where.error("holds pickled Python objects (a pickle, or an array of dtype "
                           "object); it was refused because loading it would execute code",
                           "save a numeric array, e.g. `np.save(path, np.asarray(x, "
                           "np.float32))`")
    return _unreadable(where, kind, error)


def _pt(data: bytes, where: Where) -> list[tuple[str | None, np.ndarray]]:
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


def _refused_or_unreadable(where: Where, error: pickle.UnpicklingError) -> SampleError:
    reason = refused_pickle(error)
    if reason is None:
        return _unreadable(where, "a torch.save file", error)
    return where.error("was refused because loading it would execute code: it holds Python "
                       f"objects other than tensors (torch.load with weights_only says: {reason})",
                       "save plain tensors only (`torch.save({\"x\": tensor}, path)`) or use "
                       ".npy/.npz")


def _from_torch(tensor: object, where: Where, label: str) -> np.ndarray:
    import torch

    assert isinstance(tensor, torch.Tensor)
    try:
        dense = tensor.to_dense() if tensor.layout != torch.strided else tensor
        return to_array(dense).copy()  # bfloat16 as ml_dtypes' bfloat16, fed as such
    except (TypeError, RuntimeError) as error:
        raise where.error(f"holds a tensor numpy cannot represent ({label}: {tensor.dtype}, "
                          f"{error})", "save it as float32, float16, an integer type or bool"
                          ) from error


def _pb(data: bytes, where: Where) -> list[tuple[str | None, np.ndarray]]:
    name, array = tensor_proto(data, where)
    return [(name, array)]


def tensor_proto(data: bytes, where: Where) -> tuple[str | None, np.ndarray]:
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


def checked(array: np.ndarray, where: Where, label: str, seen: Collector) -> np.ndarray:
    """A sample array with a sample axis and a numeric dtype; NaN/Inf become a note."""
    if array.dtype.kind not in SUPPORTED_KINDS and array.dtype != BFLOAT16:
        raise where.error(f"holds {label} of dtype {array.dtype}, which cannot be compared",
                          "save float32, float16, bfloat16 (in a .pt file), float64, an "
                          "integer type or bool")
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
    if not is_float(array):
        return None
    nan, inf = int(np.isnan(array).sum()), int(np.isinf(array).sum())
    if not nan and not inf:
        return None
    return f"{label} holds {nan} NaN and {inf} Inf values; they are compared position by position"


