"""`onnx-parity init`'s look at the model, run in a worker like every model check.

The command's own process never imports torch or the user's code: the model is built, its
forward read and its samples made by models/probe.py in a forked worker, and what comes back
is plain data (parameter names, numpy arrays, or the problem in words).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Mapping
from pathlib import Path

from onnx_parity.isolation import Job, JobOutcome
from onnx_parity.models import ProbeResult, probe_model
from onnx_parity.pipeline.all_models import worker_environment
from onnx_parity.pipeline.torch_pool import TorchWorkerPool
from onnx_parity.settings import DEFAULT_TIMEOUT_SECONDS, NewModel

JOB_FUNCTION = "onnx_parity.pipeline.new_model:probe_job"


def probe_job(payload: tuple[NewModel, Path], _workdir: Path, _progress: object) -> ProbeResult:
    """The worker's job (isolation/worker.py calls it with the unpickled payload, the worker's
    folder and its progress callback; the probe needs neither of the last two). The factory
    runs with the repository root as the working directory, as in a check (one_model.py)."""
    model, repo = payload
    with contextlib.chdir(repo.resolve()):
        return probe_model(model, repo)


def probe_in_worker(model: NewModel, repo: Path, environ: Mapping[str, str]) -> ProbeResult:
    # No warm-up export: the probe only builds the model.
    with (tempfile.TemporaryDirectory(prefix="onnx-parity-init-") as folder,
          TorchWorkerPool(JOB_FUNCTION, Path(folder), 1, worker_environment(environ),
                          warm_up=False) as pool):
        [outcome] = pool.run([Job(model.name, (model, repo), DEFAULT_TIMEOUT_SECONDS, None)],
                             lambda _key, _step, _seconds: None)
    return _result(model, outcome)


def _result(model: NewModel, outcome: JobOutcome) -> ProbeResult:
    if isinstance(outcome.result, ProbeResult):
        return outcome.result
    failure = outcome.failure
    detail = f"{failure.kind}: {failure.detail}" if failure else "no result"
    tail = f" Its last log lines:\n{failure.log_tail}" if failure and failure.log_tail else ""
    return ProbeResult(problem=f'building "{model.factory}" in a worker failed ({detail}).'
                               f" Fix: run the factory on its own to see why.{tail}")
