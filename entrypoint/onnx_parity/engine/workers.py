"""Runs each model's job in its own forked worker, so a crash, a hang or a memory blow-up ends
only that model and the run still produces its report.

The pool starts one zygote process (see zygote.py) that imports torch and warms up once, then
forks a worker per job. This side never imports torch: it speaks JSON lines over pipes, counts
each model's time from the moment its worker started, watches the worker's resident set in
/proc, and kills a worker's process group by PID when it goes over either limit.
"""

from __future__ import annotations

import os
import pickle
import re
import select
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from onnx_parity.engine.zygote import JobReturn, kill_group, LineBuffer, encode, job_path, log_path, result_path

# How often timeouts and resident sets are checked; also the pool's reaction time.
POLL_SECONDS = 0.05
# A zygote that has not imported torch and warmed up by then is considered hung.
ZYGOTE_READY_TIMEOUT_SECONDS = 300.0
# Between the SIGUSR1 that makes a timed-out worker dump its stacks into its log and the SIGKILL.
STACK_DUMP_GRACE_SECONDS = 0.5
LOG_TAIL_LINES = 40
_LOG_TAIL_BYTES = 64 * 1024
_SAFE_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
STACK_DUMP_FRAMES = 12
DUMP_HEADER = re.compile(r"(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):")
_FRAME = re.compile(r'  File ".*", line \d+ in ')
_OUR_FRAME = re.compile(r'  File "(<frozen runpy>|.*[/\\]onnx_parity[/\\]engine[/\\]zygote\.py)"')

EventCallback = Callable[[str, str, float], None]


class WorkerPoolError(Exception):
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
class JobOutcome:
    key: str
    result: object | None  # what the job function returned (None on failure)
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
        warm_up: bool = True,
    ) -> None:
        if ":" not in job_function:
            raise WorkerPoolError(f"job function {job_function!r} must be written 'module:callable'")
        if jobs < 1:
            raise WorkerPoolError(f"jobs must be at least 1, got {jobs}")
        self._job_function = job_function
        self._workdir = Path(workdir).resolve()
        self._jobs = jobs
        self._env = dict(env)
        self._warm_up = warm_up
        self._zygote: _ZygoteProcess | None = None

    def __enter__(self) -> WorkerPool:
        self._workdir.mkdir(parents=True, exist_ok=True)
        self._zygote = _ZygoteProcess.start(self._job_function, self._workdir, self._env, self._warm_up)
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

    @property
    def zygote_pid(self) -> int | None:
        return self._zygote.pid if self._zygote else None

    def run(self, jobs: Sequence[Job], on_event: EventCallback) -> list[JobOutcome]:
        """Run every job, at most `jobs` at once; outcomes come back in the order of `jobs`."""
        if self._zygote is None:
            raise WorkerPoolError("WorkerPool.run was called outside its `with` block")
        _check_keys(jobs)
        return _Run(self._zygote, self._workdir, self._jobs, on_event).execute(jobs)


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


# ---------------------------------------------------------------- the zygote, seen from here


