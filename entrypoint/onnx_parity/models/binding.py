"""Match the sample tensors to the parameters of the model's forward, as torch.onnx.export does.

The names in `inputs` are the ONNX graph's input names (what a deployment feeds). They bind by
name when every one is a parameter of forward; when none is, and there are exactly as many as
forward's required positional parameters, they bind by position in the order given (with a
note). Given parameters after a gap (a parameter left to its default) go by keyword, as
`torch.onnx.export(..., kwargs=...)` passes them: GPT-2's `attention_mask` sits behind
`past_key_values=None`.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.models.bound_inputs import BoundInputs
from onnx_parity.models.call_arguments import check_dotted, parameter_of, with_call_structure
from onnx_parity.models.contract import CallContract, contract_for
from onnx_parity.models.load_errors import LoadError
from onnx_parity.models.samples.model_zoo import GoldenCase
from onnx_parity.settings import ModelSpec

POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
NAMED = (*POSITIONAL, inspect.Parameter.KEYWORD_ONLY)


def bind_inputs(module: Any, spec: ModelSpec, named: dict[str, np.ndarray],
                positional: tuple[np.ndarray, ...],
                zoo: tuple[GoldenCase, ...] = ()) -> BoundInputs:
    """`zoo`: a Model Zoo folder's datasets, whose tensors are deployed ones (each input's
    samples are laid out again from them when its batch is not on axis 0)."""
    parameters = _forward_parameters(module)
    zoo_folder = isinstance(spec.inputs, Path) and spec.inputs.is_dir()
    if zoo_folder:  # test_data_set_N/input_K.pb: K is the parameter's position
        bound = _bind_zoo(parameters, positional, spec)
    else:
        bound = _bind_given(parameters, named, spec, getattr(module, "config", None))
    contract = contract_for(spec)
    bound = dataclasses.replace(bound, contract=contract,
                                arrays=_from_deployed(bound, contract, zoo) if zoo_folder
                                else bound.arrays)
    _check_axes(spec, bound)
    return with_call_structure(module, spec, bound)


def _forward_parameters(module: Any) -> list[inspect.Parameter]:
    signature = inspect.signature(module.forward)
    return [parameter for parameter in signature.parameters.values() if parameter.kind in NAMED]


def _bind_given(parameters: list[inspect.Parameter], named: dict[str, np.ndarray],
                spec: ModelSpec, config: Any) -> BoundInputs:
    known = [parameter.name for parameter in parameters]
    given = _given_names(named, spec)
    matching = [name for name in given if parameter_of(name) in known]
    unknown = [name for name in given if parameter_of(name) not in known]
    if not unknown:
        return _bind_by_name(parameters, given, named, (spec, config))
    if not matching:
        return _bind_by_position(parameters, given, named, spec)
    raise LoadError(
        f"model \"{spec.name}\": `inputs` names {_quoted(unknown)}, which "
        f"{type_name(spec)}.forward does not take ({_quoted(_firsts(unknown))} is none of its "
        f"parameters), beside {_quoted(matching)}, which it does (its parameters: "
        f"{_quoted(known)}).",
        fix="Name each input after a parameter of forward, or name none of them after one and "
            "list them in forward's order to bind them by position.",
    )


def _given_names(named: dict[str, np.ndarray], spec: ModelSpec) -> list[str]:
    if isinstance(spec.inputs, dict):
        return [name for name in spec.inputs if name in named]
    return list(named)


def _bind_by_name(parameters: list[inspect.Parameter], given: list[str],
                  named: dict[str, np.ndarray], model: tuple[ModelSpec, Any]) -> BoundInputs:
    """Leading given parameters positionally, the ones after a gap by keyword; a parameter
    given by dotted names (`added_cond_kwargs.text_embeds`) counts as given. `model`: the spec
    and the module's config (a hybrid model's cache has keys in its attention layers only)."""
    spec, config = model
    nested = check_dotted(given, spec.name, config)
    constant = set(spec.forward_kwargs)
    given_names, given = given, list(dict.fromkeys(parameter_of(name) for name in given))
    missing = [p.name for p in parameters if p.default is inspect.Parameter.empty
               and p.name not in given and p.name not in constant]
    if missing:
        raise LoadError(
            f"model \"{spec.name}\": forward needs input(s) {_quoted(missing)}, which the "
            "configuration does not give.",
            fix="Add a sample file for each to `inputs`.",
        )
    order = [p for p in parameters if p.name in given]
    gap = next((i for i, p in enumerate(parameters) if p.name not in given), len(parameters))
    keyword = tuple(p.name for p in parameters[gap:] if p.name in given)
    _check_keywords(parameters[gap:], keyword, spec)
    names = tuple(name for p in order for name in given_names if parameter_of(name) == p.name)
    return BoundInputs(names, {name: named[name] for name in names},
                       parameters=tuple(map(parameter_of, names)) if nested else (),
                       keyword=tuple(name for name in names if parameter_of(name) in keyword),
                       defaults=_scalar_defaults(parameters, (*given, *constant)),
                       nested=nested)


def _scalar_defaults(parameters: list[inspect.Parameter],
                     given: tuple[str, ...]) -> dict[str, int | float | bool]:
    return {p.name: p.default for p in parameters
            if p.name not in given and isinstance(p.default, (int, float, bool))}


def _check_keywords(after_gap: list[inspect.Parameter], keyword: tuple[str, ...],
                    spec: ModelSpec) -> None:
    only = [p.name for p in after_gap
            if p.name in keyword and p.kind == inspect.Parameter.POSITIONAL_ONLY]
    if only:
        raise LoadError(
            f"model \"{spec.name}\": forward takes {_quoted(only)} by position only, after a "
            "parameter the configuration leaves out.",
            fix=f"Give a sample for every parameter before {_quoted(only)}.",
        )


def _bind_by_position(parameters: list[inspect.Parameter], given: list[str],
                      named: dict[str, np.ndarray], spec: ModelSpec) -> BoundInputs:
    required = [p.name for p in parameters
                if p.kind in POSITIONAL and p.default is inspect.Parameter.empty]
    known = [parameter.name for parameter in parameters]
    if len(given) != len(required) or not required:
        raise LoadError(
            f"model \"{spec.name}\": `inputs` names {_quoted(given)}, which "
            f"{type_name(spec)}.forward does not take (its parameters: {_quoted(known)}), and "
            f"they cannot bind by position: forward has {len(required)} required positional "
            f"parameter(s) ({_quoted(required)}), the configuration gives {len(given)}.",
            fix="Name each input after a parameter of forward, or give one sample per required "
                "parameter, in forward's order.",
        )
    pairs = ", ".join(f'"{name}" -> {parameter}' for name, parameter in zip(given, required,
                                                                         strict=True))
    note = (f"`inputs` names {_quoted(given)}, which are not parameters of "
            f"{type_name(spec)}.forward; bound by position in the order the configuration "
            f"lists them ({pairs}). The ONNX inputs keep the configured names.")
    return BoundInputs(tuple(given), {name: named[name] for name in given},
                       parameters=tuple(required), positional_note=note)


def _bind_zoo(parameters: list[inspect.Parameter], arrays: tuple[np.ndarray, ...],
              spec: ModelSpec) -> BoundInputs:
    positional = [p for p in parameters if p.kind in POSITIONAL]
    if len(arrays) > len(positional):
        raise LoadError(
            f"model \"{spec.name}\": the sample folder holds {len(arrays)} inputs per data set "
            f"but forward takes {len(positional)}.",
            fix=f"Keep input_0.pb ... input_{len(positional) - 1}.pb in parameter order.",
        )
    names = tuple(parameter.name for parameter in positional[: len(arrays)])
    required = [p.name for p in parameters if p.name not in names
                and p.default is inspect.Parameter.empty]
    if required:
        raise LoadError(
            f"model \"{spec.name}\": forward needs {_quoted(required)} too, but the sample "
            "folder has no input file for them.",
            fix="Add input_K.pb files in parameter order.",
        )
    return BoundInputs(names, dict(zip(names, arrays, strict=True)))


def _from_deployed(bound: BoundInputs, contract: CallContract,
                   zoo: tuple[GoldenCase, ...]) -> dict[str, np.ndarray]:
    """A Model Zoo input joined from its datasets at its batch axis (or one sample per dataset,
    for an input without a batch) rather than at axis 0."""
    arrays = dict(bound.arrays)
    for k, name in enumerate(bound.names):
        if contract.batch_axis(name) != 0 and zoo:
            arrays[name] = contract.samples_of([case.inputs[k] for case in zoo], name)
    return arrays


def _check_axes(spec: ModelSpec, bound: BoundInputs) -> None:
    """Every declared axis (and batch axis) exists in the deployed tensor the samples give, and
    every derived axis holds the length its expression gives."""
    contract = bound.contract
    for name, array in bound.arrays.items():
        rank = contract.deployed_rank(name, array.ndim)
        batch = contract.batch_axis(name)
        axes = [*spec.dynamic_axes.get(name, {}), *([batch] if batch is not None else [])]
        beyond = [axis for axis in axes if axis >= rank]
        if beyond:
            raise LoadError(
                f"model \"{spec.name}\": {_declared_by(spec, name, beyond[0])} axis {beyond[0]} "
                f"of input \"{name}\", but its samples have rank {array.ndim} (shape "
                f"{list(array.shape)}, axis 0 = samples{_batch_note(batch)}).",
                fix=f"Number axes from 0 up to {rank - 1} (the deployed tensor's).",
            )
    for wrong in contract.contradictions(bound.arrays):
        raise LoadError(
            f'model "{spec.name}": input "{wrong.name}" axis {wrong.axis} is declared '
            f'"{wrong.linear}", so at {wrong.linear.root} {wrong.root_length} (the committed '
            f"samples) it must be {wrong.linear.length(wrong.root_length)} long, but its samples "
            f"hold {wrong.found}.",
            fix=f'Commit samples whose "{wrong.name}" axis {wrong.axis} is {wrong.linear} long, '
                "or declare the expression the model really follows.")


def _declared_by(spec: ModelSpec, name: str, axis: int) -> str:
    key = "`dynamic-axes`" if axis in spec.dynamic_axes.get(name, {}) else "`batch-axis`"
    return f"{key} declares"


def _batch_note(batch: int | None) -> str:
    if batch is None:
        return ', the rest one deployed value: batch-axis "none"'
    return "" if batch == 0 else f", stacked at the deployed axis {batch}"


def _firsts(names: list[str]) -> list[str]:
    return list(dict.fromkeys(parameter_of(name) for name in names))


def type_name(spec: ModelSpec) -> str:
    reference = spec.factory or spec.name  # a `transformers` folder has no factory
    return reference.partition(":")[2] or reference


def _quoted(names: list[str] | tuple[str, ...]) -> str:
    return ", ".join(f'"{name}"' for name in names) or "none"
