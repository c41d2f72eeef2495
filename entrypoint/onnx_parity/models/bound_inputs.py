"""The samples bound to forward: the ONNX input names, their arrays and how each reaches forward.

Built by binding.py (by name, keyword or position), its call structure added by
call_arguments.py (dotted names, caches, `forward-kwargs`); read by every module that calls the
model. A module of its own so that both build it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_parity.findings import Finding
from onnx_parity.models.contract import CallContract


@dataclass(frozen=True)
class BoundInputs:
    names: tuple[str, ...]  # the ONNX input names, in the order the exporters see them
    arrays: dict[str, np.ndarray]  # by input name, axis 0 = samples
    # forward's parameter each name binds to (same order); empty: the names themselves
    parameters: tuple[str, ...] = ()
    keyword: tuple[str, ...] = ()  # the names passed by keyword (they follow the positional)
    positional_note: str | None = None  # set when the names were bound by position
    # forward's scalar defaults of parameters the configuration leaves out: the TorchScript
    # exporter can turn one into a graph input (GPT-2's `logits_to_keep=0`), fed its default.
    defaults: dict[str, int | float | bool] = field(default_factory=dict)
    # where each deployed tensor holds its batch, and what its declared axes carry
    contract: CallContract = field(default_factory=CallContract)
    # forward's parameters given by dotted names, built into a dict or a cache on each call
    # (models/call_arguments.py); `parameters` then names each input's parameter.
    nested: tuple[str, ...] = ()
    constants: dict[str, bool | int | float | str] = field(default_factory=dict)  # forward-kwargs
    model_config: Any = None  # the model's `config`, which a transformers cache is built with

    @property
    def sample_count(self) -> int:
        return min(len(array) for array in self.arrays.values())

    def parameter(self, name: str) -> str:
        return self.parameters[self.names.index(name)] if self.parameters else name

    def findings(self) -> list[Finding]:
        if self.positional_note is None:
            return []
        return [Finding("positional-binding", self.positional_note)]
