"""Where a `[[model]]`'s model comes from besides `factory`: a transformers folder
(`transformers`, built by models/checkpoints.py), and the user's own export
(`export-command`, run by export/command.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

from onnx_parity.settings.paths import resolve_inside
from onnx_parity.settings.values import ConfigError, KeyContext, Place, non_empty, shown, string

# A [[model]] names exactly one of these.
MODEL_SOURCES = ("factory", "transformers")
PLACEHOLDER = "{onnx}"
_COMMAND = 'a command line, e.g. export-command = "python scripts/export_onnx.py --out {onnx}"'


def transformers_value(value: object, context: KeyContext) -> Path:
    where = context.where
    raw = string(value, where, 'the path of a folder that save_pretrained wrote, e.g. '
                 'transformers = "checkpoints/tiny-llama"')
    if "factory" in context.read:
        raise ConfigError(
            f"{where}: this [[model]] sets both `factory` and `transformers`. Keep one: "
            "`factory` calls your code to build the model, `transformers` builds the "
            "save_pretrained folder with transformers.")
    return resolve_inside(context.root, raw, where)


def export_command_value(value: object, context: KeyContext) -> str:
    where = context.where
    text = non_empty(value, where, _COMMAND)
    if "exporter" in context.read:
        raise ConfigError(
            f"{where}: this [[model]] sets `exporter` too, which does not apply: the command "
            "exports the model. Remove `exporter` from it (a top-level `exporter` is fine).")
    try:
        arguments = shlex.split(text)
    except ValueError as error:
        raise ConfigError(f'{where}: "{shown(text)}" cannot be split into arguments ({error}). '
                          f"Close every quote; write {_COMMAND}.") from None
    if not any(PLACEHOLDER in argument for argument in arguments):
        raise ConfigError(
            f'{where}: "{shown(text)}" does not say where to write the ONNX file. Put '
            f"{PLACEHOLDER} where the command takes the output path; write {_COMMAND}.")
    return text.strip()


def command_arguments(command: str, onnx: Path) -> list[str]:
    """The command's arguments, split like a shell would, with `{onnx}` replaced by `onnx`."""
    return [argument.replace(PLACEHOLDER, str(onnx)) for argument in shlex.split(command)]


def missing_source(place: Place) -> ConfigError:
    """A [[model]] with neither `factory` nor `transformers`."""
    return ConfigError(
        f'{place.at("factory")}: missing. Add it to this [[model]], e.g. factory = '
        '"models.net:build_model" (or, for a folder that save_pretrained wrote, transformers = '
        '"checkpoints/tiny-llama").')
