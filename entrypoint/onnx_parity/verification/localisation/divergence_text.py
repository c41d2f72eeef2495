"""The one sentence that says where a failing model's numbers start to differ.

Built from the typed `Divergence` alone (no dict, no numpy), so the two places that say it read
the same facts: the localised parity finding's message (localise.py) and the console's line
under the verdict table (report/console_text.py). And why a TorchScript graph is not
localised to a line (`dynamo_hint`): dynamo is named as the way only when it exports the model.
"""

from __future__ import annotations

from onnx_parity.results import Divergence, ExportAttempt, NodeCheck


def first_sentence(divergence: Divergence, first: NodeCheck) -> str:
    """'Diverges first at `models/net.py:42` in `encoder.layer.3.attn` (`aten.softmax`): max abs
    diff 2.1e-03 where its inputs differ by at most 3.0e-07'."""
    where = f"`{first.file}:{first.line}`" if first.file else f"node `{first.node}`"
    within = f" in `{first.module}`" if first.module else ""
    op = (first.op or "").removesuffix(".default")
    inputs = divergence.inputs_max_abs_diff or 0.0  # 0: the graph's inputs, exact
    return (f"Diverges first at {where}{within} (`{op}`): max abs diff "
            f"{_e(first.max_abs_diff)} where its inputs differ by at most {_e(inputs)} "
            f"({len(divergence.nodes)} values compared, graph optimizations "
            f"{divergence.optimization})")


def _e(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2e}"


NEEDS_DYNAMO = ("localising a mismatch to a line needs the dynamo exporter (`exporter = "
                '"dynamo"`), whose graph records where each node comes from')
NO_LINES = "a TorchScript graph records no source line for its nodes"


def dynamo_hint(attempts: tuple[ExportAttempt, ...]) -> str:
    """Why a TorchScript graph is not localised to a line; dynamo is named as the way only when
    it exported this model."""
    dynamo = next((a for a in attempts if a.exporter == "dynamo"), None)
    if dynamo is not None and dynamo.succeeded:
        return NEEDS_DYNAMO
    if dynamo is not None:
        return (f"{NO_LINES}, and the dynamo exporter, whose graph records them, failed for this "
                f"model ({dynamo.message})")
    return (f"{NO_LINES}; the dynamo exporter records them, but `exporter` did not list it for "
            "this model, so whether it exports the model is not known")
