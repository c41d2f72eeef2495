"""Runs each job in its own forked worker, so a crash, a hang or a memory blow-up ends only
that job and the run still gets an outcome for every job.

The pool starts one zygote process (isolation/zygote.py) that runs the preload once, then forks
a worker per job. This side never imports torch: it speaks JSON lines over pipes, counts each
job's time from the moment its worker started, watches the worker's resident set in /proc, and
kills a worker's process group by PID when it goes over either limit.
"""

from __future__ import annotations

import pickle
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from onnx_parity.errors import OnnxParityError
from onnx_parity.isolation.logs import read_log_tail
from onnx_parity.isolation.processes import describe_exit, dump_stacks, kill_group, resident_set_mb
from onnx_parity.isolation.protocol import JobReturn, Message, job_path, log_path, result_path
from onnx_parity.isolation.zygote_process import ZygoteProcess

# How often timeouts and resident sets are checked; also the pool's reaction time.
POLL_SECONDS = 0.05
# Between the SIGUSR1 that makes a timed-out worker dump its stacks into its log and the SIGKILL.
STACK_DUMP_GRACE_SECONDS = 0.5
_SAFE_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")

EventCallback = Callable[[str, str, float], None]
OutcomeCallback = Callable[["JobOutcome"], None]


class WorkerPoolError(OnnxParityError):
    """The pool was used wrongly (bad or repeated key, run outside `with`); not a model failure."""


@dataclass(frozen=True)
class Job:
    key: str  # unique, file-name safe (the model name)
    payload: object  # picklable; passed to the job function
    timeout_seconds: float
    memory_limit_mb: int | None


@dataclass(frozen=True)
class WorkerFailure:
    key: str
    kind: str  # "crash" | "timeout" | "out-of-memory"
    detail: str
    log_tail: str  # last LOG_TAIL_LINES lines of the model's log, ANSI stripped
    seconds: float


@dataclass(frozen=True)
class Startup:
    """What the zygote does once, before it forks any worker."""

    warm_up: bool = True
    preload: str | None = None  # module:function(warm_up, preimports) run once, or None
    preimports: tuple[str, ...] = ()  # data for the preload: installed module names


@dataclass(frozen=True)
class JobOutcome:
    key: str
    result: Any  # what the job function returned, unpickled (None on failure)
    failure: WorkerFailure | None
    seconds: float
    log_path: Path


