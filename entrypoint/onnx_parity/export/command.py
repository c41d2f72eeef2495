"""The user's own export (`export-command`): run their command, take the ONNX file it wrote.

The command runs in the model's worker, in the repository root, split like a shell command
line and run without a shell (`sh -c '...'` for pipes), with `{onnx}` replaced by a path in a
private folder of the work folder; the folder of the Python that runs onnx-parity comes first
on `PATH`, so `python` and the scripts installed beside it (`optimum-cli`) are the ones whose
packages the check uses. It stays in the worker's process group, so the pool's timeout ends
it too; before that it gets what is left of the model's `timeout-seconds` (the deadline).

The file it wrote is moved into place like the tool's own export (export/saving.py: one file
as it is, external data gathered into `<name>.onnx.data`) and checked the same way, except
what only the tool's own export records: no dynamo program (localisation degrades to what
the graph's node names say) and no export assumptions. Its inputs must carry the names the
configuration gives: onnxruntime is fed by them. A command that fails, runs out of time,
writes nothing or a file without those inputs is an ExportFailure of kind `export-error`,
quoting its last output lines (export/review.py builds the finding).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from onnx_parity.export.exporters import Exported, ExportRequest
from onnx_parity.export.failures import AttemptLog, ExportFailure
from onnx_parity.export.inspection import inspect_model
from onnx_parity.export.saving import export_folder, gathered
from onnx_parity.locations import shorten, text_frames
from onnx_parity.model_files import ModelFile
from onnx_parity.settings import command_arguments

QUOTED_LINES = 5  # the last lines of its output a failure quotes


def command_export(command: str, request: ExportRequest, destination: Path,
                   deadline: float | None) -> tuple[Exported | None, list[ExportFailure]]:
    """The command's model at `destination`, or why there is none (the same pair as the
    exporters' loop in export/outcome.py gives)."""
    print(f"--- export with the command `{command}` starts", flush=True)
    started = time.perf_counter()
    with export_folder(destination) as written:
        code, output, late = _run(command_arguments(command, written), deadline)
        log = AttemptLog(output, (), time.perf_counter() - started)
        print(output.rstrip(), flush=True)
        try:
            model = _taken(code, late, written, destination, log)
            _check_inputs(model, request.input_names)
        except _Refused as refused:
            print(f"--- export with the command: failed: {refused}", flush=True)
            return None, [_failure(command, str(refused), refused.fix, log)]
    print("--- export with the command: succeeded", flush=True)
    return Exported(command, model, (), output, log.seconds, output_logged=True), []


class _Refused(Exception):
    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


def _run(arguments: list[str], deadline: float | None) -> tuple[int | None, str, float | None]:
    """(exit status, output, the seconds it was given when it ran out of them, else None)."""
    environ = dict(os.environ)
    environ["PATH"] = os.pathsep.join(filter(None, (os.path.dirname(sys.executable),
                                                    environ.get("PATH"))))
    budget = None if deadline is None else max(1.0, deadline - time.monotonic())
    try:
        process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, env=environ)
    except OSError as error:  # no such program, not executable
        return None, f"{arguments[0]}: {error.strerror or error}", None
    try:
        output, _ = process.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        return None, _text(output), budget
    return process.returncode, _text(output), None


def _text(output: bytes | None) -> str:
    return (output or b"").decode("utf-8", "replace")


def _taken(code: int | None, late: float | None, written: Path, destination: Path,
           log: AttemptLog) -> ModelFile:
    """The model the command wrote, moved to `destination`; _Refused when there is none."""
    if late is not None:
        raise _Refused(f"it ran past the {late:.0f} s left of the model's `timeout-seconds` "
                       f"and was stopped{_last_lines(log.output)}",
                       "Make the export faster, or raise `timeout-seconds`.")
    if code is None:
        raise _Refused(f"it could not be started: {shorten(log.output, 300)}",
                       "Name a program installed beside onnx-parity (on PATH), e.g. `python`.")
    if code != 0:
        raise _Refused(f"it exited with status {code}{_last_lines(log.output)}",
                       "Run the command from the repository root to reproduce it; it must "
                       "exit with status 0 once it has written {onnx}.")
    if not written.is_file() or written.stat().st_size == 0:
        others = sorted(path.name for path in written.parent.iterdir() if path != written)
        beside = f" (it wrote {', '.join(others[:3])} there)" if others else ""
        raise _Refused(f"it exited with status 0 but wrote no ONNX file at {{onnx}}{beside}"
                       f"{_last_lines(log.output)}",
                       "Write the model to the path the command is given in place of {onnx} "
                       "(external data may sit beside it).")
    try:
        return gathered(written, destination)
    except Exception as error:  # external data it names but did not write, a broken file
        raise _Refused(f"its file cannot be read with its external data: "
                       f"{type(error).__name__}: {shorten(str(error), 300)}",
                       "Write the model and every external data file it names beside it.") \
            from None


def _check_inputs(model: ModelFile, configured: tuple[str, ...]) -> None:
    """onnxruntime is fed by the configured names: the file must take those inputs."""
    try:
        taken = tuple(inspect_model(model).inputs)
    except Exception as error:  # not an ONNX model at all
        raise _Refused(f"its file is not an ONNX model: {type(error).__name__}: "
                       f"{shorten(str(error), 300)}",
                       "Write the ONNX model itself to {onnx}.") from None
    if set(taken) != set(configured):
        raise _Refused(
            f"its file takes the inputs {_names(taken)}, the configuration names "
            f"{_names(configured)}",
            "Export with those names (`input_names=[...]` in torch.onnx.export), or name the "
            "inputs in `inputs` as the file does.")


def _names(names: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{name}"' for name in names) + "]"


def _last_lines(output: str, lead: str = "; its last output: ") -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return "; it printed nothing"
    return lead + shorten(" | ".join(lines[-QUOTED_LINES:]), 600)


def _failure(command: str, message: str, fix: str, log: AttemptLog) -> ExportFailure:
    failure = ExportFailure(command, "export-error", message, log=log,
                            frames=tuple(text_frames(log.output)))
    failure.fix = fix
    failure.output_logged = True  # printed into the model's log above
    return failure
