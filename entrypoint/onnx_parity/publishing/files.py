"""Write a run's results into the output folder: the only place check results touch the disk."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.errors import UserError
from onnx_parity.report.serialization import (
    ReportFormatError,
    parity_record,
    run_from_json,
    run_to_json,
)
from onnx_parity.results import RunResult


class OutputError(UserError):
    """The output folder cannot be written."""

    title = "output folder"


@dataclass(frozen=True)
class WrittenReport:
    folder: Path
    report_json: Path
    report_markdown: Path


def prepare_output(out: Path) -> None:
    """Before any model runs: an output folder that cannot be written would lose the run."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".onnx-parity-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise OutputError(f"cannot write into the output folder {out}: "
                          f"{error.strerror or error}. Fix: pass a writable folder with --out "
                          "(nothing was run).") from None


def write_outputs(run: RunResult, markdown: str, out: Path) -> WrittenReport:
    try:
        out.mkdir(parents=True, exist_ok=True)
        for model in run.models:
            _write_model(run, model.name, out)
        report_json = out / "report.json"
        _write_json(report_json, run_to_json(run))
        report_markdown = out / "report.md"
        report_markdown.write_text(markdown, encoding="utf-8")
    except OSError as error:
        raise OutputError(f"cannot write the report into {out}: {error.strerror or error}. "
                          "Fix: pass a writable folder with --out.") from None
    return WrittenReport(out, report_json, report_markdown)


def _write_model(run: RunResult, name: str, out: Path) -> None:
    model = next(m for m in run.models if m.name == name)
    (out / f"{name}.log").write_text(model.log, encoding="utf-8")
    onnx_file = None
    if model.onnx_path and Path(model.onnx_path).is_file():
        onnx_file = f"{name}.onnx"
        shutil.move(model.onnx_path, out / onnx_file)
    record = parity_record(model, run.versions, onnx_file)
    _write_json(out / f"{name}.parity.json", record)


def _write_json(path: Path, document: object) -> None:
    """Strict JSON (no NaN or Infinity: the figures carry them as text), indented."""
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def write_report(run: RunResult, markdown: str, out: Path) -> WrittenReport:
    """report.json and report.md only (`merge`: the shards' jobs kept the per-model files)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        report_json = out / "report.json"
        _write_json(report_json, run_to_json(run))
        report_markdown = out / "report.md"
        report_markdown.write_text(markdown, encoding="utf-8")
    except OSError as error:
        raise OutputError(f"cannot write the report into {out}: {error.strerror or error}. "
                          "Fix: pass a writable folder with --out.") from None
    return WrittenReport(out, report_json, report_markdown)


def read_report(path: Path, what: str) -> RunResult:
    """A report.json written by `check` (a baseline, a shard); `what` names it in messages."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ReportFormatError(f"{what} {path}: cannot be read ({error.strerror or error}). "
                                "Fix: give the path of a report.json that `onnx-parity check` "
                                "wrote (download or restore it first).") from None
    except ValueError as error:
        raise ReportFormatError(f"{what} {path}: not JSON ({error}). Fix: give the report.json "
                                "that `onnx-parity check` wrote.") from None
    try:
        return run_from_json(data)
    except ReportFormatError as error:
        raise ReportFormatError(f"{what} {path}: {error}") from None
