"""The keys only a `[[model]]` has: name, factory, weights, samples, outputs, axes, allowances."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.settings.keys.axis_keys import AXIS, check_roots, derived_axis, dimension_label
from onnx_parity.settings.paths import bundle_path, sample_path, weights_path
from onnx_parity.settings.values import (
    ConfigError,
    KeyContext,
    Place,
    check_keys,
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

ALLOW_WARNING_KEYS = ("match", "reason")
# The name becomes `<name>.onnx` and an artifact name: keep it to characters safe everywhere.
MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class AllowWarning:
    """One `[[model.allow-warnings]]` entry: an export warning accepted, and why."""

    match: str
    reason: str


def model_name_value(value: object, where: str) -> str:
    name = string(value, where, 'a model name, e.g. name = "small-cnn"')
    if not MODEL_NAME.fullmatch(name):
        raise ConfigError(
            f"{where}: {show_value(name)} cannot be used as a file name (it becomes <name>.onnx). "
            "Use 1-128 letters, digits, '.', '_' or '-', starting with a letter, digit or '_', "
            'e.g. "small-cnn".'
        )
    return name


def factory_value(value: object, where: str) -> str:
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


def weights_value(value: object, context: KeyContext) -> Path:
    raw = string(value, context.where,
                 'a path to a state_dict file, e.g. weights = "weights/model.pt"')
    if "transformers" in context.read:
        raise ConfigError(f"{context.where}: `weights` does not apply to a `transformers` folder, "
                          "whose *.safetensors are the weights. Remove `weights`.")
    return weights_path(context.root, raw, context.where)


def inputs_value(value: object, context: KeyContext) -> dict[str, Path] | Path:
    place, root, where = context.place, context.root, context.where
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


def outputs_value(value: object, where: str) -> tuple[str, ...]:
    fix = 'a non-empty list of output names, e.g. outputs = ["logits"] (or omit the key)'
    if not isinstance(value, list) or not value:
        raise wrong_type(where, value, fix)
    names = tuple(non_empty(item, where, "an output name") for item in value)
    no_duplicates(names, where, "list each output name once")
    return names


def dynamic_axes_value(value: object, context: KeyContext) -> dict[str, dict[int, str]]:
    place, where = context.place, context.where
    inputs = context.read["inputs"]
    outputs = context.read.get("outputs")
    if not isinstance(value, dict):
        raise wrong_type(where, value, 'a table, e.g. dynamic-axes = { input = { 0 = "batch" } }')
    # Names can only be checked when both sides are declared: an unknown name could
    # otherwise be an output (or an input inside a bundle) we have not seen.
    known = (tuple(inputs) + tuple(outputs)
             if isinstance(inputs, dict) and isinstance(outputs, tuple) else None)
    declared = {
        _axis_owner(name, where, known): _axes(axes, place, dotted("dynamic-axes", name))
        for name, axes in value.items()
    }
    check_roots(declared, tuple(inputs) if isinstance(inputs, dict) else None, place)
    return declared


def _axis_owner(name: str, where: str, known: tuple[str, ...] | None) -> str:
    non_empty(name, where, "an input or output name")
    if known is None or name in known:
        return name
    guess = did_you_mean(name, known)
    raise ConfigError(
        f'{where}: "{shown(name)}" is neither an input nor an output of this model{guess} '
        f"Name one of {quoted(known)}."
    )


def _axes(value: object, place: Place, key: str) -> dict[int, str]:
    where = place.at(key)
    fix = 'a table of axis index -> dimension name, e.g. { 0 = "batch" }'
    if not isinstance(value, dict) or not value:
        raise wrong_type(where, value, fix)
    axes: dict[int, str] = {}
    for axis, label in value.items():
        if not AXIS.fullmatch(axis):
            raise ConfigError(
                f'{where}: axis "{shown(axis)}" is not an axis index (0, 1, 2, ...). Use {fix}.'
            )
        axes[int(axis)] = dimension_label(non_empty(label, where, "a dimension name"),
                                          place.at(dotted(key, axis)))
    return axes


def allow_warnings_value(value: object, context: KeyContext) -> tuple[AllowWarning, ...]:
    place = context.place
    if not isinstance(value, list):
        raise wrong_type(
            context.where, value,
            "[[model.allow-warnings]] sections, each with match and reason",
        )
    return tuple(_allow_warning(item, place.within(f"allow-warnings[{index}]"))
                 for index, item in enumerate(value))


def _allow_warning(value: object, place: Place) -> AllowWarning:
    if not isinstance(value, dict):
        raise ConfigError(
            f"{place.here()}: expected a table, got {show_value(value)}. Write a "
            "[[model.allow-warnings]] section with match and reason."
        )
    check_keys(value, ALLOW_WARNING_KEYS, place)
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


AxisSizes = dict[str, dict[int, tuple[int, ...]]]


def axis_sizes_value(value: object, context: KeyContext) -> AxisSizes:
    """input -> axis -> sizes; every axis named must be a declared dynamic axis other than the
    input's batch axis, and a root dimension rather than one derived from another."""
    place, where = context.place, context.where
    declared = context.read.get("dynamic-axes", {})
    dynamic_axes: dict[str, dict[int, str]] = declared if isinstance(declared, dict) else {}
    if not isinstance(value, dict):
        raise wrong_type(where, value, "a table, e.g. axis-sizes = { input_ids = { 1 = [8, 16] } }")
    batch_axes = context.read.get("batch-axis", {})
    return {
        _sized_input(name, where, dynamic_axes):
            _axis_sizes(axes, place, name, dynamic_axes[name],
                        batch_axes.get(name, 0) if isinstance(batch_axes, dict) else 0)
        for name, axes in value.items()
    }


