"""Faults in model code, through the real `onnx-parity check`: a segfault, a hang, a memory hog
and a model that prints its environment, next to models that must pass regardless.

Three CLI runs over tests/fixture_repo/configs/faults.toml, each with a GitHub token in the
command's environment:
  all      every model, --jobs 2 (the fault findings, nothing lost, no token anywhere)
  jobs-1   every model but the hog, --jobs 1 } same verdicts, same report.md; the hog is left
  jobs-2   every model but the hog, --jobs 2 } out because its message quotes a measured RSS
The two comparison runs run at the same time (it also shows two runs do not disturb each other).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixture_repo.harness import (
    FIXTURE_REPO,
    CliRun,
    copy_repo,
    line_of,
    run_cli,
    write_samples,
)

CONFIG = "configs/faults.toml"
FAULTS = FIXTURE_REPO / "models" / "faults.py"
MODELS = ("good-a", "segfault", "hang", "memory-hog", "prints-environment", "good-b")
PASSING = ("good-a", "prints-environment", "good-b")
# Distinctive values: any copy of them anywhere is a leak.
TOKEN = "ghs_onnxParityTestToken_7f3a9c1e5b"
INPUT_TOKEN = "ghp_onnxParityInputToken_0d2e4f6a8c"
CANARY = "onnx-parity-visible-canary-4242"
SECRETS_ENV = {"GITHUB_TOKEN": TOKEN, "INPUT_GITHUB-TOKEN": INPUT_TOKEN,
               "ONNX_PARITY_TEST_CANARY": CANARY}
# The module's fixture runs the faults three times, each waiting out a hang's timeout.
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class FaultRuns:
    all: CliRun
    jobs_1: CliRun
    jobs_2: CliRun


def _start(repo: Path, out: Path, jobs: int, models: tuple[str, ...]) -> subprocess.Popen[str]:
    selected = [arg for name in models for arg in ("--model", name)]
    command = [sys.executable, "-m", "onnx_parity", "check", "--config", CONFIG, "--jobs",
               str(jobs), "--out", str(out), *selected]
    return subprocess.Popen(command, cwd=repo, env={**os.environ, **SECRETS_ENV}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait(process: subprocess.Popen[str], out: Path) -> CliRun:
    stdout, stderr = process.communicate(timeout=600)
    return CliRun(process.returncode, stdout, stderr, 0.0, out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> FaultRuns:
    root = tmp_path_factory.mktemp("faults")
    repo = copy_repo(root / "repo")
    write_samples(repo)
    everything = run_cli("check", "--config", CONFIG, "--jobs", "2", cwd=repo, out=root / "all",
                         env=SECRETS_ENV)
    print(f"\nfault run (6 models, --jobs 2): {everything.seconds:.1f} s")
    without_hog = tuple(name for name in MODELS if name != "memory-hog")
    one = _start(repo, root / "jobs-1", 1, without_hog)
    two = _start(repo, root / "jobs-2", 2, without_hog)
    return FaultRuns(everything, _wait(one, root / "jobs-1"), _wait(two, root / "jobs-2"))


def _finding(run: CliRun, model: str, code: str) -> dict:
    findings = run.models()[model]["findings"]
    assert [f["code"] for f in findings] == [code], findings
    return findings[0]


def test_faulty_models_fail_the_run_without_stopping_it(runs: FaultRuns) -> None:
    done = runs.all
    assert done.code == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr == ""
    verdicts = {name: model["passed"] for name, model in done.models().items()}
    assert verdicts == {name: name in PASSING for name in MODELS}
    assert "3 of 6 models pass" in done.stdout


def _is_log_tail(evidence: str, log: str) -> bool:
    """Every evidence line is a line of the model's log (the condensed tail of it)."""
    lines = set(log.splitlines()) | {"  ..."}
    return bool(evidence.strip()) and all(line in lines for line in evidence.splitlines())


def _log(run: CliRun, model: str) -> str:
    assert run.out is not None
    return (run.out / f"{model}.log").read_text(encoding="utf-8")


def test_segfault_is_a_crash_with_the_last_log_lines(runs: FaultRuns) -> None:
    finding = _finding(runs.all, "segfault", "crash")
    assert "killed by signal 11 (SIGSEGV)" in finding["message"]
    assert "the other models are unaffected" in finding["message"]
    assert _is_log_tail(finding["evidence"], _log(runs.all, "segfault"))
    assert "Segmentation fault" in _log(runs.all, "segfault")  # faulthandler's stack
    # --debug shows tracebacks of internal errors only: the fix points at the log tail instead
    assert "`onnx-parity check --model NAME --jobs 1`" in finding["fix"]
    assert "--debug" not in finding["fix"]
    assert "evidence" in finding["fix"]


