"""The action's inputs, read once from the environment into one frozen value.

The runner hands each `with:` input of a Docker action to the container as `INPUT_<NAME>`, the
name upper-cased with its hyphens kept (`github-token` -> `INPUT_GITHUB-TOKEN`). An input left
out of the workflow arrives with action.yml's default; an unset variable (a local run) gets the
same default from `DEFAULTS` below, which the contract test keeps equal to action.yml.

Booleans accept "true" or "false" in any letter case and nothing else: a typo such as `yes`
is an error naming the input, never a silent false.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from onnx_parity.errors import UserError
from onnx_parity.pipeline import ShardError, parse_shard
from onnx_parity.report import FailOn as FailOn  # the gate's values, one definition
from onnx_parity.results import Shard


class InputError(UserError):
    """An input has a value the action cannot use; the text names the input and the fix."""

    title = "invalid input"


# Every input of action.yml with the default used when the variable is unset. github-token's
# default in action.yml is an expression (`${{ github.token }}`) the runner evaluates; locally
# there is no token unless one is given.
DEFAULTS: dict[str, str] = {
    "config": "",
    "working-directory": ".",
    "github-token": "",
    "comment": "true",
    "fail-on": "error",
    "output-dir": "onnx-parity-out",
    "requirements": "",
    "comment-from-report": "",
    "run-fork-code-with-write-token": "false",
    "cache-dir": "",
    "shard": "",
    "merge-reports": "",
    "baseline-report": "",
}


@dataclass(frozen=True)
class ActionInputs:
    config: str | None  # relative to working_directory; None: the engine's default file
    working_directory: str  # relative to the workspace
    github_token: str = field(repr=False)  # "" when none was given; never in a repr
    comment: bool
    fail_on: FailOn
    output_dir: str  # relative to the workspace
    requirements: str | None  # relative to working_directory
    comment_from_report: str | None  # relative to the workspace
    run_fork_code_with_write_token: bool
    cache_dir: str | None = None  # relative to the workspace; None: no cache
    shard: Shard | None = None  # this job checks only this part of the models
    merge_reports: str | None = None  # paths or globs of shard reports, inside the workspace
    baseline_report: str | None = None  # relative to the workspace

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ActionInputs:
        raw = {name: read_input(environ, name) for name in DEFAULTS}
        return cls(
            config=raw["config"] or None,
            working_directory=_relative_path(raw["working-directory"] or ".", "working-directory"),
            github_token=raw["github-token"],
            comment=parse_bool(raw["comment"], "comment"),
            fail_on=parse_fail_on(raw["fail-on"]),
            output_dir=_relative_path(raw["output-dir"] or DEFAULTS["output-dir"], "output-dir"),
            requirements=_optional_path(raw["requirements"], "requirements"),
            comment_from_report=_optional_path(raw["comment-from-report"], "comment-from-report"),
            run_fork_code_with_write_token=parse_bool(
                raw["run-fork-code-with-write-token"], "run-fork-code-with-write-token"),
            cache_dir=_optional_path(raw["cache-dir"], "cache-dir"),
            shard=_shard(raw["shard"]),
            merge_reports=_report_patterns(raw["merge-reports"]),
            baseline_report=_optional_path(raw["baseline-report"], "baseline-report"),
        )


def environment_name(name: str) -> str:
    """`github-token` -> `INPUT_GITHUB-TOKEN`, as the runner names it (hyphens kept)."""
    return "INPUT_" + name.upper().replace(" ", "_")


def read_input(environ: Mapping[str, str], name: str) -> str:
    return environ.get(environment_name(name), DEFAULTS[name]).strip()


def parse_bool(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise InputError(
        f'input "{name}" is "{value}", which is not a boolean. Write {name}: "true" or '
        f'{name}: "false" (the action accepts only these two words, in any letter case).'
    )


def parse_fail_on(value: str) -> FailOn:
    try:
        return FailOn(value.strip().lower())
    except ValueError:
        choices = ", ".join(f'"{choice.value}"' for choice in FailOn)
        raise InputError(
            f'input "fail-on" is "{value}"; it must be one of {choices}. "error" fails the step '
            'when a model has an error finding, "warning" also on warnings, "never" reports '
            'without failing, "regression" only on error findings the baseline-report did not '
            "have for that model."
        ) from None


def _shard(value: str) -> Shard | None:
    if not value:
        return None
    try:
        return parse_shard(value, 'input "shard"')
    except ShardError as error:
        raise InputError(str(error)) from None


def _report_patterns(value: str) -> str | None:
    """Paths or globs, one per line or separated by spaces; each relative to the workspace."""
    for pattern in value.split():
        _relative_path(pattern, "merge-reports")
    return value.strip() or None


def _optional_path(value: str, name: str) -> str | None:
    return _relative_path(value, name) if value else None


def _relative_path(value: str, name: str) -> str:
    """Refuse absolute paths early; whether the path stays inside is checked once resolved."""
    if value.startswith(("/", "~", "\\")) or "\0" in value:
        raise InputError(
            f'input "{name}" is "{value}", an absolute path. Give a path relative to the '
            'repository root (the workspace), e.g. "models" or "onnx-parity-out".'
        )
    return value
