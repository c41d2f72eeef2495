"""What a run of the user's model may leave behind: one rule for every run the tool makes.

The tool runs the model many times, in an order of its choosing: the reference at every batch
size and length, the exporters' traces, the far sides, localisation's rerun, decoding steps.
A deployment runs it too, and finds it after its first call as that call left it. Models
change themselves on a call, in two ways that both matter:

- on their *first* call, for good: transformers 5 installs output-capturing forward hooks on
  submodules (in their `_forward_hooks` dicts) and sets `_output_capturing_hooks_installed` on
  the top model; a rotary embedding or a user's module builds a table it keeps;
- on a *later* call, for that input: transformers' Swin sets a layer's `window_size` to the
  input's resolution when that is smaller than its window (`set_shift_and_window_size`), which
  would make every later run depend on the lengths run before it.

The rule: the first eager run of each submodule that succeeds *settles* it: what that run built
is kept (attributes added or replaced, entries added to its dicts, lists and sets, hooks among
them), as a deployment keeps it. Every later run, eager or traced, leaves each settled
submodule as it settled: attributes, parameters, buffers, child modules and hooks name the
objects they named then, and a container attribute holds the entries it held then. A trace
(an exporter's run on fake or symbolic tensors) never settles anything: it leaves a submodule
that has not settled yet as it was before the trace. A tensor changed in place stays changed,
as it would in deployment. The first eager run is the reference at the committed samples
(export/export_batch.py runs it before anything else), so the model settles at the size its
samples have, never at a length the tool chose.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# dicts, lists and sets whose entries a call adds in place (hooks, child modules, parameters,
# buffers, a user's lazily filled cache): restored entry by entry, the objects kept
_CONTAINERS = (dict, list, set)


@dataclass(frozen=True)
class PartState:
    """One submodule's own state: its attributes, and the entries of its container attributes."""

    attributes: dict[str, Any]
    entries: dict[str, Any]  # attribute name -> a shallow copy of that container's entries


# Each submodule's settled state (kept weakly: a model the worker drops is not held alive here).
_SETTLED: weakref.WeakKeyDictionary[Any, PartState] = weakref.WeakKeyDictionary()


def part_state(part: Any) -> PartState:
    attributes = dict(vars(part))
    entries = {name: _copied(value) for name, value in attributes.items()
               if isinstance(value, _CONTAINERS)}
    return PartState(attributes, entries)


def restore(part: Any, state: PartState) -> None:
    """`part` as `state` saw it: the same attribute objects, each container's same entries."""
    own = vars(part)
    for name in [name for name in own if name not in state.attributes]:
        del own[name]  # an attribute the run added
    own.update(state.attributes)
    for name, entries in state.entries.items():
        _refill(own[name], entries)


def settled(part: Any) -> bool:
    return part in _SETTLED


@contextlib.contextmanager
def one_run(module: Any, *, eager: bool = True) -> Iterator[None]:
    """Run the block as one run of `module` under the rule above; `eager=False` for a trace."""
    parts = list(module.modules()) if hasattr(module, "modules") else []
    before = {id(part): _SETTLED.get(part) or part_state(part) for part in parts}
    succeeded = False
    try:
        yield
        succeeded = True
    finally:
        for part in parts:
            if succeeded and eager and not settled(part):
                _SETTLED[part] = part_state(part)  # what its first call built stays
            else:
                restore(part, before[id(part)])


def _copied(container: Any) -> Any:
    if isinstance(container, dict):
        return dict(container)
    return list(container) if isinstance(container, list) else set(container)


def _refill(container: Any, entries: Any) -> None:
    """Put back `entries`, only where the run changed them: a container that refuses changes
    (diffusers' FrozenDict config) was left alone by the run too."""
    if _same_entries(container, entries):
        return
    if isinstance(container, list):
        container[:] = entries
    else:  # a dict or a set
        container.clear()
        container.update(entries)


def _same_entries(container: Any, entries: Any) -> bool:
    if isinstance(container, dict):
        return container.keys() == entries.keys() and all(
            container[name] is value for name, value in entries.items())
    if isinstance(container, list):
        return len(container) == len(entries) and all(
            now is then for now, then in zip(container, entries, strict=True))
    return bool(container == entries)
