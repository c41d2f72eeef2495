"""A generating model's failing step in its repro folder (issue 23 §3): the decoder file's whole
feed at that step and PyTorch's outputs there, so the exported file can be rerun at exactly that
step with numpy and onnxruntime alone.

`step_inputs.npz` holds every input the decoder file takes, keyed by its ONNX name, as
onnxruntime was fed it at the step (input_ids, attention_mask, position_ids and every
past_key_values.N.key / .value; an encoder-decoder's encoder_hidden_states and
encoder_attention_mask): the past is onnxruntime's own presents of the step before.
`step_expected.npz` holds PyTorch's outputs at that step (the logits and the presents the check
compares) and `compared`, the positions the check compared (batch, total_sequence). The file is
run on them here once, at the level the check ran it, as repro.py runs it, so the record holds
the figure repro.py prints. The folder stays within `repro-max-mb` (what the subgraph's files
leave of it): past it the arrays are cut to the failing row (the batch is axis 0 of every
array), then left out, saying why. They go beside the subgraph's files when localisation made
some, else into a folder of their own that says why no subgraph is there: a step no node can be
named for is still worth rerunning.
"""

from __future__ import annotations

import dataclasses
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx_parity.findings import Finding
from onnx_parity.generation_results import StepRepro
from onnx_parity.results import OutputComparison, Repro
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.compare import Mask, compare_masked
from onnx_parity.verification.generation.checked import (
    FailingStep,
    compared_positions,
    compared_present,
)
from onnx_parity.verification.localisation.localise import Localised
from onnx_parity.verification.localisation.repro import MB
from onnx_parity.verification.runtime import RuntimeFailure, Session, open_session, run_session

STEP_INPUTS, STEP_EXPECTED, COMPARED = "step_inputs.npz", "step_expected.npz", "compared"
STEP_ONLY = "generation-step"  # results.Repro.found_by of a folder without a subgraph


@dataclass(frozen=True)
class StepCase:
    """What the failing step's files are made of, all of it in the worker's memory."""

    name: str  # the model's: the folder is <name>.repro beside the decoder file
    model: Path  # the decoder file in the work folder
    failing: FailingStep
    threads: int = 0


def step_repro(case: StepCase, spec: ModelSpec, repro: Repro | None, why: str) -> Repro:
    """The repro folder with the failing step's files: beside the subgraph's (`repro`), or in
    a folder of their own whose record says `why` it holds no subgraph (never raises for the
    model: a step onnxruntime cannot run again is a folder that says so)."""
    folder = case.model.with_name(f"{case.name}.repro")
    if repro is None:  # a folder an earlier run left goes
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    step, failing_output = _step(case, spec, folder, int(spec.repro_max_mb * MB) - _size(folder))
    if repro is None:
        repro = _stepless(case, spec, failing_output, why)
        repro = dataclasses.replace(repro, max_abs_diff=step.max_abs_diff,
                                    reproduces=step.reproduces)
    return dataclasses.replace(repro, step=step, size_bytes=_size(folder), folder=str(folder))


def not_localised(findings: list[Finding], localised: Localised | None) -> str:
    """Why a failing step's folder holds no subgraph, for its record and REPORT.md."""
    if localised is None:
        causes = sorted({str(f.details["explained_by"]) for f in findings
                         if "explained_by" in f.details})
        named = ", ".join(f"`{cause}`" for cause in causes) or "another finding"
        return (f"the mismatch is explained by {named} (a value the export baked), so it was "
                "not localised to a node")
    if localised.divergence is not None and localised.divergence.unlocalised:
        return f"no diverging node was named: {localised.divergence.unlocalised}"
    return "no diverging node was named, and bisection over the graph found no place"


def _step(case: StepCase, spec: ModelSpec, folder: Path, budget: int) -> tuple[StepRepro, str]:
    """The step's files written (the batch, else its failing row, else none) and measured;
    with the first output outside the tolerance at that step."""
    failing = case.failing
    size = len(failing.compared)
    base = StepRepro(
        step=failing.step, past_length=failing.past, model=f"{case.name}.onnx",
        optimization=spec.runtime_optimization, batch_size=size,
        rows=tuple(range(failing.first_row, failing.first_row + size)), inputs=(),
        outputs=tuple(failing.expected), max_abs_diff=None, reproduces=False, size_bytes=0)
    try:
        session = open_session(case.model, spec.runtime_optimization, case.threads)
        base = dataclasses.replace(base, inputs=session.input_names)
        batch = slice(None)
        actual = _run(session, _written(case, session, folder, batch))
        figures = _figures(case, spec, actual, batch)
        first = next((row.output for row in figures if not row.passed), "logits")
        step = _measured(base, batch, figures, folder)
        if step.size_bytes > budget and size > 1:
            one = slice(row := _failing_row(case, spec, actual), row + 1)
            feed = _written(case, session, folder, one)
            step = _measured(base, one, _figures(case, spec, _run(session, feed), one), folder)
    except (RuntimeFailure, OSError, ValueError) as error:
        return _left_out(base, folder, "they could not be written and run through the "
                         f"decoder file again: {error}"), "logits"
    if step.size_bytes > budget:
        return _left_out(step, folder, _too_large(step, budget, spec)), first
    return step, first


