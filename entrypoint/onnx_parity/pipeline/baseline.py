"""This run beside the baseline (`--baseline`, the base branch's report.json).

Per model: the base's verdict, max abs diff and error codes (what `vs base` and
`fail-on regression` read), plus verification/drift.py's `drift-regression`; for the run: the
models removed since the base, and a note when the baseline came from another configuration
or tool version (it is compared all the same).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from onnx_parity.findings import Severity
from onnx_parity.results import BaseFigures, Baseline, ModelResult, RunResult
from onnx_parity.settings import ModelSpec
from onnx_parity.verification import drift_findings


def compare_with_baseline(run: RunResult, base: RunResult,
                          specs: Sequence[ModelSpec]) -> RunResult:
    known = {model.name: model for model in base.models}
    by_name = {spec.name: spec for spec in specs}
    models = tuple(_compared(model, by_name[model.name], known.get(model.name))
                   for model in run.models)
    configured = run.configured_models or tuple(model.name for model in run.models)
    before = base.configured_models or tuple(model.name for model in base.models)
    removed = tuple(name for name in before if name not in configured)
    baseline = Baseline(tool_version=base.versions.get("onnx-parity", "?"),
                        config_path=base.config_path, removed_models=removed,
                        notes=_notes(run, base))
    return dataclasses.replace(run, models=models, baseline=baseline)


def base_figures(model: ModelResult) -> BaseFigures:
    codes = tuple(dict.fromkeys(f.code for f in model.findings if f.severity == Severity.ERROR))
    return BaseFigures(passed=model.passed, max_abs_diff=model.max_abs_diff, error_codes=codes)


def _compared(model: ModelResult, spec: ModelSpec, before: ModelResult | None) -> ModelResult:
    if before is None:
        return model
    figures = base_figures(before)
    findings = model.findings + drift_findings(spec, model, figures)
    return dataclasses.replace(model, base=figures, findings=findings)


def _notes(run: RunResult, base: RunResult) -> tuple[str, ...]:
    notes = []
    ours, theirs = run.versions.get("onnx-parity", "?"), base.versions.get("onnx-parity", "?")
    if ours != theirs:
        notes.append(f"the baseline was made by onnx-parity {theirs}, this run by {ours}")
    same_file = base.config_path == run.config_path
    if not same_file or (base.configuration_sha256 and run.configuration_sha256
                         and base.configuration_sha256 != run.configuration_sha256):
        where = "" if same_file else f" (`{base.config_path}`)"
        notes.append(f"the baseline was made with another configuration{where}")
    if base.shard is not None:
        notes.append(f"the baseline is shard {base.shard.label} of its run: models of the other "
                     "shards show as new; merge its shards first (`onnx-parity merge`)")
    return tuple(notes)
