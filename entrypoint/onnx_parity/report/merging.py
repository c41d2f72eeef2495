"""`onnx-parity merge`: the shards of one run as one RunResult, as if it had run in one job.

The shards must be one complete set: the same N, each K from 1 to N exactly once, the same
configuration (file, models and its sha256), the same tool and library versions, the same
partition plan, and together every configured model exactly once. Anything else is a
MergeError (exit 2) saying which shard and what differs. Models come back in configuration
order, so the merged report.md is byte for byte a single run's (apart from its footer).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from onnx_parity.errors import UserError
from onnx_parity.results import RunResult


class MergeError(UserError):
    """The shard reports do not make one complete run."""

    title = "merge"


def merge_runs(shards: Sequence[tuple[str, RunResult]]) -> RunResult:
    """`shards`: (label for messages, e.g. the file name; its run), in any order."""
    if not shards:
        raise MergeError("no report to merge. Give every shard's report.json.")
    first_label, first = shards[0]
    for label, run in shards:
        _same_run(label, run, first_label, first)
    _complete_set(shards)
    models = {model.name: model for _, run in shards for model in run.models}
    _every_model_once(shards, first.configured_models)
    ordered = tuple(models[name] for name in first.configured_models)
    return dataclasses.replace(first, models=ordered, shard=None, shard_plan=None)


def _same_run(label: str, run: RunResult, first_label: str, first: RunResult) -> None:
    if run.shard is None:
        raise MergeError(f"{label} is not a shard's report (it has no \"shard\"). Give the "
                         "report.json of each `onnx-parity check --shard K/N` job.")
    checks = (
        ("the configuration file", run.config_path, first.config_path),
        ("the configured models", run.configured_models, first.configured_models),
        ("the configuration", run.configuration_sha256, first.configuration_sha256),
        ("the tool and library versions", run.versions, first.versions),
        ("the number of shards", run.shard.count, first.shard.count if first.shard else None),
        ("the shard plan (the durations the cache gave each shard)", run.shard_plan,
         first.shard_plan),
        ("the baseline", run.baseline, first.baseline),
    )
    for what, theirs, ours in checks:
        if theirs != ours:
            raise MergeError(
                f"{label} and {first_label} disagree on {what} ({_shown(theirs)} against "
                f"{_shown(ours)}): they do not come from one run. Give the shards of one "
                "workflow run, made with the same configuration, image and cache.")


def _complete_set(shards: Sequence[tuple[str, RunResult]]) -> None:
    seen: dict[int, str] = {}
    count = shards[0][1].shard.count if shards[0][1].shard else 0
    for label, run in shards:
        assert run.shard is not None
        if run.shard.index in seen:
            raise MergeError(f"shard {run.shard.label} is given twice ({seen[run.shard.index]} "
                             f"and {label}). Give each shard's report.json once.")
        seen[run.shard.index] = label
    missing = [f"{index}/{count}" for index in range(1, count + 1) if index not in seen]
    if missing:
        raise MergeError(f"shard {', '.join(missing)} is missing: {len(seen)} of {count} "
                         "reports were given. Wait for every shard job (`needs:`) and "
                         "download every report.json.")


def _every_model_once(shards: Sequence[tuple[str, RunResult]], configured: Sequence[str]) -> None:
    where: dict[str, list[str]] = {}
    for label, run in shards:
        for model in run.models:
            where.setdefault(model.name, []).append(label)
    doubled = {name: labels for name, labels in where.items() if len(labels) > 1}
    if doubled:
        name, labels = next(iter(doubled.items()))
        raise MergeError(f"model {name} was checked by more than one shard ({', '.join(labels)}),"
                         " so the shards did not split the same list of models. Give every "
                         "shard the same configuration and the same cache.")
    absent = [name for name in configured if name not in where]
    unknown = [name for name in where if name not in configured]
    if absent or unknown:
        names = ", ".join(absent or unknown)
        raise MergeError(f"model {names} is {'in no shard' if absent else 'not configured'}; "
                         "the shards did not split the same list of models. Give every shard "
                         "the same configuration, --model selection and cache.")


def _shown(value: object) -> str:
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."
