"""WorkerPool through real processes: real crashes, hangs, memory growth and torch state.

Job functions live in tests/worker_jobs.py; the zygote finds them through PYTHONPATH.
Two warm pools (jobs=1 and jobs=2) are shared by the module: a zygote warm-up costs seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import worker_jobs
from onnx_parity.pipeline.torch_pool import Job, JobOutcome, WorkerPoolError
from onnx_parity.pipeline.torch_pool import TorchWorkerPool as WorkerPool

TESTS = Path(__file__).resolve().parent


def make_job(
    key: str, name: str, timeout: float = 60.0, memory_mb: int | None = None, **payload: object
) -> Job:
    return Job(key, {"job": name, **payload}, timeout, memory_mb)


def pool_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }


class Events:
    """Records on_event calls with the wall time they arrived."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.seen: list[tuple[str, str, float, float]] = []

    def __call__(self, key: str, step: str, t: float) -> None:
        self.seen.append((key, step, t, time.monotonic() - self.began))

    def steps(self, key: str) -> list[str]:
        return [step for seen_key, step, _, _ in self.seen if seen_key == key]

    def arrival(self, key: str, step: str) -> float:
        return next(
            at for seen_key, seen_step, _, at in self.seen if (seen_key, seen_step) == (key, step)
        )


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, WorkerPool]]:
    # The jobs=1 pool skips the warm-up export: it halves the fixture's cost on two cores, and
    # comparing it with the warm jobs=2 pool shows the warm-up leaves no trace in results.
    one = WorkerPool(
        worker_jobs.WORKER_JOBS, tmp_path_factory.mktemp("jobs1"), 1, pool_env(), warm_up=False
    )
    two = WorkerPool(worker_jobs.WORKER_JOBS, tmp_path_factory.mktemp("jobs2"), 2, pool_env())
    with one, two:  # both zygotes start at the same time
        yield {1: one, 2: two}


def run(pool: WorkerPool, jobs: list[Job]) -> tuple[list[JobOutcome], Events]:
    events = Events()
    return pool.run(jobs, events), events


@pytest.mark.slow
def test_segfault_is_a_crash_naming_the_signal_with_what_was_printed_before(
    pools: dict[int, WorkerPool],
) -> None:
    (outcome,) = run(pools[2], [make_job("segv", "segfault")])[0]
    assert outcome.result is None
    assert outcome.failure is not None
    assert outcome.failure.kind == "crash"
    assert outcome.failure.detail == "killed by signal 11 (SIGSEGV)"
    assert "about to read address 0" in outcome.failure.log_tail
    assert "Segmentation fault" in outcome.failure.log_tail  # faulthandler's Python stack
    assert "in segfault" in outcome.failure.log_tail
    assert "zygote.py" not in outcome.failure.log_tail


def test_abort_is_a_crash(pools: dict[int, WorkerPool]) -> None:
    (outcome,) = run(pools[2], [make_job("abort", "abort")])[0]
    assert outcome.failure is not None
    assert outcome.failure.kind == "crash"
    assert outcome.failure.detail == "killed by signal 6 (SIGABRT)"
    assert "about to abort" in outcome.failure.log_tail


@pytest.mark.slow
def test_hang_times_out_with_its_stack_in_the_log_and_the_others_finish(
    pools: dict[int, WorkerPool],
) -> None:
    jobs = [make_job("hang", "hang_forever", timeout=3), make_job("quick1", "echo", value=1)]
    jobs.append(make_job("quick2", "echo", value=2))
    outcomes, events = run(pools[2], jobs)
    hang = outcomes[0]
    assert hang.failure is not None
    assert hang.failure.kind == "timeout"
    assert hang.failure.detail == "exceeded 3 s"
    assert 3.0 <= hang.seconds < 6.0
    # The SIGUSR1 stack dump before the kill, cut to the innermost frames, without our own.
    assert "most recent call first" in hang.failure.log_tail
    assert re.search(r"line \d+ in _stuck_here\n.*line \d+ in _descend\n", hang.failure.log_tail)
    assert (
        "  ..." in hang.failure.log_tail.splitlines()
    )
    assert (
        "zygote.py" not in hang.failure.log_tail
    )
    assert [outcome.result["value"] for outcome in outcomes[1:]] == [1, 2]
    assert events.steps("hang") == ["started", "hanging", "timeout"]


