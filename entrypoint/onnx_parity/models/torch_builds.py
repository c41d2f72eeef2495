"""torch's companion packages (torchvision, torchaudio): which build pairs with our torch, and
what it looks like when another build got in.

Each torchvision release is built against one torch release, for CPU or for CUDA. The public
index serves the CUDA builds only; next to the image's CPU torch such a build cannot load its
native library (it needs libtorch_cuda.so / libc10_cuda.so), and `import torchvision` then
fails with "operator torchvision::nms does not exist" (measured with torchvision 0.28.0 and
torch 2.13.0+cpu). The matching CPU build (`0.28.0+cpu`) comes from the PyTorch CPU wheel
index, the index the Dockerfile takes torch from.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import re
import traceback
from pathlib import Path
from typing import NamedTuple

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# torch release -> the companion releases built against it. torchaudio has no release for
# torch 2.13 (its last, 2.11.x, requires torch 2.11), so it is not listed there.
COMPANIONS: dict[str, dict[str, str]] = {
    "2.13.0": {"torchvision": "0.28.0"},
}
# Companions with no release for a torch release: what to tell a user who asks for them.
WITHOUT_RELEASE: dict[str, dict[str, str]] = {
    "2.13.0": {"torchaudio": "its last release, 2.11, requires torch 2.11"},
}
KNOWN_PACKAGES = ("torchvision", "torchaudio")
# What a companion built for another torch says when it is imported.
OPERATOR = re.compile(r"operator (torchvision|torchaudio)::\w+ does not exist")
CUDA_LIBRARY = re.compile(r"lib(torch_cuda|c10_cuda|cudart)[\w.]*\.so")
UNDEFINED = re.compile(r"undefined symbol: \S+")


def torch_release() -> str | None:
    """The installed torch without its local tag ("2.13.0" for "2.13.0+cpu")."""
    version = installed_version("torch")
    return version.split("+")[0] if version else None


def companion_pins(torch_version: str | None) -> list[str]:
    """Constraint lines holding each companion to the build that pairs with `torch_version`:
    `torchvision==0.28.0+cpu` next to a CPU torch."""
    if torch_version is None:
        return []
    release, _, local = torch_version.partition("+")
    suffix = f"+{local}" if local else ""
    return [f"{name}=={version}{suffix}"
            for name, version in COMPANIONS.get(release, {}).items()]


def missing_release_note(pip_output: str, torch_version: str | None) -> str:
    """" torchaudio has no release for torch 2.13.0 (...)." when pip's output names one."""
    release = (torch_version or "").split("+")[0]
    notes = [f" {name} has no release built for torch {release} ({why}): remove it."
             for name, why in WITHOUT_RELEASE.get(release, {}).items() if name in pip_output]
    return "".join(notes)


class Mismatch(NamedTuple):
    """A companion package that cannot load next to this torch: what it is, and the fix."""

    message: str
    fix: str


def mismatch_message(error: BaseException) -> Mismatch | None:
    """Why a companion package cannot load next to this torch, and the fix; or None."""
    text = f"{type(error).__name__}: {error}"
    package = _package(error, text)
    if package is None:
        return None
    installed = installed_version(package) or "?"
    torch_version = installed_version("torch") or "?"
    pairs = COMPANIONS.get(torch_version.split("+")[0], {}).get(package)
    evidence = _native_evidence(package)
    why = f" Its native library does not load: {evidence}." if evidence else ""
    kind = ("a CUDA build" if CUDA_LIBRARY.search(f"{text} {evidence}")
            else "a build for another torch release")
    fix = _fix(package, pairs, torch_version)
    return Mismatch(
        f"{package} {installed} cannot be imported next to torch {torch_version} ({text}): it "
        f"is {kind}.{why}", f"{fix[:1].upper()}{fix[1:]}")


def _fix(package: str, pairs: str | None, torch_version: str) -> str:
    if pairs is None:
        return (f"{package} has no release built for torch {torch_version}; remove it from the "
                "requirements, or use the torch its release needs.")
    local = torch_version.partition("+")[2]
    build = f"{pairs}+{local}" if local else pairs
    return (f'install the build that pairs with this torch, {package}=={build}: in the action, '
            f"list {package} in the `requirements` file (it is resolved to that build from the "
            f'PyTorch CPU wheel index); elsewhere `pip install "{package}=={build}" '
            f"--index-url {TORCH_CPU_INDEX}`.")


def _package(error: BaseException, text: str) -> str | None:
    found = OPERATOR.search(text)
    if found:
        return found.group(1)
    if not (CUDA_LIBRARY.search(text) or UNDEFINED.search(text)):
        return None
    for frame in traceback.extract_tb(error.__traceback__):
        for name in KNOWN_PACKAGES:
            if name in Path(frame.filename).parts:
                return name
    return None


def _native_evidence(package: str) -> str | None:
    """Why the package's native library does not load, in the dynamic loader's words."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        for library in sorted(Path(folder).glob("_C*.so")):
            try:
                ctypes.CDLL(str(library))
            except OSError as error:
                return str(error).replace(str(folder), package)
    return None


def installed_version(name: str) -> str | None:
    """The installed distribution's version, or None when it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