def test_hang_is_a_timeout_with_the_last_log_lines(runs: FaultRuns) -> None:
    finding = _finding(runs.all, "hang", "timeout")
    assert "exceeded 5 s" in finding["message"]
    assert _is_log_tail(finding["evidence"], _log(runs.all, "hang"))
    # The SIGUSR1 stack dump before the kill names the line the model was stuck on.
    assert f'File "models/faults.py", line {line_of(FAULTS, "time.sleep(3600)")} in forward' \
        in _log(runs.all, "hang")
    assert "timeout-seconds" in finding["fix"]


def test_memory_hog_is_out_of_memory_at_its_own_limit(runs: FaultRuns) -> None:
    finding = _finding(runs.all, "memory-hog", "out-of-memory")
    assert "> limit 900 MB" in finding["message"]  # the per-model limit, not the top-level 4096
    resident = int(finding["message"].split("resident set ")[1].split(" MB")[0])
    assert resident > 900
    assert "memory-limit-mb" in finding["fix"]


@pytest.mark.parametrize(("model", "text"), [("segfault", "ctypes.string_at(0)"),
                                             ("hang", "time.sleep(3600)")])
def test_crash_and_timeout_evidence_names_the_models_line(runs: FaultRuns, model: str,
                                                          text: str) -> None:
    evidence = runs.all.models()[model]["findings"][0].get("evidence", "")
    assert f'File "models/faults.py", line {line_of(FAULTS, text)}' in evidence, evidence


@pytest.mark.parametrize(("model", "printed"), [
    ("segfault", "about to crash in forward"), ("hang", "going to sleep in forward"),
    ("memory-hog", "allocating 1.25 GiB in forward")])
def test_what_a_model_printed_before_it_died_is_in_its_log_and_evidence(
        runs: FaultRuns, model: str, printed: str) -> None:
    assert printed in _log(runs.all, model)
    assert printed in runs.all.models()[model]["findings"][0].get("evidence", "")


def test_the_good_models_pass_next_to_the_faults(runs: FaultRuns) -> None:
    for name in PASSING:
        model = runs.all.models()[name]
        assert model["passed"], (name, model["findings"])
        assert model["findings"] == [], (name, model["findings"])
        assert {c["batch_size"] for c in model["comparisons"]} == {1, 3}
        assert model["max_abs_diff"] < 1e-5


def test_nothing_is_lost_every_model_in_every_output(runs: FaultRuns) -> None:
    out = runs.all.out
    assert out is not None
    assert [model["name"] for model in runs.all.report()["models"]] == list(MODELS)
    assert runs.all.report()["failed_models"] == ["segfault", "hang", "memory-hog"]
    markdown = (out / "report.md").read_text(encoding="utf-8")
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and "`" in line]
    assert [row.split("`")[1] for row in rows] == list(MODELS)
    for name in MODELS:
        assert (out / f"{name}.log").is_file()
        assert (out / f"{name}.parity.json").is_file()
        assert (out / f"{name}.onnx").is_file() == (name in PASSING)


def test_no_token_reaches_model_code_or_any_output(runs: FaultRuns) -> None:
    log = (runs.all.folder / "prints-environment.log").read_text(encoding="utf-8")
    assert CANARY in log  # the model did print its environment into its log
    for run in (runs.all, runs.jobs_1, runs.jobs_2):
        assert run.out is not None
        for path in run.out.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert TOKEN.encode() not in data, path
                assert INPUT_TOKEN.encode() not in data, path
        for stream in (run.stdout, run.stderr):
            assert TOKEN not in stream
            assert INPUT_TOKEN not in stream


def _verdicts(run: CliRun) -> dict[str, tuple[bool, list[str]]]:
    return {name: (model["passed"], [f["code"] for f in model["findings"]])
            for name, model in run.models().items()}


def test_jobs_1_and_jobs_2_give_identical_verdicts_and_report(runs: FaultRuns) -> None:
    assert (runs.jobs_1.code, runs.jobs_2.code) == (1, 1), (runs.jobs_1.stderr, runs.jobs_2.stderr)
    assert _verdicts(runs.jobs_1) == _verdicts(runs.jobs_2)
    assert _verdicts(runs.jobs_1) == {name: verdict for name, verdict in _verdicts(runs.all).items()
                                      if name != "memory-hog"}
    one, two = ((run.folder / "report.md").read_text(encoding="utf-8").splitlines()
                for run in (runs.jobs_1, runs.jobs_2))
    assert one[-1].startswith("<sub>")
    assert two[-1].startswith("<sub>")
    assert one[:-1] == two[:-1]
