"""Where the files a config names live: inside the repository, with an extension we can read.

Existence is not checked here on purpose: a missing sample file is one model's load error
later on, and the other models still run. What is checked here can never work: a path
outside the repository (the action must only read what the pull request committed), or a
file type no loader understands.
"""

from __future__ import annotations

import posixpath
from pathlib import Path, PureWindowsPath

from onnx_parity.settings.values import ConfigError, shown

WEIGHT_SUFFIXES = (".pt", ".pth", ".safetensors")
SAMPLE_SUFFIXES = (".npy", ".npz", ".pt", ".pb")
BUNDLE_SUFFIXES = (".npz", ".pt")

_RELATIVE_FIX = (
    "Paths are relative to the repository root; commit the file inside the repository "
    'and name it from the root, e.g. "samples/input.npy".'
)


def resolve_inside(repo: Path, raw: str, where: str) -> Path:
    """`raw` (as written in the config at `where`) as an absolute path inside `repo`."""
    root = repo.resolve()
    relative = _relative_part(raw, where)
    if not _real_location(root / relative, where, raw).is_relative_to(root):
        raise ConfigError(
            f'{where}: path "{shown(raw)}" goes through a symlink that points outside the '
            f"repository. {_RELATIVE_FIX}"
        )
    return root / relative


def weights_path(repo: Path, raw: str, where: str) -> Path:
    """A state_dict file: `.pt`, `.pth` or `.safetensors`."""
    path = resolve_inside(repo, raw, where)
    if path.suffix.lower() not in WEIGHT_SUFFIXES:
        raise ConfigError(
            f'{where}: "{shown(raw)}" is not a state_dict file (expected .pt, .pth or '
            ".safetensors). Save the weights with torch.save(model.state_dict(), "
            "\"weights/model.pt\") or safetensors.torch.save_file(model.state_dict(), "
            "\"weights/model.safetensors\") and name that file."
        )
    return path


def sample_path(repo: Path, raw: str, where: str) -> Path:
    """One input's sample tensor: `.npy`, `.npz` (one array), `.pt` or `.pb` (ONNX TensorProto)."""
    path = resolve_inside(repo, raw, where)
    if path.suffix.lower() not in SAMPLE_SUFFIXES:
        raise ConfigError(
            f'{where}: "{shown(raw)}" is not a sample file we can read (expected .npy, .npz, '
            ".pt or .pb). Save the tensor with numpy.save(\"samples/input.npy\", array) or "
            'torch.save(tensor, "samples/input.pt").'
        )
    return path


def bundle_path(repo: Path, raw: str, where: str) -> Path:
    """All inputs in one place: an `.npz`/`.pt` file, or a Model Zoo `test_data_set_N` folder."""
    path = resolve_inside(repo, raw, where)
    if path.suffix.lower() in BUNDLE_SUFFIXES or path.is_dir() or not _looks_like_file(path):
        return path
    raise ConfigError(
        f'{where}: "{shown(raw)}" is neither an .npz/.pt bundle nor a folder. A single-tensor file '
        'needs a name: write inputs = { input = "' + shown(raw) + '" }, or bundle all inputs with '
        'numpy.savez("samples/inputs.npz", input=array).'
    )


def _looks_like_file(path: Path) -> bool:
    # A path that does not exist yet and has no extension is taken for a folder; whether it
    # exists is the loader's question, asked per model.
    return path.exists() or bool(path.suffix)


def _relative_part(raw: str, where: str) -> str:
    """The normalised relative form of `raw`, refusing forms that cannot name a repo file."""
    if not raw.strip():
        raise ConfigError(f"{where}: the path is empty. {_RELATIVE_FIX}")
    if "\0" in raw:
        raise ConfigError(f"{where}: the path contains a NUL character. {_RELATIVE_FIX}")
    if "\\" in raw:
        raise ConfigError(
            f'{where}: path "{shown(raw)}" contains a backslash. Use forward slashes '
            '(e.g. "samples/input.npy"); paths are relative to the repository root.'
        )
    if raw.startswith(("/", "~")) or PureWindowsPath(raw).drive:
        raise ConfigError(f'{where}: path "{shown(raw)}" is absolute. {_RELATIVE_FIX}')
    relative = posixpath.normpath(raw)
    if relative == ".." or relative.startswith("../"):
        raise ConfigError(
            f'{where}: path "{shown(raw)}" leads outside the repository. {_RELATIVE_FIX}'
        )
    return relative


def _real_location(path: Path, where: str, raw: str) -> Path:
    """`path` with every symlink along it followed (the path need not exist)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError) as error:  # e.g. a symlink loop, a name too long
        reason = getattr(error, "strerror", None) or error
        raise ConfigError(
            f'{where}: path "{shown(raw)}" cannot be resolved ({reason}). {_RELATIVE_FIX}'
        ) from None
