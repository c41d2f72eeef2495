"""Run every configured model, each in its own worker, and gather one RunResult.

This side never imports torch: the workers do. Whatever happens to a worker, every model
ends up in the result, with the evidence that was gathered.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path

from onnx_parity import __version__
from onnx_parity.engine.results import ModelResult, RunResult
from onnx_parity.engine.workers import DUMP_HEADER, Job, JobOutcome, WorkerFailure, WorkerPool
from onnx_parity.export.capture import strip_ansi
from onnx_parity.findings import Finding
from onnx_parity.settings.schema import ModelSpec, Settings

JOB_FUNCTION = "onnx_parity.engine.model_run:run_model"
LIBRARIES = ("torch", "onnx", "onnxruntime", "onnxscript", "numpy")
# Never handed to model code: the workers get the environment without these.
SECRET_VARIABLES = ("INPUT_GITHUB-TOKEN", "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN",
                    "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "GH_TOKEN")

EventSink = Callable[[str, str, float], None]
# The last lines of a dead worker's log kept as a finding's evidence.
EVIDENCE_LINES = 10
STACK_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
# Installed packages: shown from site-packages on, not from this machine's prefix.
SITE_PACKAGES = re.compile(r'[^\s"\']*/(site-packages|dist-packages)/')


def versions() -> dict[str, str]:
    found = {"onnx-parity": __version__, "python": sys.version.split()[0]}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    env = {key: value for key, value in environ.items() if key not in SECRET_VARIABLES}
    env["PYTHONIOENCODING"] = "utf-8"  # an ascii console must not break exporter output
    return env


def run_models(settings: Settings, specs: tuple[ModelSpec, ...], workdir: Path, jobs: int,
               environ: Mapping[str, str], on_event: EventSink) -> RunResult:
    pool_jobs = [
        Job(spec.name, (spec, settings.repo), spec.timeout_seconds, spec.memory_limit_mb)
        for spec in specs
    ]
    with WorkerPool(JOB_FUNCTION, workdir, max(1, min(jobs, len(specs))),
                    worker_environment(environ)) as pool:
        outcomes = pool.run(pool_jobs, on_event)
    models = tuple(
        finish(spec, outcome, settings.repo, workdir) for spec, outcome in zip(specs, outcomes)
    )
    return RunResult(settings.relative(settings.config_path), versions(), models)


def finish(spec: ModelSpec, outcome: JobOutcome, repo: Path, workdir: Path) -> ModelResult:
    result = outcome.result if isinstance(outcome.result, ModelResult) else None
    if result is None:
        result = _failed_result(spec, outcome.failure, outcome, repo)
    log = _read_log(outcome.log_path)
    findings = tuple(_with_source(_relative_text(f, repo, workdir), repo) for f in result.findings)
    return dataclasses.replace(result, findings=findings, log=_scrub(log, repo, workdir))


def _failed_result(spec: ModelSpec, failure: WorkerFailure | None, outcome: JobOutcome,
                   repo: Path) -> ModelResult:
    if failure is None:
        failure = WorkerFailure(spec.name, "crash", "the worker returned no result", "",
                                outcome.seconds)
    lines = failure.log_tail.strip().splitlines()
    file, line = _innermost_user_frame(lines, repo)
    where = f" while running {file}:{line}" if file else ""
    evidence = _evidence(lines, repo)
    finding = Finding(failure.kind, f"{failure.detail}{where}; the model's other results are "
                      "lost with its worker, the other models are unaffected",
                      file=file, line=line, evidence="\n".join(evidence) or None)
    return ModelResult(name=spec.name, exporter=None, requested_opset=spec.opset, opset=None,
                       atol=spec.atol, rtol=spec.rtol, batch_sizes=spec.batch_sizes,
                       findings=(finding,))


def _evidence(lines: list[str], repo: Path) -> list[str]:
    """What the worker printed last before a stack dump, the model's own frames, the end."""
    dump = next((i for i, text in enumerate(lines) if DUMP_HEADER.match(text)), len(lines))
    before = lines[max(0, dump - 3):dump]
    ours = [text for text in lines if str(repo.resolve()) in text][:4]
    return list(dict.fromkeys(before + ours + lines[-EVIDENCE_LINES:]))


def _innermost_user_frame(lines: list[str], repo: Path) -> tuple[str | None, int | None]:
    """A stack dump lists the most recent call first: the first frame in the repository."""
    root = str(repo.resolve()) + os.sep
    for text in lines:
        match = STACK_FRAME.search(text)
        if match and match.group(1).startswith(root):
            return match.group(1)[len(root):], int(match.group(2))
    return None, None


def _read_log(path: Path) -> str:
    try:
        return strip_ansi(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""


def _scrub(text: str, repo: Path, workdir: Path) -> str:
    """No machine paths in what gets published: the repository root becomes relative."""
    for root in (str(repo.resolve()), str(repo), str(workdir.resolve()), str(workdir)):
        text = text.replace(root + os.sep, "").replace(root, ".")
    return SITE_PACKAGES.sub(r"\1/", text)


def _relative_text(finding: Finding, repo: Path, workdir: Path) -> Finding:
    return dataclasses.replace(
        finding,
        message=_scrub(finding.message, repo, workdir),
        evidence=_scrub(finding.evidence, repo, workdir) if finding.evidence else None,
    )


def _with_source(finding: Finding, repo: Path) -> Finding:
    """Carry the offending source line, so the comment shows it without the repository."""
    if not finding.file or not finding.line:
        return finding
    try:
        lines = (repo / finding.file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return finding
    if not 0 < finding.line <= len(lines):
        return finding
    details = {**finding.details, "source": lines[finding.line - 1].strip()}
    return dataclasses.replace(finding, details=details)
