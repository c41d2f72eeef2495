"""Validate the configuration table into one frozen `Settings`.

Every mistake raises `ConfigError` with one short paragraph: what is wrong, where (the file
relative to the repository, the model, the key) and the fix. Nothing else escapes: the
configuration comes from a pull request and may be anything. Finding and parsing the file is
settings/config_file.py's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.settings.config_file import Table, find_config
from onnx_parity.settings.paths import bundle_path, sample_path, weights_path
from onnx_parity.settings.schema import AllowWarning, ModelSpec, Settings, overridable
from onnx_parity.settings.values import (
    ConfigError,
    did_you_mean,
    dotted,
    no_duplicates,
    non_empty,
    quoted,
    show_value,
    shown,
    string,
    wrong_type,
)

OVERRIDE_KEYS = tuple(item.key for item in overridable())
TOP_KEYS = (*OVERRIDE_KEYS, "model")
MODEL_KEYS = (
    "name", "factory", "weights", "inputs", "outputs", "dynamic-axes", "allow-warnings",
    *OVERRIDE_KEYS,
)
ALLOW_WARNING_KEYS = ("match", "reason")
# The name becomes `<name>.onnx` and an artifact name: keep it to characters safe everywhere.
MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
AXIS = re.compile(r"[0-9]{1,3}")  # no tensor has 1000 dimensions

@dataclass(frozen=True)
class _Place:
    """Where in the configuration a value sits, for error messages."""

    file: str
    scope: str = ""

    def within(self, scope: str) -> _Place:
        return _Place(self.file, f"{self.scope}: {scope}" if self.scope else scope)

    def at(self, key: str) -> str:
        return ": ".join(part for part in (self.file, self.scope, f'key "{shown(key)}"') if part)

    def here(self) -> str:
        return ": ".join(part for part in (self.file, self.scope) if part)


# ---------------------------------------------------------------------------------------------
# Entry point


def load_settings(repo: Path, config: Path | None = None) -> Settings:
    """The validated settings for `repo`, read from `config` or found in the repository."""
    root = repo.resolve()
    found = find_config(root, config)
    place = _Place(found.label)
    _check_keys(found.table, TOP_KEYS, place, belongs_in_model=MODEL_KEYS)
    common = _overrides(found.table, place)
    models = _models(found.table, place, common, root)
    return Settings(repo=root, config_path=found.path.resolve(), models=models)


# ---------------------------------------------------------------------------------------------
# Keys


def _check_keys(
    table: Table, valid: tuple[str, ...], place: _Place, belongs_in_model: tuple[str, ...] = ()
) -> None:
    for key in table:
        if key not in valid:
            raise _unknown_key(key, valid, place, belongs_in_model)


def _unknown_key(
    key: str, valid: tuple[str, ...], place: _Place, belongs_in_model: tuple[str, ...]
) -> ConfigError:
    if key in belongs_in_model:
        return ConfigError(
            f"{place.at(key)}: this key belongs inside a [[model]] entry. Move it under the "
            "[[model]] it describes."
        )
    guess = did_you_mean(key, valid)
    return ConfigError(
        f"{place.at(key)}: unknown key{guess} Valid keys here: {', '.join(valid)}."
    )


# ---------------------------------------------------------------------------------------------
# Values that may be set at the top level and overridden per model


def _overrides(table: Table, place: _Place) -> dict[str, Any]:
    """The ModelSpec fields that `table` sets, checked (see schema.setting)."""
    return {item.field: item.check(table[item.key], place.at(item.key))
            for item in overridable() if item.key in table}


# ---------------------------------------------------------------------------------------------
# Models


def _models(table: Table, place: _Place, common: dict[str, Any],
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


def _model_entries(table: Table, place: _Place) -> list[object]:
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


def _model(entry: object, index: int, file: _Place, common: dict[str, Any],
           root: Path) -> ModelSpec:
    place = file.within(_model_label(entry, index))
    if not isinstance(entry, dict):
        raise ConfigError(
            f"{place.here()}: expected a table, got {show_value(entry)}. Declare each model in "
            "its own [[model]] section with name, factory and inputs."
        )
    _check_keys(entry, MODEL_KEYS, place)
    _require(entry, ("name", "factory", "inputs"), place)
    name = _model_name(entry["name"], place.at("name"))
    factory = _factory(entry["factory"], place.at("factory"))
    own = {**common, **_overrides(entry, place)}
    inputs = _inputs(entry["inputs"], place, root)
    outputs = _outputs(entry["outputs"], place.at("outputs")) if "outputs" in entry else None
    return ModelSpec(
        name=name,
        factory=factory,
        weights=_weights(entry.get("weights"), place.at("weights"), root),
        inputs=inputs,
        outputs=outputs or (),
        dynamic_axes=_dynamic_axes(entry.get("dynamic-axes", {}), place, inputs, outputs),
        allow_warnings=_allow_warnings(entry.get("allow-warnings", []), place),
        **own,
    )


def _model_label(entry: object, index: int) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    if isinstance(name, str) and MODEL_NAME.fullmatch(name):
        return f'model "{name}"'
    return f"model[{index}]"


def _require(entry: Table, keys: tuple[str, ...], place: _Place) -> None:
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


def _model_name(value: object, where: str) -> str:
    name = string(value, where, 'a model name, e.g. name = "small-cnn"')
    if not MODEL_NAME.fullmatch(name):
        raise ConfigError(
            f"{where}: {show_value(name)} cannot be used as a file name (it becomes <name>.onnx). "
            "Use 1-128 letters, digits, '.', '_' or '-', starting with a letter, digit or '_', "
            'e.g. "small-cnn".'
        )
    return name


def _factory(value: object, where: str) -> str:
    spec = string(value, where, 'a "module:callable" string, e.g. "models.cnn:SmallCNN"')
    module, colon, attribute = spec.partition(":")
    if not (colon and _dotted_identifier(module) and _dotted_identifier(attribute)):
        raise ConfigError(
            f'{where}: "{shown(spec)}" is not of the form "module:callable". Write the dotted '
            "module path, a colon, and the callable that returns the nn.Module, e.g. "
            '"models.cnn:SmallCNN" (importable from the repository root).'
        )
    return spec


def _dotted_identifier(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def _weights(value: object, where: str, root: Path) -> Path | None:
    if value is None:
        return None
    raw = string(value, where, 'a path to a state_dict file, e.g. weights = "weights/model.pt"')
    return weights_path(root, raw, where)


def _inputs(value: object, place: _Place, root: Path) -> dict[str, Path] | Path:
    where = place.at("inputs")
    if isinstance(value, str):
        return bundle_path(root, value, where)
    if not isinstance(value, dict) or not value:
        raise wrong_type(
            where, value, 'a table of input name -> sample file, e.g. inputs = { input = '
            '"samples/input.npy" }, or one .npz/.pt bundle file or Model Zoo folder'
        )
    return {
        non_empty(name, where, "an input name"):
            _sample(raw, place.at(dotted("inputs", name)), root)
        for name, raw in value.items()
    }


def _sample(value: object, where: str, root: Path) -> Path:
    raw = string(value, where, 'a path to a sample file, e.g. "samples/input.npy"')
    return sample_path(root, raw, where)


def _outputs(value: object, where: str) -> tuple[str, ...]:
    fix = 'a non-empty list of output names, e.g. outputs = ["logits"] (or omit the key)'
    if not isinstance(value, list) or not value:
        raise wrong_type(where, value, fix)
    names = tuple(non_empty(item, where, "an output name") for item in value)
    no_duplicates(names, where, "list each output name once")
    return names


def _dynamic_axes(
    value: object,
    place: _Place,
    inputs: dict[str, Path] | Path,
    outputs: tuple[str, ...] | None,
) -> dict[str, dict[int, str]]:
    where = place.at("dynamic-axes")
    if not isinstance(value, dict):
        raise wrong_type(where, value, 'a table, e.g. dynamic-axes = { input = { 0 = "batch" } }')
    # Names can only be checked when both sides are declared: an unknown name could
    # otherwise be an output (or an input inside a bundle) we have not seen.
    known = (*inputs, *outputs) if isinstance(inputs, dict) and outputs is not None else None
    return {
        _axis_owner(name, where, known): _axes(axes, place.at(dotted("dynamic-axes", name)))
        for name, axes in value.items()
    }


def _axis_owner(name: str, where: str, known: tuple[str, ...] | None) -> str:
    non_empty(name, where, "an input or output name")
    if known is None or name in known:
        return name
    guess = did_you_mean(name, known)
    raise ConfigError(
        f'{where}: "{shown(name)}" is neither an input nor an output of this model{guess} '
        f"Name one of {quoted(known)}."
    )


def _axes(value: object, where: str) -> dict[int, str]:
    fix = 'a table of axis index -> dimension name, e.g. { 0 = "batch" }'
    if not isinstance(value, dict) or not value:
        raise wrong_type(where, value, fix)
    axes: dict[int, str] = {}
    for axis, label in value.items():
        if not AXIS.fullmatch(axis):
            raise ConfigError(
                f'{where}: axis "{shown(axis)}" is not an axis index (0, 1, 2, ...). Use {fix}.'
            )
        axes[int(axis)] = non_empty(label, where, "a dimension name")
    return axes


def _allow_warnings(value: object, place: _Place) -> tuple[AllowWarning, ...]:
    if not isinstance(value, list):
        raise wrong_type(
            place.at("allow-warnings"), value,
            "[[model.allow-warnings]] sections, each with match and reason",
        )
    return tuple(_allow_warning(item, place.within(f"allow-warnings[{index}]"))
                 for index, item in enumerate(value))


def _allow_warning(value: object, place: _Place) -> AllowWarning:
    if not isinstance(value, dict):
        raise ConfigError(
            f"{place.here()}: expected a table, got {show_value(value)}. Write a "
            "[[model.allow-warnings]] section with match and reason."
        )
    _check_keys(value, ALLOW_WARNING_KEYS, place)
    fixes = {
        "match": 'match = "Converting a tensor to a Python boolean" (text found in the warning)',
        "reason": 'reason = "why this warning is harmless for this model" '
        "(the reason is the point)",
    }
    texts = {}
    for key, fix in fixes.items():
        if key not in value:
            raise ConfigError(f"{place.at(key)}: missing. Add {fix}.")
        texts[key] = non_empty(value[key], place.at(key), f"non-empty text: {fix}")
    return AllowWarning(match=texts["match"], reason=texts["reason"])