class WorkerPool:
    """Context manager: starts the zygote on enter and stops it (by PID) on exit, even on errors."""

    def __init__(
        self,
        job_function: str,
        workdir: Path,
        jobs: int,
        env: Mapping[str, str],
        startup: Startup = Startup(),
    ) -> None:
        if ":" not in job_function:
            raise WorkerPoolError(
                f"job function {job_function!r} must be written 'module:callable'"
            )
        if jobs < 1:
            raise WorkerPoolError(f"jobs must be at least 1, got {jobs}")
        self._job_function = job_function
        self._workdir = Path(workdir).resolve()
        self._jobs = jobs
        self._env = dict(env)
        self._startup = startup
        self._zygote: ZygoteProcess | None = None

    def __enter__(self) -> Self:
        self._workdir.mkdir(parents=True, exist_ok=True)
        self._zygote = ZygoteProcess.start(
            self._job_function, self._workdir, self._env, self._startup.warm_up,
            self._startup.preload, self._startup.preimports,
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._zygote is not None:
            self._zygote.stop()
            self._zygote = None

    @property
    def startup_seconds(self) -> float | None:
        """How long the zygote took to import and warm up (None until it reported ready)."""
        return self._zygote.ready_seconds if self._zygote else None

    def run(self, jobs: Sequence[Job], on_event: EventCallback,
            on_outcome: OutcomeCallback | None = None) -> list[JobOutcome]:
        """Run every job, at most `jobs` at once; outcomes come back in the order of `jobs`.

        `on_outcome` (optional) gets each job's outcome as soon as it is known, in the order
        the jobs finish: what a live view needs to show a verdict before the run ends.
        """
        if self._zygote is None:
            raise WorkerPoolError("WorkerPool.run was called outside its `with` block")
        _check_keys(jobs)
        run = _Run(self._zygote, self._workdir, self._jobs, on_event, on_outcome)
        return run.execute(jobs)


def _check_keys(jobs: Sequence[Job]) -> None:
    seen: set[str] = set()
    for job in jobs:
        if not _SAFE_KEY.fullmatch(job.key):
            raise WorkerPoolError(
                f"job key {job.key!r} is not file-name safe: use letters, digits, '_', '.', '-'"
            )
        if job.key in seen:
            raise WorkerPoolError(f"job key {job.key!r} appears twice; keys must be unique")
        seen.add(job.key)


# ---------------------------------------------------------------- one call of WorkerPool.run


@dataclass
class _Active:
    """A job handed to the zygote that has not been reported finished yet."""

    job: Job
    pid: int | None = None
    started: float | None = None
    kind: str | None = None  # set once the pool decided to kill it: "timeout" | "out-of-memory"
    detail: str = ""
    kill_at: float | None = None


class _Run:
    def __init__(
        self, zygote: ZygoteProcess, workdir: Path, jobs: int, on_event: EventCallback,
        on_outcome: OutcomeCallback | None = None,
    ) -> None:
        self.zygote = zygote
        self.workdir = workdir
        self.slots = jobs
        self.on_event = on_event
        self.on_outcome = on_outcome
        self.queue: deque[Job] = deque()
        self.active: dict[str, _Active] = {}
        self.outcomes: dict[str, JobOutcome] = {}

    def execute(self, jobs: Sequence[Job]) -> list[JobOutcome]:
        self.queue.extend(jobs)
        while self.queue or self.active:
            self._dispatch()
            self._handle(self.zygote.events(POLL_SECONDS))
            self._watch(time.monotonic())
            death = self.zygote.death()
            if death is not None:
                self._handle(self.zygote.events(0))  # what it said before dying still counts
                self._fail_unfinished(death)
        return [self.outcomes[job.key] for job in jobs]

    def _record(self, key: str, outcome: JobOutcome) -> None:
        self.outcomes[key] = outcome
        if self.on_outcome is not None:
            self.on_outcome(outcome)

    def _dispatch(self) -> None:
        while self.queue and len(self.active) < self.slots:
            job = self.queue.popleft()
            for stale in (result_path(self.workdir, job.key), log_path(self.workdir, job.key)):
                stale.unlink(missing_ok=True)
            path = job_path(self.workdir, job.key)
            path.write_bytes(pickle.dumps(job.payload))
            self.active[job.key] = _Active(job)
            self.zygote.send({"op": "run", "key": job.key, "job": str(path)})

    def _handle(self, events: list[Message]) -> None:
        for event in events:
            key = str(event.get("key"))
            if key not in self.active:
                continue
            kind = event.get("event")
            if kind == "started":
                self._started(self.active[key], int(event["pid"]))
            elif kind == "progress":
                self.on_event(key, str(event["step"]), float(event["t"]))
            elif kind == "exited":
                self._finish(self.active.pop(key), int(event["status"]))
            elif kind == "fork-failed":
                self._not_forked(self.active.pop(key), str(event["error"]))

    def _started(self, active: _Active, pid: int) -> None:
        active.pid = pid
        active.started = time.monotonic()
        self.zygote.live_children.add(pid)
        self.on_event(active.job.key, "started", 0.0)

    def _watch(self, now: float) -> None:
        for active in self.active.values():
            if active.pid is None or active.started is None:
                continue
            if active.kill_at is not None and now >= active.kill_at:
                kill_group(active.pid)
                active.kill_at = None
            if active.kind is None:
                self._enforce_limits(active, now)

    def _enforce_limits(self, active: _Active, now: float) -> None:
        job, pid = active.job, active.pid
        assert pid is not None
        assert active.started is not None
        if now - active.started > job.timeout_seconds:
            active.kind, active.detail = "timeout", f"exceeded {job.timeout_seconds:g} s"
            dump_stacks(pid)
            active.kill_at = now + STACK_DUMP_GRACE_SECONDS
            return
        rss = resident_set_mb(pid) if job.memory_limit_mb is not None else None
        if rss is not None and job.memory_limit_mb is not None and rss > job.memory_limit_mb:
            active.kind = "out-of-memory"
            active.detail = f"resident set {rss:.0f} MB > limit {job.memory_limit_mb} MB"
            kill_group(pid)

    def _finish(self, active: _Active, status: int) -> None:
        key = active.job.key
        seconds = time.monotonic() - active.started if active.started is not None else 0.0
        self.zygote.live_children.discard(active.pid or -1)
        if active.kind is not None:
            outcome = self._failed(key, active.kind, active.detail, seconds)
        elif status != 0:
            outcome = self._failed(key, "crash", describe_exit(status), seconds)
        else:
            outcome = self._collected(key, seconds)
        self._record(key, outcome)
        self.on_event(key, "finished" if outcome.failure is None else outcome.failure.kind, seconds)

    def _not_forked(self, active: _Active, error: str) -> None:
        key = active.job.key
        self._record(key, self._failed(
            key, "crash", f"the zygote could not fork a worker: {error}", 0.0
        ))
        self.on_event(key, "crash", 0.0)

    def _collected(self, key: str, seconds: float) -> JobOutcome:
        path = result_path(self.workdir, key)
        try:
            returned: JobReturn = pickle.loads(path.read_bytes())
        except FileNotFoundError:
            detail = (
                f"the worker exited with status 0 but left no result at {path.name} "
                "(os._exit in model code?)"
            )
            return self._failed(key, "crash", detail, seconds)
        if returned.error is not None:
            return self._failed(key, "crash", returned.error, seconds)
        return JobOutcome(key, returned.value, None, seconds, log_path(self.workdir, key))

    def _failed(self, key: str, kind: str, detail: str, seconds: float) -> JobOutcome:
        log = log_path(self.workdir, key)
        failure = WorkerFailure(key, kind, detail, read_log_tail(log), seconds)
        return JobOutcome(key, None, failure, seconds, log)

    def _fail_unfinished(self, death: str) -> None:
        now = time.monotonic()
        for key, active in list(self.active.items()):
            if active.pid is not None:
                kill_group(active.pid)  # orphaned: nobody else would stop it
            seconds = now - active.started if active.started is not None else 0.0
            self._record(key, self._orphaned(key, f"{death} while this model ran", seconds))
            self.on_event(key, "crash", seconds)
        for job in self.queue:
            self._record(job.key, self._orphaned(
                job.key, f"{death} before this model started", 0.0
            ))
            self.on_event(job.key, "crash", 0.0)
        self.active.clear()
        self.queue.clear()

    def _orphaned(self, key: str, detail: str, seconds: float) -> JobOutcome:
        outcome = self._failed(key, "crash", detail, seconds)
        if outcome.failure is not None and not outcome.failure.log_tail:
            failure = WorkerFailure(key, "crash", detail, read_log_tail(self.zygote.log), seconds)
            outcome = JobOutcome(key, None, failure, seconds, outcome.log_path)
        return outcome
