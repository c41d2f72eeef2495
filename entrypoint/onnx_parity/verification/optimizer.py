"""Drift that onnxruntime's graph optimizer introduces: the `optimizer-drift` finding.

A model that fails parity at a level above "disabled" is run again, on the cuts that failed,
with graph optimizations disabled (and at each level in between). When its outputs match there,
the drift comes from onnxruntime's rewrites (fusions, layout changes), not from the export, and
the fix is a session option in the deployment, not a change to the model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onnx_parity.findings import Finding
from onnx_parity.model_files import ModelFile
from onnx_parity.models import BoundInputs
from onnx_parity.results import OutputComparison
from onnx_parity.settings import OPTIMIZATION_LEVELS, ModelSpec
from onnx_parity.verification.cuts import CutRun, compare_cut
from onnx_parity.verification.runtime import GRAPH_LEVELS, RuntimeFailure, open_session


@dataclass(frozen=True)
class OptimizerCheck:
    findings: tuple[Finding, ...] = ()
    drifted: frozenset[str] = frozenset()  # outputs whose mismatch the optimizer alone causes


def optimizer_check(model: ModelFile, failed: list[CutRun], bound: BoundInputs,
                    spec: ModelSpec) -> OptimizerCheck:
    configured = spec.runtime_optimization
    if configured == "disabled" or not failed:
        return OptimizerCheck()
    lower = OPTIMIZATION_LEVELS[: OPTIMIZATION_LEVELS.index(configured)]
    rows_at = {level: _rerun(model, failed, bound, spec, level) for level in lower}
    disabled = rows_at["disabled"]
    if disabled is None:
        return OptimizerCheck()
    failing = [row for run in failed for row in run.rows if not row.passed]
    drifted = frozenset(row.output for row in failing
                        if all(r.passed for r in disabled if r.output == row.output))
    if not drifted:
        return OptimizerCheck()
    best = next(level for level in reversed(lower)
                if _passes(rows_at[level], drifted))
    findings = tuple(_drift_finding(output, failing, disabled, configured, best, spec)
                     for output in sorted(drifted))
    return OptimizerCheck(findings, drifted)


def _rerun(model: ModelFile, failed: list[CutRun], bound: BoundInputs, spec: ModelSpec,
           level: str) -> list[OutputComparison] | None:
    """The failed cuts at another level; None when onnxruntime cannot run them there."""
    try:
        session = open_session(model.path, level)
    except RuntimeFailure:
        return None
    rows: list[OutputComparison] = []
    for run in failed:
        assert run.reference is not None  # a failed comparison had PyTorch's outputs
        again = compare_cut(session, bound, spec, run.cut, run.reference)
        if again.runtime_error is not None:
            return None
        rows += again.rows
    return rows


def _passes(rows: list[OutputComparison] | None, outputs: Iterable[str]) -> bool:
    wanted = set(outputs)
    return rows is not None and all(row.passed for row in rows if row.output in wanted)


def _drift_finding(output: str, failing: list[OutputComparison],
                   disabled: list[OutputComparison], configured: str, best: str,
                   spec: ModelSpec) -> Finding:
    worst = max((row for row in failing if row.output == output),
                key=lambda row: row.max_abs_diff or 0.0)
    clean = max((row.max_abs_diff or 0.0 for row in disabled if row.output == output),
                default=0.0)
    atol = worst.smallest_passing_atol
    tolerance = f"atol = {atol:.3g}" if atol is not None else "no atol (NaN or Inf)"
    return Finding(
        "optimizer-drift",
        f'output "{output}" at batch {worst.batch_size}: max abs diff {_g(worst.max_abs_diff)} '
        f'> atol {spec.atol:g} (rtol {spec.rtol:g}) at runtime-optimization "{configured}", '
        f'but {_g(clean)} with graph optimizations "disabled", within the tolerance: '
        f"onnxruntime's graph rewrites change the numbers, not the export. The highest level "
        f'that passes is "{best}".',
        fix=(f"In the deployment, set `SessionOptions.graph_optimization_level = "
             f"onnxruntime.GraphOptimizationLevel.{GRAPH_LEVELS[best]}` (and "
             f'`runtime-optimization = "{best}"` here, to check what you ship), or accept the '
             f'drift at "{configured}" with {tolerance} for this model.'),
        details={"output": output, "batch_size": worst.batch_size, "level": configured,
                 "max_abs_diff": worst.max_abs_diff, "disabled_max_abs_diff": clean,
                 "highest_passing_level": best, "smallest_passing_atol": atol},
    )


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"