def test_memory_growth_over_the_limit_is_killed(pools: dict[int, WorkerPool]) -> None:
    jobs = [
        make_job("big", "grow_memory", memory_mb=800, mb=1500),
        make_job("small", "grow_memory", memory_mb=800, mb=100),
    ]
    big, small = run(pools[2], jobs)[0]
    assert big.failure is not None
    assert big.failure.kind == "out-of-memory"
    match = re.fullmatch(r"resident set (\d+) MB > limit 800 MB", big.failure.detail)
    assert match
    assert 800 < int(match.group(1)) <= 1500 + 800
    assert small.failure is None
    assert small.result == 100 * 256


def test_native_writes_land_in_the_model_log_not_in_our_stderr(
    pools: dict[int, WorkerPool], capfd: pytest.CaptureFixture[str]
) -> None:
    (outcome,) = run(pools[2], [make_job("native", "native_stderr", marker="NATIVE-MARKER-41")])[0]
    assert outcome.failure is None
    assert "Add" in str(outcome.result)  # onnxruntime did fail, in the worker
    log = outcome.log_path.read_text()
    assert "NATIVE-MARKER-41 from os.write" in log
    assert re.search(r"\[E:onnxruntime:.*Non-zero status code returned while running Add node", log)
    captured = capfd.readouterr()
    assert "NATIVE-MARKER-41" not in captured.err + captured.out
    assert "onnxruntime" not in captured.err
    assert "NATIVE-MARKER-41" not in (outcome.log_path.parent / "zygote.log").read_text()


@pytest.mark.parametrize("jobs_at_once", [1, 2])
def test_a_model_cannot_change_the_next_models_process(
    pools: dict[int, WorkerPool], jobs_at_once: int
) -> None:
    jobs = [make_job("before", "report_state"), make_job("vandal", "change_global_state")]
    jobs.append(make_job("after", "report_state"))
    before, vandal, after = (outcome.result for outcome in run(pools[jobs_at_once], jobs)[0])
    assert isinstance(vandal, dict)
    assert isinstance(before, dict)
    # The vandal's changes took effect in its own process ...
    assert vandal["initial_seed"] == 123
    assert vandal["num_threads"] == 1
    assert vandal["default_dtype"] == "torch.float64"
    assert vandal["injected_module"]
    assert vandal["model_code_on_path"]
    assert not vandal["relu_is_torch"]
    # ... and none of them reached the model after it, which starts exactly as the one before.
    assert after == before
    assert before["default_dtype"] == "torch.float32"
    assert before["relu_is_torch"]
    assert before["initial_seed"] != 123
    assert not before["injected_module"]
    assert before["num_threads"] == min(os.cpu_count() or 1, before["num_threads"])


def test_results_do_not_depend_on_how_many_run_at_once(pools: dict[int, WorkerPool]) -> None:
    jobs = [make_job(f"state{i}", "report_state") for i in range(3)] + [
        make_job("value", "echo", value=7)
    ]
    one = [outcome.result for outcome in run(pools[1], jobs)[0]]
    two = [outcome.result for outcome in run(pools[2], jobs)[0]]
    # torch picks a random seed at import, so each zygote has its own unseeded draw (the model
    # job seeds itself); everything else, seeded draws included, must match.
    unseeded = ("pid", "memory", "initial_seed", "draw")
    strip = lambda result: {k: v for k, v in result.items() if k not in unseeded}  # noqa: E731
    assert [strip(result) for result in one] == [strip(result) for result in two]
    assert one[0] == one[1] == one[2]
    assert two[0] == two[1] == two[2]


def test_outcomes_keep_the_order_of_the_jobs_not_of_finishing(pools: dict[int, WorkerPool]) -> None:
    jobs = [make_job("slow", "sleep", seconds=1.5), make_job("fast", "echo", value="f")]
    outcomes, events = run(pools[2], jobs)
    assert [outcome.key for outcome in outcomes] == ["slow", "fast"]
    assert events.arrival("fast", "finished") < events.arrival("slow", "finished")
    assert outcomes[0].result == 1.5
    assert outcomes[1].result["value"] == "f"


