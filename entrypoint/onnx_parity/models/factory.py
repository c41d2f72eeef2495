"""Build the user's model: import the factory, call it, load weights, switch to eval().

Runs inside the model's worker process, so importing user code and mutating sys.path here
cannot leak into the next model.
"""

from __future__ import annotations

import difflib
import importlib
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.findings import Finding
from onnx_parity.locations import error_location, shorten
from onnx_parity.models.checkpoints import build_checkpoint
from onnx_parity.models.lfs import refuse_pointer
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.torch_builds import mismatch_message
from onnx_parity.settings import ModelSpec, SourceFolders

SEED = 0


@dataclass(frozen=True)
class LoadedModel:
    module: Any  # torch.nn.Module; typed loosely so this module imports without torch
    findings: tuple[Finding, ...]
    dtype: str = "float32"  # the float dtype it computes in (after `dtype`'s cast)


def seed_everything() -> None:
    """Same initialisation on every run for models without weights."""
    import numpy as np
    import torch

    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)


def build_model(spec: ModelSpec, repo: Path) -> LoadedModel:
    import torch

    from onnx_parity.models.dtypes import cast_module, module_dtype

    if spec.factory is None:  # a `transformers` folder instead
        seed_everything()  # before the folder is read: reading it draws no random number
        checkpoint = build_checkpoint(spec, repo)
        cast_module(checkpoint, spec.dtype)
        return LoadedModel(checkpoint, (), module_dtype(checkpoint))
    seed_everything()
    factory = _import_factory(spec.factory, spec, repo)
    module = _call_factory(spec.factory, factory, repo)
    if not isinstance(module, torch.nn.Module):
        raise LoadError(
            f'factory "{spec.factory}" returned {type(module).__name__}, not a torch.nn.Module.',
            fix="Make the factory return the model instance (e.g. `return MyNet()`).",
        )
    if spec.weights is not None:
        _load_weights(module, spec.weights, repo)
    findings = _training_mode_findings(module, spec.factory)
    module.eval()
    cast_module(module, spec.dtype)
    return LoadedModel(module, findings, module_dtype(module))


def _import_factory(reference: str, spec: ModelSpec, repo: Path) -> Any:
    return import_callable(reference, repo, "factory",
                           "a class or function that returns the model", spec.python_path)


def import_callable(reference: str, repo: Path, role: str, wanted: str,
                    folders: SourceFolders | None = None) -> Any:
    """`module:attribute` imported from the source folders, then the repository root; `role`
    and `wanted` word the errors (e.g. "factory", "a class or function that returns the
    model")."""
    module_name, _, attribute = reference.partition(":")
    root, folders = repo.resolve(), folders or SourceFolders()
    for entry in reversed([*map(str, folders.folders), str(root)]):  # folders first, then root
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise _not_found(reference, role, root, folders) from None
        raise _user_code_error(f'importing "{module_name}" failed', error, repo) from None
    except (Exception, SystemExit) as error:  # the user's module raised while importing
        raise _user_code_error(f'importing "{module_name}" failed', error, repo) from None
    return _resolve_attribute(module, attribute, reference, role, wanted)


def _not_found(reference: str, role: str, root: Path, folders: SourceFolders) -> LoadError:
    module_name = reference.partition(":")[0]
    return LoadError(
        f'{role} "{reference}": module "{module_name}" was not found; looked in '
        f"{folders.searched(root)}.",
        fix="Check the module path: dotted, from the repository root or a source folder (e.g. "
            "models.cnn for models/cnn.py). A package kept in another folder is found once the "
            '`python-path` key names that folder, e.g. python-path = ["lib"].')


def _resolve_attribute(module: Any, attribute: str, reference: str, role: str,
                       wanted: str) -> Any:
    target = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            names = [name for name in dir(target) if not name.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1)
            hint = f' Did you mean "{close[0]}"?' if close else ""
            raise LoadError(
                f'{role} "{reference}": "{part}" is not defined in {module.__name__}.{hint}',
                fix=f"Name {wanted}.",
            )
        target = getattr(target, part)
    return target


def _call_factory(reference: str, factory: Any, repo: Path) -> Any:
    if not callable(factory):
        raise LoadError(f'factory "{reference}" is not callable.',
                        fix="Point it at a class or function.")
    try:
        return factory()
    except (Exception, SystemExit) as error:  # sys.exit() in a factory is a load error too
        raise _user_code_error(f'factory "{reference}" raised', error, repo) from None


def _user_code_error(what: str, error: BaseException, repo: Path) -> LoadError:
    file, line = error_location(error, repo)
    where = f" at {file}:{line}" if file else ""
    mismatch = mismatch_message(error)  # torchvision built for another torch, e.g. CUDA
    if mismatch is not None:
        return LoadError(f"{what}{where}: {mismatch.message}", file, line, fix=mismatch.fix)
    if isinstance(error, FileNotFoundError) and isinstance(error.filename, (str, bytes)):
        return _missing_file(f"{what}{where}", os.fsdecode(error.filename), file, line)
    return LoadError(
        f"{what}{where}: {type(error).__name__}: {error}",
        file,
        line,
        fix="Make the factory run on its own (`python -c \"import ...\"` from the repository "
            "root reproduces it).",
    )


