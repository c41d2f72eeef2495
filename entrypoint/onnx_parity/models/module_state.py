"""Every PyTorch run leaves the model as it found it.

Some models change their own Python state when they meet a new input size: transformers' Swin
sets a layer's `window_size` to the input's resolution when that is smaller than its window
(`set_shift_and_window_size`), for good; a rotary embedding may grow a cached table. The
reference runs the model at many batch sizes and lengths, in an order of the tool's choosing,
so such a change would make one run depend on the ones before it: after a run at length 1 the
Swin cannot run its other lengths at all. Each run therefore restores every submodule's
attributes, parameters and buffers as they were (which objects they name; a tensor changed in
place stays changed, as it would in deployment).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

_OWNED = ("_parameters", "_buffers")  # dicts the module changes by assignment


@contextlib.contextmanager
def left_as_found(module: Any) -> Iterator[None]:
    """Run the block; then each submodule's `__dict__` names the objects it named before."""
    modules = list(module.modules()) if hasattr(module, "modules") else []
    saved = [(part, dict(vars(part)), {name: dict(vars(part)[name]) for name in _OWNED
                                        if name in vars(part)}) for part in modules]
    try:
        yield
    finally:
        for part, attributes, owned in saved:
            state = vars(part)
            for name in [name for name in state if name not in attributes]:
                del state[name]  # an attribute the run added (a lazily built cache)
            state.update(attributes)
            for name, entries in owned.items():
                state[name].clear()
                state[name].update(entries)
