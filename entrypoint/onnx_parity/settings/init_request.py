"""What `onnx-parity init` is asked to add: one model, its inputs and axes, checked as given.

The options are parsed and checked here, before any worker starts: a malformed `--input`,
`--dynamic` or `--name` is an `InitError` (exit 2) naming the option and the fix. What can
only be checked against the model itself (its `forward` parameters, the arrays a samples
function returns) is checked in the worker (models/probe.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.errors import UserError
from onnx_parity.settings.keys.model_keys import factory_value, model_name_value
from onnx_parity.settings.values import ConfigError, shown

FLOAT_DTYPES = ("float32", "float16", "float64")
INTEGER_DTYPES = ("int64", "int32", "int16", "int8", "uint8")
DTYPES = (*FLOAT_DTYPES, *INTEGER_DTYPES, "bool")
DEFAULT_DTYPE = "float32"
SAMPLES_FOLDER = "samples"
INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHAPE = re.compile(r"[1-9][0-9]*(x[1-9][0-9]*)*")
NUMBER = r"-?[0-9]+(?:\.[0-9]+)?"
RANGE = re.compile(rf"({NUMBER})-({NUMBER})")
DYNAMIC = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):([0-9]{1,3})=(.+)")
INPUT_FORMS = "NAME=SHAPE[:DTYPE[:LOW-HIGH]], e.g. input=1x3x224x224 or ids=2x16:int64:0-30522"


class InitError(UserError):
    """`onnx-parity init` cannot add the model as asked; the text names the option and fix."""

    title = "init"


@dataclass(frozen=True)
class InputRequest:
    """One `--input`: a forward parameter and, for random samples, how to make them."""

    name: str
    shape: tuple[int, ...] | None  # None: only named (the samples function gives the arrays)
    dtype: str = DEFAULT_DTYPE
    low: float | None = None  # random values in [low, high); None: standard normal floats
    high: float | None = None

    @property
    def described(self) -> str:
        if self.shape is None:
            return self.name
        shape = "x".join(map(str, self.shape))
        span = "" if self.low is None else f":{self.low:g}-{self.high:g}"
        return f"{self.name}={shape}:{self.dtype}{span}"


@dataclass(frozen=True)
class NewModel:
    """The model `init` adds: its entry's values and where its samples come from."""

    name: str
    factory: str
    inputs: tuple[InputRequest, ...]
    dynamic_axes: dict[str, dict[int, str]]  # empty: axis 0 of every input is "batch"
    samples_function: str | None  # "module:function" returning real inputs, or None: random
    weights: str | None = None  # as written, relative to the repository root

    def sample_file(self, input_name: str) -> str:
        return f"{SAMPLES_FOLDER}/{self.name}/{input_name}.npy"

    def axes_for(self, names: tuple[str, ...]) -> dict[str, dict[int, str]]:
        """The declared axes, or by default axis 0 of each input as `batch`."""
        return self.dynamic_axes or {name: {0: "batch"} for name in names}


def new_model(factory: str, inputs: list[str], dynamic: list[str], name: str | None,
              samples: str | None, weights: str | None) -> NewModel:
    factory = _checked("--factory", factory, factory_value)
    parsed = tuple(parse_input(text, random=samples is None) for text in inputs)
    if samples is None and not parsed:
        raise InitError("give each input of forward with --input NAME=SHAPE (e.g. --input "
                        "input=1x3x224x224), or --samples module:function returning real inputs.")
    _no_repeats([item.name for item in parsed], "--input")
    if samples is not None:
        _checked("--samples", samples, factory_value)
    axes = parse_dynamic(dynamic, parsed)
    chosen = _checked("--name", name or default_name(factory), model_name_value)
    return NewModel(chosen, factory, parsed, axes, samples, weights)


def default_name(factory: str) -> str:
    """`models.net:build` -> `net`: the factory's module, as a model name."""
    module = factory.partition(":")[0].rsplit(".", 1)[-1]
    return module.replace("_", "-")