def _missing_file(what: str, name: str, file: str | None, line: int | None) -> LoadError:
    """A file the user's code opened does not exist; factories and forward run with the
    repository root as the working directory (pipeline/one_model.py)."""
    if os.path.isabs(name):
        return LoadError(f'{what}: FileNotFoundError: "{name}" does not exist.', file, line,
                         fix="Commit the file inside the repository and open it by a path "
                             "relative to the repository root (the working directory).")
    return LoadError(
        f'{what}: FileNotFoundError: "{name}" does not exist (opened relative to the working '
        "directory, the repository root).", file, line,
        fix=f'Commit "{name}" at that path, or correct the path the code opens: relative paths '
            "open from the repository root, as when you run the factory there.")


def _load_weights(module: Any, weights: Path, repo: Path) -> None:
    import torch

    shown = weights.resolve().relative_to(repo.resolve()).as_posix()
    if not weights.is_file():
        raise LoadError(f'weights "{shown}" does not exist.',
                        fix="Commit the file or correct `weights`.")
    refuse_pointer(weights, f'weights "{shown}" (config key `weights`)')
    if weights.suffix.lower() == ".safetensors":
        state: Any = _safetensors_state(weights, shown)
    else:
        try:
            state = torch.load(weights, weights_only=True, map_location="cpu")
        except Exception as error:
            raise _weights_refused(shown, error) from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise LoadError(
            f'weights "{shown}" hold a {type(state).__name__}, not a state_dict.',
            fix="Save `model.state_dict()`.",
        )
    _apply_state(module, state, shown)


def _safetensors_state(weights: Path, shown: str) -> dict[str, Any]:
    """A .safetensors file: tensors and a JSON header only, nothing that could run code."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(weights, device="cpu")
    except (SafetensorError, OSError, ValueError) as error:
        raise LoadError(
            f'weights "{shown}" cannot be read as safetensors: {_first_line(error)}.',
            fix="Save the state_dict with `safetensors.torch.save_file(model.state_dict(), "
                "path)` and commit the whole file.",
        ) from None


def _weights_refused(shown: str, error: BaseException) -> LoadError:
    from onnx_parity.models.samples.files import refused_pickle

    refused = refused_pickle(error)
    if refused is not None:
        return LoadError(
            f'weights "{shown}" were refused because loading them would execute code: the '
            f"pickle holds Python objects other than tensors ({refused}); torch.load("
            "weights_only=True) never runs code from a pickle.",
            fix="Save a plain state_dict with `torch.save(model.state_dict(), path)`.",
        )
    return LoadError(
        f'weights "{shown}" cannot be read: {_first_line(error)}.',
        fix="Save a plain state_dict with `torch.save(model.state_dict(), path)` and commit the "
            "whole file.",
    )


def _apply_state(module: Any, state: dict[str, Any], shown: str) -> None:
    expected = set(module.state_dict())
    missing = sorted(expected - set(state))
    unexpected = sorted(set(state) - expected)
    if missing or unexpected:
        raise LoadError(
            f'weights "{shown}" do not match the model: missing keys {_few(missing)}, '
            f"unexpected keys {_few(unexpected)}.",
            fix="Save the state_dict of the same architecture the factory builds.",
        )
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as error:
        raise LoadError(
            f'weights "{shown}" do not fit the model: {_first_line(error, limit=400)}.',
            fix="Save the state_dict of the same architecture the factory builds.",
        ) from None


def _few(keys: list[str], limit: int = 5) -> str:
    if not keys:
        return "none"
    shown = ", ".join(f"`{key}`" for key in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _first_line(error: BaseException, limit: int = 240) -> str:
    return shorten(str(error), limit)


def _training_mode_findings(module: Any, reference: str) -> tuple[Finding, ...]:
    if not module.training:
        return ()
    affected = sorted({type(m).__name__ for m in module.modules() if _trains_differently(m)})
    if not affected:
        return ()
    return (
        Finding(
            "training-mode",
            f'factory "{reference}" returned the model in training mode; it holds '
            f"{', '.join(affected)}, which behave differently in training. It was switched to "
            f"eval() before export.",
        ),
    )


def _trains_differently(layer: Any) -> bool:
    """Layers whose output really changes in training: a Dropout with p > 0, a norm that keeps
    running statistics (it uses the batch's in training), RReLU's random slope."""
    import torch.nn as nn

    if isinstance(layer, nn.modules.dropout._DropoutNd):
        return float(layer.p) > 0
    if isinstance(layer, nn.modules.batchnorm._NormBase):  # batch and instance norms
        return bool(layer.track_running_stats)
    return isinstance(layer, nn.RReLU)
