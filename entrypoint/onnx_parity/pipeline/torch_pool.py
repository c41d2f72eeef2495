"""The worker pool whose zygote imports torch and the ONNX stack once (pipeline/warm_up.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from onnx_parity.isolation import Job, JobOutcome, Startup, WorkerPool, WorkerPoolError
from onnx_parity.pipeline.warm_up import PRELOAD

__all__ = ["Job", "JobOutcome", "TorchWorkerPool", "WorkerPoolError"]


class TorchWorkerPool(WorkerPool):
    """WorkerPool with the torch preload: every worker starts with torch imported and warm."""

    def __init__(self, job_function: str, workdir: Path, jobs: int, env: Mapping[str, str],
                 warm_up: bool = True, preimports: Sequence[str] = ()) -> None:
        super().__init__(job_function, workdir, jobs, env,
                         Startup(warm_up, PRELOAD, tuple(preimports)))