@pytest.mark.slow
def test_timeout_counts_from_the_models_own_start(pools: dict[int, WorkerPool]) -> None:
    # jobs=1: "late" waits ~3 s for "first", then still gets its full 3 s.
    jobs = [
        make_job("first", "sleep", seconds=3.0),
        make_job("late", "sleep", timeout=3.0, seconds=1.5),
    ]
    outcomes, events = run(pools[1], jobs)
    assert [outcome.failure for outcome in outcomes] == [None, None]
    assert events.arrival("late", "started") >= 3.0
    assert events.arrival("late", "finished") > jobs[1].timeout_seconds + 1.0


def test_exceptions_missing_results_and_bad_keys(pools: dict[int, WorkerPool]) -> None:
    jobs = [make_job("raises", "raise_error"), make_job("vanish", "exit_without_result")]
    raised, vanished = run(pools[2], jobs)[0]
    assert raised.failure is not None
    assert raised.failure.kind == "crash"
    assert raised.failure.detail == "the job raised ValueError: the model file has a typo"
    assert "Traceback" in raised.failure.log_tail
    assert "about to raise" in raised.failure.log_tail
    assert vanished.failure is not None
    assert "left no result" in vanished.failure.detail
    with pytest.raises(WorkerPoolError, match="appears twice"):
        pools[2].run([make_job("same", "echo"), make_job("same", "echo")], Events())
    with pytest.raises(WorkerPoolError, match="not file-name safe"):
        pools[2].run([make_job("../escape", "echo")], Events())


@pytest.mark.slow
def test_a_dead_zygote_fails_every_unfinished_job_and_stops_their_workers(tmp_path: Path) -> None:
    jobs = [make_job("killer", "kill_zygote", after=1.0), make_job("sleeper", "sleep", seconds=30)]
    jobs.append(make_job("queued", "echo"))
    with WorkerPool(worker_jobs.WORKER_JOBS, tmp_path, 2, pool_env(), warm_up=False) as pool:
        outcomes, events = run(pool, jobs)
    details = [outcome.failure.detail for outcome in outcomes if outcome.failure]
    zygote = r"the worker zygote \(pid \d+\) killed by signal 9 \(SIGKILL\)"
    assert re.fullmatch(zygote + ".* while this model ran", details[0])
    assert re.fullmatch(zygote + ".* while this model ran", details[1])
    assert re.fullmatch(zygote + ".* before this model started", details[2])
    sleeper = int(
        next(step for step in events.steps("sleeper") if step.startswith("pid ")).split()[1]
    )
    assert _gone_or_zombie(sleeper)


def _gone_or_zombie(pid: int) -> bool:
    time.sleep(0.2)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def test_the_pool_side_does_not_import_torch() -> None:
    code = "import sys, onnx_parity.pipeline.torch_pool; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_overhead_and_warm_export_figures(pools: dict[int, WorkerPool]) -> None:
    """Prints the figures quoted in the README (run with -s to see them)."""
    pool = pools[2]
    count = 10
    began = time.perf_counter()
    for index in range(count):
        worker_jobs.echo({"value": index}, Path("."), lambda _step: None)
    in_process = (time.perf_counter() - began) / count
    began = time.perf_counter()
    outcomes = [
        run(pool, [make_job(f"echo{index}", "echo", value=index)])[0][0] for index in range(count)
    ]
    per_job = (time.perf_counter() - began) / count
    (cnn,), _ = run(pool, [make_job("cnn", "export_small_cnn")])
    assert all(outcome.failure is None for outcome in outcomes)
    assert cnn.failure is None
    export, fresh = cnn.result, outcomes[0].result
    assert export["max_abs_diff"] < 1e-4
    assert per_job < 1.0
    assert pool.startup_seconds is not None
    print(
        f"\nzygote import + warm-up: {pool.startup_seconds:.2f} s"
        f"\ntrivial job: {per_job * 1000:.0f} ms per job through the pool, "
        f"{in_process * 1e6:.0f} us in-process"
        f"\nfresh worker memory: {fresh['memory']}"
        f"\nsmall CNN dynamo export in a worker: {export['export_seconds']:.2f} s, "
        f"whole job {cnn.seconds:.2f} s, memory after: {export['memory']}"
    )
