"""One cut of the samples through PyTorch and onnxruntime, compared output by output.

The caller decides what a failure means (a runtime error at the export batch, a frozen
dimension at another size, a shape PyTorch itself cannot run); this module only runs and keeps
what each side said, with the inputs, so a failing cut can be run again (at another graph
optimization level, or node by node to localise it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_parity.detection_results import DetectionImage
from onnx_parity.models import (
    BoundInputs,
    Reference,
    ReferenceFailure,
    as_call,
    input_shapes,
    run_reference,
)
from onnx_parity.results import OutputComparison
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.compare import as_exported, compare_masked, nonfinite_mismatch
from onnx_parity.verification.detections.images import detection_outputs
from onnx_parity.verification.detections.judged import RunPlace, judge_run
from onnx_parity.verification.outputs import Relaid, output_masks, output_names
from onnx_parity.verification.runtime import RuntimeFailure, Session, run_session


@dataclass(frozen=True)
class Cut:
    """What one run is made of: the inputs, the batch size and the other dimensions' sizes."""

    feed: dict[str, np.ndarray]
    size: int
    dimensions: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CutRun:
    cut: Cut
    reference: Reference | None = None
    rows: tuple[OutputComparison, ...] = ()
    reference_error: ReferenceFailure | None = None
    runtime_error: RuntimeFailure | None = None
    onnx_count: int = 0
    nonfinite: frozenset[str] = frozenset()
    # PyTorch's values as compared (a complex or number output in the exporter's layout).
    compared: tuple[np.ndarray, ...] = ()
    relaid: tuple[Relaid, ...] = ()  # the outputs so laid out
    # A detector's images judged as detections (`[model.detections]`), or why its outputs
    # could not be read as declared.
    detections: tuple[DetectionImage, ...] = ()
    detection_error: str | None = None

    @property
    def failed(self) -> bool:
        return any(not row.passed for row in self.rows)


def run_cut(module: Any, session: Session, bound: BoundInputs, spec: ModelSpec,
            cut: Cut) -> CutRun:
    """The cut through both runtimes; a side that could not run leaves its error instead."""
    try:
        reference = run_reference(module, as_call(cut.feed, bound))
    except ReferenceFailure as error:
        return CutRun(cut, reference_error=error)
    return compare_cut(session, bound, spec, cut, reference)


def compare_cut(session: Session, bound: BoundInputs, spec: ModelSpec, cut: Cut,
                reference: Reference) -> CutRun:
    """onnxruntime on the cut, compared with PyTorch's outputs already computed for it."""
    try:
        actual = run_session(session, ort_feed(session.input_names, bound, cut.feed))
    except RuntimeFailure as error:
        return CutRun(cut, reference, runtime_error=error)
    names = output_names(spec, reference, session.output_names)
    outputs = list(zip(names, session.output_names, reference.kinds, reference.arrays, actual,
                       strict=False))
    laid = [as_exported(kind, ref, out) for _, _, kind, ref, out in outputs]
    compared = tuple(ref if new is None else new
                     for (_, _, _, ref, _), new in zip(outputs, laid, strict=True))
    pairs = [(name, ref, out) for (name, *_, out), ref in zip(outputs, compared, strict=True)]
    judged = _detections(pairs, spec, cut)
    if spec.detections is not None:  # those outputs are judged as detections, not by position
        pairs = [pair for pair in pairs if pair[0] not in detection_outputs(spec.detections)]
    shapes, masks = input_shapes(cut.feed), output_masks(spec, cut.feed)
    rows = tuple(
        dataclasses.replace(compare_masked(name, cut.size, (ref, out), (spec.atol, spec.rtol),
                                           masks.get(name)),
                            input_shapes=shapes, dimensions=dict(cut.dimensions))
        for name, ref, out in pairs
    )
    nonfinite = frozenset(name for name, ref, out in pairs
                          if nonfinite_mismatch(ref, out, masks.get(name)))
    relaid = tuple(Relaid(name, onnx_name, kind, ref.dtype.name, out.dtype.name)
                   for (name, onnx_name, kind, ref, out), new in zip(outputs, laid, strict=True)
                   if new is not None)
    return CutRun(cut, reference, rows, onnx_count=len(actual), nonfinite=nonfinite,
                  compared=compared, relaid=relaid, detections=judged[0],
                  detection_error=judged[1])


def _detections(pairs: list[tuple[str, np.ndarray, np.ndarray]], spec: ModelSpec,
                cut: Cut) -> tuple[tuple[DetectionImage, ...], str | None]:
    """A detector's images judged (none for another model), or why they could not be."""
    if spec.detections is None:
        return (), None
    shape = next((tuple(int(n) for n in value.shape[1:]) for value in cut.feed.values()), ())
    place = RunPlace(cut.size, dict(cut.dimensions), shape)
    try:
        return judge_run({name: ref for name, ref, _ in pairs},
                         {name: out for name, _, out in pairs}, spec, place), None
    except ValueError as error:
        return (), str(error)


def ort_feed(input_names: tuple[str, ...], bound: BoundInputs,
             feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The feed by the graph's input names; positionally when the graph renamed them; a
    parameter the configuration leaves out gets forward's default."""
    defaults = {name: np.asarray(value, np.float32 if isinstance(value, float) else None)
                for name, value in bound.defaults.items()
                if name in input_names and name not in feed}
    names = [name for name in input_names if name not in defaults]
    if set(names) == set(bound.names):
        return {**{name: feed[name] for name in names}, **defaults}
    return {**{ort: feed[ours] for ort, ours in zip(names, bound.names, strict=False)},
            **defaults}
