"""Which compared value introduces the drift: the rule, on the graph alone.

A value diverges when it is outside the model's tolerance. It *introduces* the drift when every
value it is computed from is inside: the graph's inputs and initializers count as exact, and a
value that was not compared (folded, renamed, or inside a module) is looked through to the
compared values it is computed from. The first such value in graph order is where the numbers
start to differ; the values after it only inherit the drift.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onnx_parity.verification.onnx_values import Graph


@dataclass(frozen=True)
class Verdict:
    """What the comparison said of one value."""

    inside: bool
    max_abs_diff: float | None


@dataclass(frozen=True)
class FirstDivergence:
    value: str
    inputs_max_abs_diff: float  # the most any of its compared inputs differs (0: exact inputs)


def feeders(graph: Graph, compared: Iterable[str]) -> dict[str, frozenset[str]]:
    """For each compared value, the nearest compared values it is computed from."""
    wanted = set(compared)
    upstream: dict[str, frozenset[str]] = {}  # value -> nearest compared values feeding it
    found: dict[str, frozenset[str]] = {}
    for node in graph.nodes:  # topological order: every input is known before its consumers
        sources: set[str] = set()
        for value in node.inputs:
            if value in wanted:
                sources.add(value)
            else:
                sources |= upstream.get(value, frozenset())
        frozen = frozenset(sources)
        for value in node.outputs:
            upstream[value] = frozenset({value}) if value in wanted else frozen
            if value in wanted:
                found[value] = frozen
    return found


def first_divergence(order: list[str], verdicts: dict[str, Verdict],
                     sources: dict[str, frozenset[str]]) -> FirstDivergence | None:
    """The first value in `order` outside tolerance whose compared inputs are all inside."""
    for value in order:
        verdict = verdicts[value]
        inputs = sources.get(value, frozenset())
        if verdict.inside or not all(verdicts[source].inside for source in inputs):
            continue
        diffs = [verdicts[source].max_abs_diff or 0.0 for source in inputs]
        return FirstDivergence(value, max(diffs, default=0.0))
    return None