def _sized_input(name: str, where: str, dynamic_axes: dict[str, dict[int, str]]) -> str:
    non_empty(name, where, "an input name")
    if name in dynamic_axes:
        return name
    guess = did_you_mean(name, tuple(dynamic_axes))
    raise ConfigError(
        f'{where}: "{shown(name)}" has no axis in `dynamic-axes`{guess} Only a declared dynamic '
        'axis can run at other sizes: declare it first, e.g. dynamic-axes = { '
        f'{shown(name)} = {{ 1 = "sequence" }} }}.'
    )


def _axis_sizes(value: object, place: Place, name: str, declared: dict[int, str],
                batch_axis: int | None) -> dict[int, tuple[int, ...]]:
    key = dotted("axis-sizes", name)
    where = place.at(key)
    fix = "a table of axis index -> list of sizes, e.g. { 1 = [8, 16] }"
    if not isinstance(value, dict) or not value:
        raise wrong_type(where, value, fix)
    sizes: dict[int, tuple[int, ...]] = {}
    for axis, listed in value.items():
        if not AXIS.fullmatch(axis):
            raise ConfigError(
                f'{where}: axis "{shown(axis)}" is not an axis index (1, 2, ...). Use {fix}.'
            )
        index = int(axis)
        if index == batch_axis:
            raise ConfigError(
                f"{where}: axis {index} is the batch axis of \"{shown(name)}\", which "
                "`batch-sizes` sets. Name another axis here, or set batch-sizes = [...]."
            )
        derived_axis(declared.get(index), where, index)
        if index not in declared:
            raise ConfigError(
                f'{where}: axis {index} of "{shown(name)}" is not declared in `dynamic-axes` '
                f"(declared: {', '.join(map(str, sorted(declared))) or 'none'}). Declare it "
                f'there, e.g. {shown(name)} = {{ {index} = "sequence" }}.'
            )
        sizes[index] = _sizes(listed, place.at(dotted(key, axis)))
    return sizes


def _sizes(value: object, where: str) -> tuple[int, ...]:
    fix = "a non-empty list of distinct sizes >= 1, e.g. [8, 16]"
    if not isinstance(value, list) or not value:
        raise wrong_type(where, value, fix)
    sizes = tuple(value)
    if any(isinstance(size, bool) or not isinstance(size, int) or size < 1 for size in sizes):
        raise ConfigError(f"{where}: {show_value(value)} holds a value that is not a size >= 1. "
                          f"Use {fix}.")
    no_duplicates(sizes, where, "list each size once")
    return tuple(int(size) for size in sizes)


def compare_mask_value(value: object, context: KeyContext) -> dict[str, str]:
    """output -> mask input; both must name the mask's axes in `dynamic-axes` by the same labels."""
    fix = ('a table of output name -> mask input name, e.g. compare-mask = { logits = '
           '"attention_mask" }')
    if not isinstance(value, dict) or not value:
        raise wrong_type(context.where, value, fix)
    return {output: _mask_input(output, mask, context) for output, mask in value.items()}


def _mask_input(output: str, mask: object, context: KeyContext) -> str:
    where = context.place.at(dotted("compare-mask", output))
    non_empty(output, context.where, "an output name")
    name = non_empty(mask, where, 'the name of an input, e.g. "attention_mask"')
    inputs, outputs = context.read["inputs"], context.read.get("outputs")
    if isinstance(outputs, tuple) and output not in outputs:
        raise ConfigError(f'{context.where}: "{shown(output)}" is not an output of this model'
                          f"{did_you_mean(output, outputs)} Name one of {quoted(outputs)}.")
    if isinstance(inputs, dict) and name not in inputs:
        raise ConfigError(f'{where}: "{shown(name)}" is not an input of this model'
                          f"{did_you_mean(name, tuple(inputs))} Name the input whose zeros mark "
                          f"the positions to leave out, one of {quoted(tuple(inputs))}.")
    _same_labels(output, name, context.read.get("dynamic-axes", {}), where)
    return name


def _same_labels(output: str, mask: str, declared: object, where: str) -> None:
    """Every axis of the mask is matched to the output's axis of the same dimension name."""
    axes: dict[str, dict[int, str]] = declared if isinstance(declared, dict) else {}
    mask_labels = tuple(axes.get(mask, {}).values())
    if not mask_labels:
        raise ConfigError(
            f'{where}: the mask "{shown(mask)}" has no axes in `dynamic-axes`, so its axes '
            "cannot be matched to the output's. Name each axis of the mask there, e.g. "
            f'dynamic-axes = {{ {shown(mask)} = {{ 0 = "batch", 1 = "sequence" }} }}, and the '
            "same names on the output's axes.")
    output_labels = tuple(axes.get(output, {}).values())
    missing = [label for label in mask_labels if label not in output_labels]
    if missing:
        raise ConfigError(
            f'{where}: the output "{shown(output)}" has no axis named {quoted(tuple(missing))} '
            f"in `dynamic-axes` (it names {quoted(output_labels) or 'none'}), so the mask's "
            f'axes cannot be matched to it. Name the output\'s axes with the mask\'s names, '
            f'e.g. dynamic-axes = {{ {shown(output)} = {{ 0 = "batch", 1 = "sequence" }} }}.')
    repeated = sorted({label for label in mask_labels
                       if mask_labels.count(label) > 1 or output_labels.count(label) > 1})
    if repeated:
        raise ConfigError(
            f"{where}: {quoted(tuple(repeated))} names more than one axis of "
            f'"{shown(mask)}" or "{shown(output)}" in `dynamic-axes`, so the mask\'s axes cannot '
            "be matched one to one. Give each dimension of the mask to one axis of each.")
