"""The deployment keys of `generate`: `bundle` (the folders each runtime loads unchanged) and
`runtime` (the prompts generated again by that runtime's own loop).

Both need a transformers model's config (the bundles' config files come from it), and
onnxruntime-genai's need the optional extra `onnx-parity[genai]` (its model builder writes
`genai_config.json`, its generator runs the prompts): without it installed the check stops here
with exit 2 naming the extra, before any model runs.
"""

from __future__ import annotations

import importlib.util

from onnx_parity.settings.values import ConfigError, KeyContext, dotted, show_value, wrong_type

GENAI = "onnxruntime-genai"
OPTIMUM = "optimum"
BUNDLES = (GENAI, OPTIMUM)
RUNTIMES = (GENAI,)
GENAI_MODULE = "onnxruntime_genai"
EXTRA = "pip install 'onnx-parity[genai]'"


def bundle_value(value: dict[str, object], context: KeyContext,
                 cache: str | None) -> tuple[str, ...]:
    """`bundle = ["onnxruntime-genai", "optimum"]`: each runtime named once."""
    if "bundle" not in value:
        return ()
    where = context.place.at(dotted(context.key, "bundle"))
    raw = value["bundle"]
    fix = 'an array of runtimes, e.g. bundle = ["onnxruntime-genai", "optimum"]'
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise wrong_type(where, raw, fix)
    unknown = [item for item in raw if item not in BUNDLES]
    if unknown or len(set(raw)) != len(raw):
        said = f"{show_value(unknown[0])} is not" if unknown else "a runtime is named twice:"
        raise ConfigError(f"{where}: {said} a runtime a bundle is written for. Write {fix} "
                          f"(the runtimes: {', '.join(BUNDLES)}).")
    names = tuple(str(item) for item in raw)
    _check_deployable(where, cache, GENAI in names)
    return names


def runtime_value(value: dict[str, object], context: KeyContext, cache: str | None) -> str | None:
    """`runtime = "onnxruntime-genai"`: the prompts generated again by that runtime's loop."""
    if "runtime" not in value:
        return None
    where = context.place.at(dotted(context.key, "runtime"))
    raw = value["runtime"]
    if raw not in RUNTIMES:
        raise ConfigError(f'{where}: {show_value(raw)} is not a runtime this check can run. '
                          f'Write runtime = "{GENAI}" (its own generator decodes the prompts '
                          "from the bundle), or leave it out.")
    _check_deployable(where, cache, True)
    return GENAI


def _check_deployable(where: str, cache: str | None, genai: bool) -> None:
    if cache is not None:
        raise ConfigError(
            f'{where}: applies to a transformers model, whose config the bundles\' config files '
            'are written from; cache = "flat" is your own decoder with no config. Remove the '
            "key, or load the model from a transformers class or a save_pretrained folder.")
    if genai and importlib.util.find_spec(GENAI_MODULE) is None:
        raise ConfigError(
            f"{where}: needs onnxruntime-genai (its model builder writes genai_config.json and "
            f"its generator runs the prompts), which is not installed. Install the extra: "
            f"{EXTRA}, or remove the key.")
