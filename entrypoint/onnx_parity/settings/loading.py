"""Validate the configuration table into one frozen `Settings`.

Every mistake raises `ConfigError` with one short paragraph: what is wrong, where (the file
relative to the repository, the model, the key) and the fix. Nothing else escapes: the
configuration comes from a pull request and may be anything. Finding and parsing the file is
settings/config_file.py's job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onnx_parity.settings.config_file import Table, find_config
from onnx_parity.settings.model_keys import (
    ALLOW_WARNING_KEYS,
    MODEL_NAME,
    allow_warnings_value,
    axis_sizes_value,
    dynamic_axes_value,
    factory_value,
    inputs_value,
    model_name_value,
    outputs_value,
    weights_value,
)
from onnx_parity.settings.schema import ModelSpec, Settings, overridable
from onnx_parity.settings.values import ConfigError, Place, check_keys, show_value

__all__ = ["ALLOW_WARNING_KEYS", "MODEL_KEYS", "TOP_KEYS", "load_settings"]

OVERRIDE_KEYS = tuple(item.key for item in overridable())
TOP_KEYS = (*OVERRIDE_KEYS, "model")
MODEL_KEYS = (
    "name", "factory", "weights", "inputs", "outputs", "dynamic-axes", "allow-warnings",
    *OVERRIDE_KEYS, "axis-sizes",
)

# ---------------------------------------------------------------------------------------------
# Entry point


def load_settings(repo: Path, config: Path | None = None) -> Settings:
    """The validated settings for `repo`, read from `config` or found in the repository."""
    root = repo.resolve()
    found = find_config(root, config)
    place = Place(found.label)
    check_keys(found.table, TOP_KEYS, place, belongs_in_model=MODEL_KEYS)
    common = _overrides(found.table, place)
    models = _models(found.table, place, common, root)
    return Settings(repo=root, config_path=found.path.resolve(), models=models)


# ---------------------------------------------------------------------------------------------
# Values that may be set at the top level and overridden per model


def _overrides(table: Table, place: Place) -> dict[str, Any]:
    """The ModelSpec fields that `table` sets, checked (see schema.setting)."""
    return {item.field: item.check(table[item.key], place.at(item.key))
            for item in overridable() if item.key in table}


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
    check_keys(entry, MODEL_KEYS, place)
    _require(entry, ("name", "factory", "inputs"), place)
    name = model_name_value(entry["name"], place.at("name"))
    factory = factory_value(entry["factory"], place.at("factory"))
    own = {**common, **_overrides(entry, place)}
    inputs = inputs_value(entry["inputs"], place, root)
    outputs = outputs_value(entry["outputs"], place.at("outputs")) if "outputs" in entry else None
    dynamic_axes = dynamic_axes_value(entry.get("dynamic-axes", {}), place, inputs, outputs)
    return ModelSpec(
        name=name,
        factory=factory,
        weights=weights_value(entry.get("weights"), place.at("weights"), root),
        inputs=inputs,
        outputs=outputs or (),
        dynamic_axes=dynamic_axes,
        allow_warnings=allow_warnings_value(entry.get("allow-warnings", []), place),
        axis_sizes=axis_sizes_value(entry.get("axis-sizes", {}), place, dynamic_axes),
        **own,
    )


def _model_label(entry: object, index: int) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    if isinstance(name, str) and MODEL_NAME.fullmatch(name):
        return f'model "{name}"'
    return f"model[{index}]"


def _require(entry: Table, keys: tuple[str, ...], place: Place) -> None:
    fixes = {
        "name": 'name = "my-model"',
        "factory": 'factory = "models.net:build_model"',
        "inputs": 'inputs = { input = "samples/input.npy" }',
    }
    for key in keys:
        if key not in entry:
            raise ConfigError(
                f"{place.at(key)}: missing. Add it to this [[model]], e.g. {fixes[key]}."
            )