class _ZygoteProcess:
    """The zygote's process and pipes: send commands, receive events, notice its death."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.pid = process.pid
        self.log = log
        self.began = time.monotonic()
        self.ready_seconds: float | None = None
        self.killed_reason: str | None = None
        self.live_children: set[int] = set()
        self._events = LineBuffer()
        self._eof = False

    @classmethod
    def start(cls, job_function: str, workdir: Path, env: dict[str, str], warm_up: bool) -> _ZygoteProcess:
        log = workdir / "zygote.log"
        command = [sys.executable, "-m", "onnx_parity.engine.zygote", "--job-function", job_function]
        command += ["--workdir", str(workdir)] + ([] if warm_up else ["--no-warm-up"])
        with log.open("wb") as stderr:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=workdir,
                env=env,
                process_group=0,  # a Ctrl-C aimed at the CLI reaches the pool, which stops us cleanly
            )
        return cls(process, log)

    def send(self, command: dict[str, object]) -> bool:
        """False when the zygote can no longer be reached (it died)."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(encode(command))
            self.process.stdin.flush()
            return True
        except (BrokenPipeError, ValueError):
            return False

    def events(self, timeout: float) -> list[dict[str, object]]:
        """Events that arrived within `timeout`; the zygote's own `ready` is consumed here."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        if self._eof or not select.select([fd], [], [], timeout)[0]:
            if self._eof:
                time.sleep(timeout)
            return []
        data = os.read(fd, 65536)
        self._eof = not data
        events = self._events.feed(data)
        for event in events:
            if event.get("event") == "ready":
                self.ready_seconds = float(event["seconds"])  # type: ignore[arg-type]
        return [event for event in events if event.get("event") != "ready"]

    def death(self) -> str | None:
        """Why the zygote is gone (None while it lives); kills it if it never became ready."""
        if self.ready_seconds is None and time.monotonic() - self.began > ZYGOTE_READY_TIMEOUT_SECONDS:
            self.killed_reason = f"did not finish importing torch within {ZYGOTE_READY_TIMEOUT_SECONDS:g} s"
            _kill_pid(self.pid)
        status = self.process.poll()
        if status is None:
            return None
        how = self.killed_reason or describe_exit(status)
        return f"the worker zygote (pid {self.pid}) {how}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.send({"op": "stop"})
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _kill_pid(self.pid)
                self.process.wait()
        for pid in self.live_children:
            kill_group(pid)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except BrokenPipeError:
                    pass


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
    def __init__(self, zygote: _ZygoteProcess, workdir: Path, jobs: int, on_event: EventCallback) -> None:
        self.zygote = zygote
        self.workdir = workdir
        self.slots = jobs
        self.on_event = on_event
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

    def _dispatch(self) -> None:
        while self.queue and len(self.active) < self.slots:
            job = self.queue.popleft()
            for stale in (result_path(self.workdir, job.key), log_path(self.workdir, job.key)):
                stale.unlink(missing_ok=True)
            path = job_path(self.workdir, job.key)
            path.write_bytes(pickle.dumps(job.payload))
            self.active[job.key] = _Active(job)
            self.zygote.send({"op": "run", "key": job.key, "job": str(path)})

    def _handle(self, events: list[dict[str, object]]) -> None:
        for event in events:
            key = str(event.get("key"))
            if key not in self.active:
                continue
            kind = event.get("event")
            if kind == "started":
                self._started(self.active[key], int(event["pid"]))  # type: ignore[call-overload]
            elif kind == "progress":
                self.on_event(key, str(event["step"]), float(event["t"]))  # type: ignore[arg-type]
            elif kind == "exited":
                self._finish(self.active.pop(key), int(event["status"]))  # type: ignore[call-overload]
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
        assert pid is not None and active.started is not None
        if now - active.started > job.timeout_seconds:
            active.kind, active.detail = "timeout", f"exceeded {job.timeout_seconds:g} s"
            _dump_stacks(pid)
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
        self.outcomes[key] = outcome
        self.on_event(key, "finished" if outcome.failure is None else outcome.failure.kind, seconds)

    def _not_forked(self, active: _Active, error: str) -> None:
        key = active.job.key
        self.outcomes[key] = self._failed(key, "crash", f"the zygote could not fork a worker: {error}", 0.0)
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
            self.outcomes[key] = self._orphaned(key, f"{death} while this model ran", seconds)
            self.on_event(key, "crash", seconds)
        for job in self.queue:
            self.outcomes[job.key] = self._orphaned(job.key, f"{death} before this model started", 0.0)
            self.on_event(job.key, "crash", 0.0)
        self.active.clear()
        self.queue.clear()

    def _orphaned(self, key: str, detail: str, seconds: float) -> JobOutcome:
        outcome = self._failed(key, "crash", detail, seconds)
        if outcome.failure is not None and not outcome.failure.log_tail:
            failure = WorkerFailure(key, "crash", detail, read_log_tail(self.zygote.log), seconds)
            outcome = JobOutcome(key, None, failure, seconds, outcome.log_path)
        return outcome


# ---------------------------------------------------------------- processes and logs


def describe_exit(status: int) -> str:
    """`status` as subprocess reports it: an exit code, or minus the signal number."""
    if status >= 0:
        return f"exited with status {status}"
    number = -status
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    text = f"killed by signal {number} ({name})"
    if number == signal.SIGKILL:
        text += ", not sent by onnx-parity: most likely the kernel's out-of-memory killer"
    return text


def resident_set_mb(pid: int) -> float | None:
    """VmRSS of `pid` in MB (None if it is gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def read_log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES))
            text = log.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(condense_stack_dumps(_ANSI.sub("", text).splitlines())[-lines:])


def condense_stack_dumps(lines: list[str]) -> list[str]:
    """Shorten faulthandler dumps (timeouts, crashes) to what locates the problem.

    Dumps list the innermost call first and end with the worker's own machinery, which a log
    tail would show instead of the model's line: drop our frames, keep each thread's first
    STACK_DUMP_FRAMES frames.
    """
    kept: list[str] = []
    frames: int | None = None  # frames seen in the current dump block, None outside one
    for line in lines:
        if DUMP_HEADER.match(line):
            frames = 0
        elif frames is not None and _FRAME.match(line):
            if not _OUR_FRAME.match(line):
                frames += 1
                if frames <= STACK_DUMP_FRAMES:
                    kept.append(line)
                elif frames == STACK_DUMP_FRAMES + 1:
                    kept.append("  ...")
            continue
        else:
            frames = None
        kept.append(line)
    return kept


def _dump_stacks(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGUSR1)  # faulthandler in the worker writes every thread's stack
    except ProcessLookupError:
        pass




def _kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