def _written(case: StepCase, session: Session, folder: Path,
             rows: slice) -> dict[str, np.ndarray]:
    """step_inputs.npz and step_expected.npz for the batch's `rows`; the feed written."""
    failing = case.failing
    feed = {name: np.asarray(failing.feed[name])[rows] for name in session.input_names
            if name in failing.feed}
    expected = {name: value[rows] for name, value in failing.expected.items()}
    np.savez(folder / STEP_INPUTS, allow_pickle=False, **feed)
    np.savez(folder / STEP_EXPECTED, allow_pickle=False, **expected,
             **{COMPARED: failing.compared[rows] != 0})
    return feed


def _run(session: Session, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return dict(zip(session.output_names, run_session(session, feed), strict=True))


def _figures(case: StepCase, spec: ModelSpec, actual: dict[str, np.ndarray],
             rows: slice) -> list[OutputComparison]:
    """The check's rule on the check's positions, for the outputs PyTorch gave at the step
    (`actual`: onnxruntime's outputs for the batch's `rows`)."""
    keep, sequence = case.failing.compared[rows], case.failing.expected["logits"].shape[1]
    return [compare_masked(name, len(keep), (value[rows], got), (spec.atol, spec.rtol), mask)
            for name, value in case.failing.expected.items() if name in actual
            for got, mask in [_positions(name, value[rows], actual[name], (keep, sequence))]]


def _positions(name: str, expected: np.ndarray, actual: np.ndarray,
               where: tuple[np.ndarray, int]) -> tuple[np.ndarray, Mask]:
    """onnxruntime's output and the positions compared there, as the check compares them."""
    keep, sequence = where
    if name == "logits":
        return actual, compared_positions(name, keep, sequence)
    return compared_present(name, expected, actual, keep)


def _failing_row(case: StepCase, spec: ModelSpec, actual: dict[str, np.ndarray]) -> int:
    """The lowest row of the batch with an output outside the tolerance (`actual`: the
    whole batch's outputs)."""
    for row in range(len(case.failing.compared)):
        one = slice(row, row + 1)
        cut = {name: value[one] for name, value in actual.items()}
        if any(not figure.passed for figure in _figures(case, spec, cut, one)):
            return row
    return 0


def _measured(base: StepRepro, rows: slice, figures: list[OutputComparison],
              folder: Path) -> StepRepro:
    largest = max((row.max_abs_diff for row in figures if row.max_abs_diff is not None),
                  default=None)
    return dataclasses.replace(
        base, rows=base.rows[rows], max_abs_diff=largest,
        reproduces=any(not row.passed for row in figures),
        size_bytes=sum((folder / name).stat().st_size for name in (STEP_INPUTS, STEP_EXPECTED)))


def _too_large(step: StepRepro, budget: int, spec: ModelSpec) -> str:
    rows = f"{len(step.rows)} row(s)"
    left = (f", of which the subgraph's files leave {max(budget, 0) / MB:.1f} MB"
            if budget < spec.repro_max_mb * MB else "")
    return (f"the step's inputs and PyTorch's outputs ({step.size_bytes / MB:.1f} MB at {rows}) "
            f"are too large to include: over repro-max-mb = {spec.repro_max_mb:g}{left}")


def _left_out(step: StepRepro, folder: Path, why: str) -> StepRepro:
    for name in (STEP_INPUTS, STEP_EXPECTED):
        (folder / name).unlink(missing_ok=True)
    return dataclasses.replace(step, size_bytes=0, omitted=why)


def _stepless(case: StepCase, spec: ModelSpec, output: str, why: str) -> Repro:
    """The record of a folder that holds the failing step and no subgraph."""
    return Repro(
        value=output, op=None, file=None, line=None, found_by=STEP_ONLY, reference="pytorch",
        optimization=spec.runtime_optimization, batch_size=len(case.failing.compared),
        samples=0, inputs=(), outputs=(), nodes=0, atol=spec.atol, rtol=spec.rtol,
        max_abs_diff=None, reproduces=False, size_bytes=0,
        limit_bytes=int(spec.repro_max_mb * MB), platform=platform.platform(), omitted=why)


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