def parse_input(text: str, random: bool) -> InputRequest:
    name, equals, spec = text.partition("=")
    if not INPUT_NAME.fullmatch(name):
        raise InitError(f'--input "{shown(text)}": "{shown(name)}" is not a parameter name. '
                        f"Write {INPUT_FORMS}.")
    if not equals:
        if random:
            raise InitError(f'--input "{shown(text)}": no shape, and no --samples function to '
                            f"give the arrays. Write {INPUT_FORMS}.")
        return InputRequest(name, None)
    shape, _, rest = spec.partition(":")
    dtype, _, span = rest.partition(":")
    return _input(text, name, _shape(text, shape), dtype or DEFAULT_DTYPE, span)


def _shape(text: str, shape: str) -> tuple[int, ...]:
    if not SHAPE.fullmatch(shape):
        raise InitError(f'--input "{shown(text)}": shape "{shown(shape)}" is not sizes >= 1 '
                        "joined by x. Axis 0 is the samples axis (batches are cut from it), e.g. "
                        "1x3x224x224 for one image.")
    return tuple(int(size) for size in shape.split("x"))


def _input(text: str, name: str, shape: tuple[int, ...], dtype: str, span: str) -> InputRequest:
    if dtype not in DTYPES:
        raise InitError(f'--input "{shown(text)}": dtype "{shown(dtype)}" is not one of '
                        f"{', '.join(DTYPES)}.")
    if dtype == "bool" or (dtype in FLOAT_DTYPES and not span):
        if span:
            raise InitError(f'--input "{shown(text)}": a bool input takes no range.')
        return InputRequest(name, shape, dtype)
    if not span:
        raise InitError(f'--input "{shown(text)}": an integer input needs its range LOW-HIGH '
                        f"(HIGH excluded), e.g. {name}={'x'.join(map(str, shape))}:{dtype}:0-30522 "
                        "for token ids of a 30522-word vocabulary.")
    low, high = _range(text, span, integer=dtype in INTEGER_DTYPES)
    return InputRequest(name, shape, dtype, low, high)


def _range(text: str, span: str, integer: bool) -> tuple[float, float]:
    found = RANGE.fullmatch(span)
    if found is None or (integer and ("." in span)):
        kind = "whole numbers" if integer else "numbers"
        raise InitError(f'--input "{shown(text)}": range "{shown(span)}" is not LOW-HIGH with '
                        f"{kind}, e.g. 0-30522.")
    low, high = float(found.group(1)), float(found.group(2))
    if low >= high:
        raise InitError(f'--input "{shown(text)}": the range {span} is empty. Give LOW < HIGH '
                        "(HIGH is excluded).")
    return low, high


def parse_dynamic(texts: list[str], inputs: tuple[InputRequest, ...]) -> dict[str, dict[int, str]]:
    axes: dict[str, dict[int, str]] = {}
    names = {item.name: item for item in inputs}
    for text in texts:
        found = DYNAMIC.fullmatch(text)
        if found is None:
            raise InitError(f'--dynamic "{shown(text)}": write INPUT:AXIS=NAME, e.g. '
                            "--dynamic input:0=batch --dynamic ids:1=sequence.")
        name, axis, label = found.group(1), int(found.group(2)), found.group(3)
        given = names.get(name)
        if inputs and given is None:
            raise InitError(f'--dynamic "{shown(text)}": "{name}" is not one of the --input '
                            f"names ({', '.join(names)}).")
        if given is not None and given.shape is not None and axis >= len(given.shape):
            raise InitError(f'--dynamic "{shown(text)}": input "{name}" has {len(given.shape)} '
                            f"axes (shape {given.described}); number axes from 0.")
        axes.setdefault(name, {})[axis] = label
    return axes


def _checked(option: str, value: str, check: Callable[[object, str], str]) -> str:
    """A value checked by a configuration key's own check, its message naming the option."""
    try:
        return check(value, option)
    except ConfigError as error:
        raise InitError(str(error)) from None


def _no_repeats(names: list[str], option: str) -> None:
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise InitError(f"{option} names {', '.join(doubled)} more than once; give each input "
                        "once.")


def weights_option(repo: Path, raw: str | None) -> str | None:
    """`--weights` as the entry will write it: relative to the repository, forward slashes."""
    if raw is None:
        return None
    path = Path(raw)
    absolute = path if path.is_absolute() else Path.cwd() / path
    try:
        return absolute.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        raise InitError(f"--weights {raw}: the file must lie inside the repository ({repo}). "
                        "Fix: commit it there and give its path.") from None
