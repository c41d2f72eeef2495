"""Match the sample tensors to the parameters of the model's forward, by name."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models.load_errors import LoadError
from onnx_parity.settings.schema import ModelSpec


@dataclass(frozen=True)
class BoundInputs:
    names: tuple[str, ...]  # forward-parameter order
    arrays: dict[str, np.ndarray]  # axis 0 = samples

    @property
    def sample_count(self) -> int:
        return min(len(array) for array in self.arrays.values())


def bind_inputs(module: Any, spec: ModelSpec, named: dict[str, np.ndarray],
                positional: tuple[np.ndarray, ...]) -> BoundInputs:
    parameters = _forward_parameters(module)
    zoo_folder = isinstance(spec.inputs, Path) and spec.inputs.is_dir()
    if zoo_folder:  # test_data_set_N/input_K.pb: K is the parameter's position
        bound = _bind_positional(parameters, positional, spec)
    else:
        bound = _bind_named(parameters, named, spec)
    _check_axes(spec, bound)
    return bound


def _forward_parameters(module: Any) -> list[inspect.Parameter]:
    signature = inspect.signature(module.forward)
    return [
        parameter for parameter in signature.parameters.values()
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    ]


def _bind_named(parameters: list[inspect.Parameter], named: dict[str, np.ndarray],
                spec: ModelSpec) -> BoundInputs:
    known = [parameter.name for parameter in parameters]
    given = _given_names(named, spec)
    unknown = [name for name in given if name not in known]
    if unknown:
        raise LoadError(
            f"model \"{spec.name}\": `inputs` names {_quoted(unknown)}, which "
            f"{type_name(spec)}.forward does not take (its parameters: {_quoted(known)}). "
            "Fix: name each input after a parameter of forward."
        )
    order = _required_prefix(parameters, given, spec)
    return BoundInputs(tuple(order), {name: named[name] for name in order})


def _given_names(named: dict[str, np.ndarray], spec: ModelSpec) -> list[str]:
    if isinstance(spec.inputs, dict):
        return [name for name in spec.inputs if name in named]
    return list(named)


def _required_prefix(parameters: list[inspect.Parameter], given: list[str],
                     spec: ModelSpec) -> list[str]:
    """Parameters passed positionally up to the last one given; gaps must have defaults."""
    last = max((i for i, p in enumerate(parameters) if p.name in given), default=-1)
    order: list[str] = []
    for parameter in parameters[: last + 1]:
        if parameter.name not in given:
            raise LoadError(
                f"model \"{spec.name}\": forward needs input \"{parameter.name}\" before "
                f"{_quoted(given)}, and the configuration gives no sample for it. Fix: add "
                f"`{parameter.name} = \"samples/....npy\"` to `inputs`."
            )
        order.append(parameter.name)
    missing = [p.name for p in parameters[last + 1:] if p.default is inspect.Parameter.empty]
    if missing:
        raise LoadError(
            f"model \"{spec.name}\": forward needs input(s) {_quoted(missing)}, which the "
            "configuration does not give. Fix: add a sample file for each to `inputs`."
        )
    return order


def _bind_positional(parameters: list[inspect.Parameter], arrays: tuple[np.ndarray, ...],
                     spec: ModelSpec) -> BoundInputs:
    if len(arrays) > len(parameters):
        raise LoadError(
            f"model \"{spec.name}\": the sample folder holds {len(arrays)} inputs per data set "
            f"but forward takes {len(parameters)}. Fix: keep input_0.pb ... input_"
            f"{len(parameters) - 1}.pb in parameter order."
        )
    names = tuple(parameter.name for parameter in parameters[: len(arrays)])
    required = [p.name for p in parameters[len(arrays):] if p.default is inspect.Parameter.empty]
    if required:
        raise LoadError(
            f"model \"{spec.name}\": forward needs {_quoted(required)} too, but the sample "
            "folder has no input file for them. Fix: add input_K.pb files in parameter order."
        )
    return BoundInputs(names, dict(zip(names, arrays, strict=True)))


def _check_axes(spec: ModelSpec, bound: BoundInputs) -> None:
    for name, axes in spec.dynamic_axes.items():
        array = bound.arrays.get(name)
        if array is None:
            continue
        beyond = [axis for axis in axes if axis >= array.ndim]
        if beyond:
            raise LoadError(
                f"model \"{spec.name}\": `dynamic-axes` declares axis {beyond[0]} of input "
                f"\"{name}\", but its samples have rank {array.ndim} (shape {list(array.shape)}, "
                f"axis 0 = samples). Fix: number axes from 0 up to {array.ndim - 1}."
            )


def type_name(spec: ModelSpec) -> str:
    return spec.factory.partition(":")[2] or spec.factory


def _quoted(names: list[str]) -> str:
    return ", ".join(f'"{name}"' for name in names) or "none"
