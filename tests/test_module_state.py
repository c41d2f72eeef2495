"""One rule for what a run of the user's model leaves behind (models/module_state.py): the first
eager run settles each submodule, keeping what it built; every later run, eager or traced, leaves
it as it settled; a trace never settles it. Through run_reference and real modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fixture_repo.models.lengths import tiny_segformer, tiny_swin
from onnx_parity.models import ReferenceFailure, one_run, run_reference


class HooksItselfOnce(nn.Module):
    """Like transformers 5: the first forward registers a capturing hook on a child and sets a
    flag; every forward reads what the hooks captured, and fails if a state came twice."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.captured: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not getattr(self, "_hooked", False):
            self.inner.register_forward_hook(lambda _m, _i, out: self.captured.append(out))
            self._hooked = True
        self.captured.clear()
        y = self.inner(x)
        if len(self.captured) != 1:
            raise RuntimeError(f"captured {len(self.captured)} states, expected 1")
        return y + self.captured[0]


class GrowsATable(nn.Module):
    """A table built lazily at the first call's length and rebuilt longer when a call needs it
    (as a rotary embedding's cache grows); the output reads the table's own length."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        table = getattr(self, "table", None)
        if table is None or table.shape[0] < length:
            self.table = torch.arange(float(length))
        return x * self.table[:length] + self.table.shape[0]


def _fail_after_a_call(module: nn.Module) -> None:
    with one_run(module):
        module(torch.ones(1, 3))
        raise RuntimeError("the model failed after building its table")


def _run(module: nn.Module, x: np.ndarray) -> np.ndarray:
    return run_reference(module, ((torch.from_numpy(x),), {})).arrays[0]


def test_a_module_that_hooks_itself_on_its_first_call_runs_identically_every_time() -> None:
    torch.manual_seed(0)
    module = HooksItselfOnce()
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    first, second, third = (_run(module, x) for _ in range(3))
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, third)
    assert module._hooked  # what the first call built is kept, as a deployment keeps it
    assert len(module.inner._forward_hooks) == 1


def test_a_module_that_grows_a_table_runs_identically_after_a_longer_call() -> None:
    module = GrowsATable()
    short = np.ones((1, 4), dtype=np.float32)
    first = _run(module, short)
    assert module.table.shape[0] == 4  # built by the first call, kept
    longer = _run(module, np.ones((1, 6), dtype=np.float32))
    assert longer[0, -1] == 5 + 6  # that call grew its table for itself
    assert module.table.shape[0] == 4  # and left the module as the first call settled it
    np.testing.assert_array_equal(_run(module, short), first)


def test_a_trace_never_settles_the_model_and_leaves_it_as_it_was() -> None:
    module = GrowsATable()
    with one_run(module, eager=False):
        module(torch.ones(1, 3))  # an exporter's trace before any eager run
    assert not hasattr(module, "table")
    _run(module, np.ones((1, 4), dtype=np.float32))
    with one_run(module, eager=False):
        module(torch.ones(1, 9))
    assert module.table.shape[0] == 4


def test_a_failing_first_call_settles_nothing() -> None:
    module = GrowsATable()
    with pytest.raises(RuntimeError, match="after building"):
        _fail_after_a_call(module)
    assert not hasattr(module, "table")


def test_a_container_that_refuses_changes_is_left_alone() -> None:
    """diffusers' models keep their config in a FrozenDict, whose update and clear raise."""
    from diffusers.configuration_utils import FrozenDict

    module = GrowsATable()
    vars(module)["config"] = FrozenDict(width=4)  # a plain attribute, as diffusers sets it
    for _ in range(2):
        _run(module, np.ones((1, 4), dtype=np.float32))
    assert module.config == {"width": 4}


def test_a_segformer_runs_at_batch_1_then_2_then_1() -> None:
    module = tiny_segformer()
    pixels = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    first = _run(module, pixels[:1])
    assert _run(module, pixels).shape[0] == 2  # captured twice, this failed (issue 27)
    np.testing.assert_allclose(_run(module, pixels[:1]), first, rtol=0, atol=1e-6)
    assert any(vars(part).get("_output_capturing_hooks_installed") for part in module.modules())


def test_a_swin_whose_window_shrinks_at_a_small_size_runs_its_full_size_again() -> None:
    """In a plain loop this Swin cannot run 64 again after a run at 16; the tool's runs can."""
    torch.manual_seed(0)
    module = tiny_swin().eval()
    images = np.random.default_rng(1).standard_normal((1, 3, 64, 64)).astype(np.float32)
    first = _run(module, images)
    windows = [layer.window_size for layer in module.modules() if hasattr(layer, "window_size")
               and isinstance(layer.window_size, int)]
    with pytest.raises(ReferenceFailure):  # smaller than a window: a layer shrinks its
        _run(module, images[:, :, :16, :16])  # window for good, and PyTorch fails
    assert [layer.window_size for layer in module.modules() if hasattr(layer, "window_size")
            and isinstance(layer.window_size, int)] == windows
    np.testing.assert_allclose(_run(module, images), first, rtol=0, atol=1e-6)
