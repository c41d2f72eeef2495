"""A `transformers` folder built as the model: what `save_pretrained` wrote, read offline.

The folder is judged before transformers sees it, from its files and `config.json` read as
JSON (nothing imported, nothing run): missing, without `config.json`, with pickled weights
only (`pytorch_model.bin`: unpickling can run code), or needing remote code (`auto_map`: the
folder's own Python, which `trust_remote_code` would run) is a load error naming the folder
and the fix. Then the class `config.json` names first in `architectures`, when the installed
transformers has it (else `AutoModel`), loads the folder with `local_files_only` (no network)
and `use_safetensors` (the weights read by safetensors), seeded as a factory is, in eval mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from onnx_parity.locations import shorten
from onnx_parity.models.lfs import refuse_pointer
from onnx_parity.models.load_errors import LoadError
from onnx_parity.settings import ModelSpec

CONFIG = "config.json"
SAFETENSORS = "*.safetensors"
# What save_pretrained wrote before safetensors, and other pickles of weights.
PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")
FALLBACK = "AutoModel"
_RESAVE = ("Load it once where you trust it and save it again with safetensors: "
           "`model.save_pretrained(folder)` (safetensors is its default), then commit the "
           "`*.safetensors` files.")


def checkpoint_classes(folder: Path) -> tuple[str, ...]:
    """The class the folder is built with, by name, for the zygote to import beforehand; ()
    when its config cannot be read (the worker then says why)."""
    try:
        config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    named = _architecture(config)
    return (named,) if named and named.isidentifier() else (FALLBACK,)


def build_checkpoint(spec: ModelSpec, repo: Path) -> Any:
    """The folder's model in eval mode (torch.nn.Module), the global seeds set by the factory
    beforehand (factory.py builds it; this module only reads the folder)."""
    folder = spec.transformers
    assert folder is not None  # the loader requires factory or transformers
    what = f'transformers folder "{_relative(folder, repo)}"'
    config = _config(folder, what)
    _weights(folder, what)
    if "auto_map" in config:
        raise LoadError(
            f"{what} needs remote code: its config.json maps the model to the folder's own "
            f"Python (auto_map: {shorten(json.dumps(config['auto_map']), 160)}), which "
            "onnx-parity never runs from a checkpoint.",
            fix="Write a factory in your repository that builds the model's class and loads "
                "the folder's safetensors (`factory = \"models.net:build\"`), or use a model "
                "class the installed transformers has.")
    module = _load(folder, config, what)
    module.eval()
    return module


def _relative(folder: Path, repo: Path) -> str:
    try:
        return folder.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return folder.as_posix()


def _config(folder: Path, what: str) -> dict[str, Any]:
    if not folder.is_dir():
        raise LoadError(f"{what} does not exist." if not folder.exists() else
                        f"{what} is a file, not a folder.",
                        fix="Commit the folder that `save_pretrained` wrote (config.json and "
                            "*.safetensors), or correct `transformers`.")
    path = folder / CONFIG
    if not path.is_file():
        raise LoadError(f"{what} has no config.json.",
                        fix="Commit the whole folder that `model.save_pretrained(folder)` "
                            "wrote: config.json beside the *.safetensors.")
    refuse_pointer(path, f"{what}: config.json")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise LoadError(f"{what}: config.json cannot be read as JSON: {shorten(str(error), 200)}.",
                        fix="Commit the config.json that save_pretrained wrote.") from None
    if not isinstance(config, dict):
        raise LoadError(f"{what}: config.json holds no JSON object.",
                        fix="Commit the config.json that save_pretrained wrote.")
    return config


def _weights(folder: Path, what: str) -> None:
    found = sorted(folder.glob(SAFETENSORS))
    for path in found:
        refuse_pointer(path, f"{what}: {path.name}")
    if found:
        return
    pickled = sorted(path.name for pattern in PICKLED for path in folder.glob(pattern))
    if pickled:
        raise LoadError(
            f"{what} holds pickled weights only ({', '.join(pickled[:3])}"
            f"{', ...' if len(pickled) > 3 else ''}): unpickling them could run code, so "
            "onnx-parity reads weights from *.safetensors files only.", fix=_RESAVE)
    raise LoadError(f"{what} holds no weights (no *.safetensors file).",
                    fix="Commit the *.safetensors files that `save_pretrained` wrote beside "
                        "config.json.")


def _architecture(config: dict[str, Any]) -> str | None:
    named = config.get("architectures")
    if isinstance(named, list) and named and isinstance(named[0], str):
        return named[0]
    return None


def _model_class(transformers: Any, config: dict[str, Any]) -> Any:
    """The class config.json names, when transformers has it as a model class; else AutoModel."""
    named = _architecture(config)
    found = getattr(transformers, named, None) if named and named.isidentifier() else None
    if isinstance(found, type) and issubclass(found, transformers.PreTrainedModel):
        return found
    return getattr(transformers, FALLBACK)


def _load(folder: Path, config: dict[str, Any], what: str) -> Any:
    import transformers

    model_class = _model_class(transformers, config)
    print(f"onnx-parity: {what} built with transformers.{model_class.__name__}", flush=True)
    try:
        module, info = model_class.from_pretrained(
            str(folder), local_files_only=True, use_safetensors=True, output_loading_info=True)
    except Exception as error:  # the folder does not fit what transformers expects
        raise LoadError(
            f"{what}: transformers.{model_class.__name__}.from_pretrained failed: "
            f"{type(error).__name__}: {shorten(str(error), 400)}",
            fix=f"Save the folder with `save_pretrained` from transformers "
                f"{transformers.__version__} (the installed one), or pin the version that "
                "wrote it.") from None
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        raise LoadError(
            f"{what}: its safetensors lack {len(missing)} weight(s) that "
            f"{model_class.__name__} needs ({', '.join(missing[:3])}): they would be random.",
            fix="Save the whole model with `save_pretrained`, or name the class it was saved "
                "from first in config.json's `architectures`.")
    return module
