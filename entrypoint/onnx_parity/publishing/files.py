"""Write a run's results into the output folder: the only place check results touch the disk."""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.errors import UserError
from onnx_parity.model_files import remove_model
from onnx_parity.publishing.bundles import write_bundles
from onnx_parity.report import (
    ReportFormatError,
    divergence_record,
    parity_record,
    render_junit,
    render_sarif,
    repro_report,
    repro_script,
    run_from_json,
    run_to_json,
    variant_file,
    variant_record,
)
from onnx_parity.results import ModelResult, Repro, RunResult, StoredFile, VariantResult

# The cache hands a repro folder back with its result (or says an older entry did not keep
# it); this is for a folder that is still missing, so REPORT.md never points at absent files.
CACHED_REPRO = ("its files were not found where the check left them (run with --no-cache to "
                "make them again)")


class OutputError(UserError):
    """The output folder cannot be written."""

    title = "output folder"


@dataclass(frozen=True)
class WrittenReport:
    folder: Path
    report_json: Path
    report_markdown: Path
    report_sarif: Path
    report_junit: Path


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


def write_outputs(run: RunResult, markdown: str, out: Path,
                  source_root: str = "") -> WrittenReport:
    """Every file of the output folder; `source_root` prefixes the paths in report.sarif."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        for model in run.models:
            _write_model(run, model.name, out)
    except OSError as error:
        raise _output_error(out, error) from None
    return write_report(run, markdown, out, source_root)


def _write_ci_reports(run: RunResult, out: Path, source_root: str) -> tuple[Path, Path]:
    """report.sarif (code scanning) and report.junit.xml (test-report views)."""
    sarif = out / "report.sarif"
    _write_json(sarif, render_sarif(run, source_root))
    junit = out / "report.junit.xml"
    junit.write_text(render_junit(run), encoding="utf-8")
    return sarif, junit


def _write_model(run: RunResult, name: str, out: Path) -> None:
    model = next(m for m in run.models if m.name == name)
    (out / f"{name}.log").write_text(model.log, encoding="utf-8")
    onnx_file = None
    if model.onnx_path and Path(model.onnx_path).is_file():
        onnx_file = f"{name}.onnx"
        _move_model(Path(model.onnx_path), model.onnx_files, out / onnx_file)
        write_bundles(model, out / onnx_file)  # `bundle`: beside the decoder file
    record = parity_record(model, run.versions, onnx_file)
    _write_json(out / f"{name}.parity.json", record)
    divergence = divergence_record(model)
    if divergence is not None:
        _write_json(out / f"{name}.divergence.json", divergence)
    for variant in model.variants:
        _write_variant(run, model, variant, out)
    if model.repro is not None:
        _write_repro(run, model, model.repro, out / f"{name}.repro")


def _write_repro(run: RunResult, model: ModelResult, repro: Repro, folder: Path) -> None:
    """`<name>.repro/`: the worker's subgraph and arrays moved in (when it made them; a
    generating model's failing step too), then repro.py and REPORT.md beside them. A folder
    left there by an earlier run goes first."""
    shutil.rmtree(folder, ignore_errors=True)
    made = Path(repro.folder) if repro.folder else None
    if made is not None and made.is_dir():
        shutil.move(made, folder)
    folder.mkdir(exist_ok=True)
    if repro.omitted is None and not (folder / "subgraph.onnx").is_file():
        repro = dataclasses.replace(repro, omitted=CACHED_REPRO)
    step = repro.step
    if step is not None and step.omitted is None and not (folder / "step_inputs.npz").is_file():
        step = dataclasses.replace(step, omitted=CACHED_REPRO)
        repro = dataclasses.replace(repro, step=step)
    if repro.omitted is None or (step is not None and step.omitted is None):
        (folder / "repro.py").write_text(repro_script(model, repro), encoding="utf-8")
    (folder / "REPORT.md").write_text(repro_report(model, repro, run.versions), encoding="utf-8")


def _write_variant(run: RunResult, model: ModelResult, variant: VariantResult, out: Path) -> None:
    """`<model>.<variant>.onnx` and its `<model>.<variant>.parity.json` beside the fp32 files."""
    file = variant_file(model.name, variant)
    if file and variant.onnx_path and Path(variant.onnx_path).is_file():
        _move_model(Path(variant.onnx_path), variant.files, out / file)
    if file and (out / file).is_file():  # `bundle`: `<model>.<variant>.genai/` and the rest
        write_bundles(model, out / file, f"{model.name}.{variant.name}")
    if variant.skipped is None:
        _write_json(out / f"{model.name}.{variant.name}.parity.json",
                    variant_record(model, variant, run.versions))


def _move_model(onnx_path: Path, files: tuple[StoredFile, ...], destination: Path) -> None:
    """The .onnx and, for a model with external data, its data file, moved into the output
    folder (a rename; a copy streamed on disk across filesystems): the data file keeps the
    name the .onnx gives it. A data file left there by an earlier run goes first."""
    remove_model(destination)
    shutil.move(onnx_path, destination)
    for file in files[1:]:
        shutil.move(onnx_path.with_name(file.file), destination.with_name(file.file))


def _write_json(path: Path, document: object) -> None:
    """Strict JSON (no NaN or Infinity: the figures carry them as text), indented."""
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def write_report(run: RunResult, markdown: str, out: Path,
                 source_root: str = "") -> WrittenReport:
    """The run's own files, no per-model ones (`merge`: the shards' jobs kept those)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        report_json = out / "report.json"
        _write_json(report_json, run_to_json(run))
        report_markdown = out / "report.md"
        report_markdown.write_text(markdown, encoding="utf-8")
        report_sarif, report_junit = _write_ci_reports(run, out, source_root)
    except OSError as error:
        raise _output_error(out, error) from None
    return WrittenReport(out, report_json, report_markdown, report_sarif, report_junit)


def _output_error(out: Path, error: OSError) -> OutputError:
    return OutputError(f"cannot write the report into {out}: {error.strerror or error}. "
                       "Fix: pass a writable folder with --out.")


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
