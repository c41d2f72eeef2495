"""`onnx-parity init` inside the worker: build the model, read forward, make its samples.

Runs in a worker process (pipeline/new_model.py), never in the command's own: building a
model imports the user's code and torch. Everything that goes wrong with the user's model,
factory or samples function comes back as `ProbeResult.problem`, one paragraph naming the
file, line or option and the fix.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models.factory import build_model, import_callable
from onnx_parity.models.load_errors import LoadError
from onnx_parity.settings import (
    FLOAT_DTYPES,
    InputRequest,
    ModelSpec,
    NewModel,
    found_source_folders,
)

# The random samples are the same on every machine and every run.
SEED = 0


@dataclass(frozen=True)
class Parameter:
    name: str
    required: bool


@dataclass(frozen=True)
class ProbeResult:
    parameters: tuple[Parameter, ...] = ()
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # input name -> samples
    problem: str | None = None


def probe_model(model: NewModel, repo: Path) -> ProbeResult:
    try:
        module = build_model(_spec(model, repo), repo).module
        parameters = forward_parameters(module)
        arrays = _samples(model, parameters, repo)
        check_against_forward(model, tuple(arrays), parameters)
        return ProbeResult(parameters, arrays)
    except LoadError as error:  # init ends with it as a UserError: the text carries the fix
        text = str(error)
        fix = f"{'' if text.endswith('.') else '.'} Fix: {error.fix}" if error.fix else ""
        return ProbeResult(problem=f"{text}{fix}")


def _spec(model: NewModel, repo: Path) -> ModelSpec:
    weights = (repo / model.weights) if model.weights else None
    return ModelSpec(name=model.name, factory=model.factory, weights=weights, inputs={},
                     outputs=(), dynamic_axes={}, allow_warnings=(),
                     python_path=found_source_folders(repo.resolve(), model.factory))


def forward_parameters(module: Any) -> tuple[Parameter, ...]:
    signature = inspect.signature(module.forward)
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(Parameter(p.name, p.default is inspect.Parameter.empty)
                 for p in signature.parameters.values() if p.kind in kinds)


def check_against_forward(model: NewModel, names: tuple[str, ...],
                          parameters: tuple[Parameter, ...]) -> None:
    """Every input must be a parameter of forward, and every required parameter an input."""
    known = [p.name for p in parameters]
    takes = ", ".join(p.name if p.required else f"{p.name}=..." for p in parameters) or "nothing"
    unknown = [name for name in names if name not in known]
    if unknown:
        raise LoadError(
            f"{model.factory}: forward takes ({takes}); the input(s) {_quoted(unknown)} are not "
            "among its parameters. Fix: name each --input after a parameter of forward"
            f"{_example(parameters)}.")
    missing = [p.name for p in parameters if p.required and p.name not in names]
    if missing:
        raise LoadError(
            f"{model.factory}: forward takes ({takes}); no input is given for the required "
            f"parameter(s) {_quoted(missing)}. Fix: add an --input for each"
            f"{_example(parameters)}.")


def _samples(model: NewModel, parameters: tuple[Parameter, ...],
             repo: Path) -> dict[str, np.ndarray]:
    if model.samples_function is None:
        return random_samples(model.inputs)
    function = import_callable(model.samples_function, repo, "--samples",
                               "a function that returns the inputs")
    try:
        returned = function()
    except (Exception, SystemExit) as error:
        raise LoadError(f'--samples "{model.samples_function}" raised {type(error).__name__}: '
                        f"{error}. Fix: make it run on its own from the repository root.") from None
    arrays = _named(model, returned, parameters)
    _check_shapes(model, arrays)
    return arrays


def random_samples(inputs: tuple[InputRequest, ...]) -> dict[str, np.ndarray]:
    """Seeded values of each input's shape and dtype: standard normal floats, or uniform in
    [low, high) when a range is given; bools half true."""
    rng = np.random.default_rng(SEED)
    arrays: dict[str, np.ndarray] = {}
    for item in inputs:
        assert item.shape is not None  # init_request requires a shape without --samples
        if item.dtype == "bool":
            arrays[item.name] = rng.random(item.shape) < 0.5
        elif item.dtype in FLOAT_DTYPES:
            values = (rng.standard_normal(item.shape) if item.low is None or item.high is None
                      else rng.uniform(item.low, item.high, item.shape))
            arrays[item.name] = values.astype(item.dtype)
        else:
            low, high = int(item.low or 0), int(item.high or 1)
            arrays[item.name] = rng.integers(low, high, item.shape, dtype=item.dtype)
    return arrays


def _named(model: NewModel, returned: object,
           parameters: tuple[Parameter, ...]) -> dict[str, np.ndarray]:
    """A dict by name; a tuple or list in --input order (else forward's); one array alone."""
    source = f'--samples "{model.samples_function}"'
    if isinstance(returned, dict):
        return {str(name): _array(value, f"{source}[{name!r}]") for name, value in returned.items()}
    values = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    names = [item.name for item in model.inputs] or [p.name for p in parameters]
    if len(values) > len(names):
        raise LoadError(f"{source} returned {len(values)} arrays but there are only "
                        f"{len(names)} names for them ({', '.join(names) or 'none'}). Fix: return "
                        "a dict of input name -> array, or give an --input per array.")
    return {name: _array(value, f"{source} item {index}")
            for index, (name, value) in enumerate(zip(names, values, strict=False))}


def _array(value: object, where: str) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch.Tensor
        tensor: Any = value
        if str(tensor.dtype) == "torch.bfloat16":
            raise LoadError(f"{where} is a bfloat16 tensor, which .npy cannot hold. Fix: "
                            "return `tensor.float()`.")
        value = tensor.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype == object or array.ndim == 0:
        raise LoadError(f"{where} is not an array with a samples axis (got {array.dtype}, shape "
                        f"{list(array.shape)}). Fix: return arrays or tensors whose axis 0 counts "
                        "the samples, e.g. `x[None]` for a single one.")
    return array


def _check_shapes(model: NewModel, arrays: dict[str, np.ndarray]) -> None:
    for item in model.inputs:
        array = arrays.get(item.name)
        if array is None:
            raise LoadError(f'--samples "{model.samples_function}" returned no array for '
                            f'--input "{item.name}" (it returned {_quoted(list(arrays))}).')
        if item.shape is not None and tuple(array.shape) != item.shape:
            raise LoadError(f'--samples "{model.samples_function}": "{item.name}" has shape '
                            f"{list(array.shape)}, not the {list(item.shape)} of --input "
                            f"{item.described}. Fix: drop the shape from --input or match it.")


def _example(parameters: tuple[Parameter, ...]) -> str:
    required = [p.name for p in parameters if p.required][:2]
    return f", e.g. --input {required[0]}=1x3x224x224" if required else ""


def _quoted(names: list[str]) -> str:
    return ", ".join(f'"{name}"' for name in names) or "none"
