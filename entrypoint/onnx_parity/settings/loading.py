"""Validate the configuration table into one frozen `Settings`.

Every mistake raises `ConfigError` with one short paragraph: what is wrong, where (the file
relative to the repository, the model, the key) and the fix. Nothing else escapes: the
configuration comes from a pull request and may be anything. Finding and parsing the file is
settings/config_file.py's job; the keys, their checks and defaults are declared in
settings/schema.py, and everything here follows from those declarations.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from onnx_parity.settings.config_file import Table, find_config
from onnx_parity.settings.dtypes import check_dtype_variants
from onnx_parity.settings.keys.model_keys import ALLOW_WARNING_KEYS, MODEL_NAME
from onnx_parity.settings.keys.model_sources import MODEL_SOURCES, missing_source
from onnx_parity.settings.schema import Key, ModelSpec, Settings, declared_keys
from onnx_parity.settings.source_folders import found_source_folders
from onnx_parity.settings.values import ConfigError, KeyContext, Place, check_keys, show_value

__all__ = ["ALLOW_WARNING_KEYS", "MODEL_KEYS", "TOP_KEYS", "load_settings"]

KEYS = declared_keys()
# Settable at the top level (for every model) and in a [[model]].
OVERRIDABLE = tuple(key for key in KEYS if not key.model_only and not key.top_only)
TOP_ONLY = tuple(key for key in KEYS if key.top_only)  # Settings' own keys
TOP_KEYS = (*(key.name for key in (*OVERRIDABLE, *TOP_ONLY)), "model")
MODEL_KEYS = tuple(key.name for key in KEYS if not key.top_only)

# ---------------------------------------------------------------------------------------------
# Entry point


def load_settings(repo: Path, config: Path | None = None) -> Settings:
    """The validated settings for `repo`, read from `config` or found in the repository."""
    root = repo.resolve()
    found = find_config(root, config)
    place = Place(found.label)
    check_keys(found.table, TOP_KEYS, place, belongs_in_model=MODEL_KEYS)
    common = _fields(_read(found.table, OVERRIDABLE, place, root))
    models = _models(found.table, place, common, root)
    top = _fields(_read(found.table, TOP_ONLY, place, root))
    return Settings(repo=root, config_path=found.path.resolve(), models=models, **top)


def _read(table: Table, keys: Iterable[Key], place: Place, root: Path) -> dict[str, Any]:
    """TOML key -> checked value, for the keys of `keys` that `table` sets, in their order
    (a key's check sees the values read before it)."""
    read: dict[str, Any] = {}
    for key in keys:
        if key.name in table:
            read[key.name] = key.read(table[key.name], KeyContext(place, key.name, root, read))
    return read


def _fields(read: dict[str, Any]) -> dict[str, Any]:
    """TOML key -> value, as ModelSpec field -> value."""
    return {key.field: read[key.name] for key in KEYS if key.name in read}


# ---------------------------------------------------------------------------------------------
# Models


def _models(table: Table, place: Place, common: dict[str, Any],
            root: Path) -> tuple[ModelSpec, ...]:
    entries = _model_entries(table, place)
    models: list[ModelSpec] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(entries):
        model = _model(entry, index, place, common, root)
        if model.name in seen:
            raise ConfigError(
                f'{place.file}: model[{index}]: key "name": "{model.name}" is already used by '
                f"{seen[model.name]}. Model names must be unique (each becomes <name>.onnx); "
                "rename one of them."
            )
        seen[model.name] = f"model[{index}]"
        models.append(model)
    return tuple(models)


def _model_entries(table: Table, place: Place) -> list[object]:
    if "model" not in table:
        raise ConfigError(
            f"{place.here()}: no models are declared. Add at least one [[model]] entry with "
            'name, factory and inputs, e.g. [[model]] name = "my-model" '
            'factory = "models.net:build_model" inputs = { input = "samples/input.npy" }.'
        )
    entries = table["model"]
    if isinstance(entries, dict):
        raise ConfigError(
            f'{place.at("model")}: written as a single [model] table. Use [[model]] (double '
            "brackets) for each model, even when there is only one."
        )
    if not isinstance(entries, list) or not entries:
        raise ConfigError(
            f'{place.at("model")}: expected a non-empty list of [[model]] entries, got '
            f"{show_value(entries)}. Declare each model in its own [[model]] section."
        )
    return entries


def _model(entry: object, index: int, file: Place, common: dict[str, Any],
           root: Path) -> ModelSpec:
    place = file.within(_model_label(entry, index))
    if not isinstance(entry, dict):
        raise ConfigError(
            f"{place.here()}: expected a table, got {show_value(entry)}. Declare each model in "
            "its own [[model]] section with name, factory and inputs."
        )
    _top_level_only(entry, place)
    check_keys(entry, MODEL_KEYS, place)
    _require(entry, place)
    fields = {**common, **_fields(_read(entry, KEYS, place, root))}
    check_dtype_variants(fields, place)
    fields["explicit"] = tuple(sorted(fields))  # set by the user, before defaults are found
    # Without python-path, the factory's package is where the build configuration says.
    fields.setdefault("python_path", found_source_folders(root, fields.get("factory") or ""))
    return ModelSpec(**fields)


def _model_label(entry: object, index: int) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    if isinstance(name, str) and MODEL_NAME.fullmatch(name):
        return f'model "{name}"'
    return f"model[{index}]"


def _require(entry: Table, place: Place) -> None:
    for key in KEYS:
        if key.default is None and key.name not in entry:
            raise ConfigError(
                f"{place.at(key.name)}: missing. Add it to this [[model]], e.g. {key.example}."
            )
    if not any(name in entry for name in MODEL_SOURCES):
        raise missing_source(place)


def _top_level_only(entry: Table, place: Place) -> None:
    for key in TOP_ONLY:
        if key.name in entry:
            raise ConfigError(
                f"{place.at(key.name)}: only the top level sets this key (it applies to every "
                "model of the run). Move it above the first [[model]]."
            )
