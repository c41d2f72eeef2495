"""`onnx-parity` as a user runs it: a real subprocess, its exit code, stdout, stderr and files.

Two runs start workers (the bundled example, a passing-only configuration); the rest never
reach a worker and take a fraction of a second each.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from regenerate import console_verdict, readme_console_block

from ci_schemas import junit_errors, sarif_errors
from fixture_repo.harness import CliRun, copy_repo, line_of, run_cli, write_samples
from onnx_parity import __version__
from onnx_parity.settings.loading import MODEL_KEYS

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = REPO_ROOT / "examples" / "seed-failures"
EXPECTED_LOCAL = REPO_ROOT / "tests" / "expected" / "seed-failures.local.md"
README = REPO_ROOT / "README.md"
# A figure as the report prints it (1.01e+02, 2.98e-08); those below NOISE are float rounding,
# which differs by CPU (AVX-512 or not) at the last digits, and are compared as "noise" only.
FIGURE = re.compile(r"\b\d\.\d\de[+-]\d\d\b")
NOISE = 1e-4
LOG10 = re.compile(r"-?\d+(?:\.\d+)?")
# How close a model came to its tolerance follows the figures, rounding noise included; so do
# the counts of elements outside it on a line whose figures are noise.
SHARE = re.compile(r"(<?\d+% of|[\d.e+]+× ) ?tolerance")
COUNT = re.compile(r"\b\d+ of \d+( elements)? \(\d+\.\d%\)")
# A bug planted in the product at run time: the only way to see exit 3 that no fix removes.
INTERNAL_ERROR = (
    "-c",
    ("import sys, onnx_parity.settings.loading as loading\n"
    "def broken(*args, **kwargs):\n"
    "    raise RuntimeError('planted internal error')\n"
    "loading.load_settings = broken\n"
    "from onnx_parity.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"),
)


def test_help_answers_and_its_wall_time_is_printed(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    top = run_cli("--help", cwd=tmp_path)
    check = run_cli("check", "--help", cwd=tmp_path)
    assert top.code == check.code == 0
    assert top.stderr == check.stderr == ""
    assert all(command in top.stdout for command in ("check", "action", "comment"))
    for option in ("--repo", "--config", "--out", "--model", "--jobs", "--debug"):
        assert option in check.stdout
    with capsys.disabled():  # measured, not asserted: the machine is shared
        print(f"\n`onnx-parity --help`: {top.seconds:.2f} s wall time; "
              f"`check --help`: {check.seconds:.2f} s")


def test_version_names_the_package_version(tmp_path: Path) -> None:
    done = run_cli("--version", cwd=tmp_path)
    assert done.code == 0
    assert done.stdout.strip() == f"onnx-parity {__version__}"


def test_exit_0_when_every_model_passes(tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    write_samples(repo)
    done = run_cli("check", "--config", "configs/passing.toml", "--jobs", "1", cwd=repo,
                   out=tmp_path / "out")
    assert done.code == 0, done.stderr
    assert done.stderr == ""
    assert "1 of 1 models pass" in done.stdout
    assert done.report()["passed"] is True
    assert done.report()["failed_models"] == []
    assert (tmp_path / "out" / "good.onnx").is_file()


def test_exit_2_for_a_configuration_mistake_without_starting_a_worker(tmp_path: Path) -> None:
    (tmp_path / "onnx-parity.toml").write_text('[[model]]\nname = "m"\nfactory = "m:f"\n'
                                               'inputs = { x = "x.npy" }\natoll = 1\n')
    done = run_cli("check", cwd=tmp_path, out=tmp_path / "out")
    assert done.code == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    # The valid keys follow the schema's declarations (settings/schema.py), in their order.
    assert done.stderr.strip() == (
        'onnx-parity: onnx-parity.toml: model "m": key "atoll": unknown key; did you mean '
        f'"atol"? Valid keys here: {", ".join(MODEL_KEYS)}.')
    assert ", ".join(MODEL_KEYS).startswith(
        "name, factory, transformers, weights, inputs, forward-kwargs, outputs, dynamic-axes, "
        "batch-axis")


def test_an_output_folder_that_cannot_be_written_stops_before_any_model_runs(
        tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    write_samples(repo)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    done = run_cli("check", "--config", "configs/passing.toml", cwd=repo, out=blocked)
    assert done.code == 2
    assert "Traceback" not in done.stderr
    assert "cannot write into the output folder" in done.stderr
    assert "Fix: pass a writable folder with --out" in done.stderr
    assert done.stdout == ""  # no model started: nothing measured was thrown away


def test_exit_2_for_a_bad_command_line(tmp_path: Path) -> None:
    done = run_cli("check", "--jobs", "many", cwd=tmp_path)
    assert done.code == 2
    assert "--jobs: invalid int value: 'many'" in done.stderr
    assert "Traceback" not in done.stderr


def test_internal_error_is_exit_3_and_shows_a_traceback_only_with_debug(tmp_path: Path) -> None:
    plain = run_cli("check", cwd=tmp_path, python=INTERNAL_ERROR)
    debug = run_cli("check", "--debug", cwd=tmp_path, python=INTERNAL_ERROR)
    assert plain.code == debug.code == 3
    expected = ("onnx-parity: internal error: RuntimeError: planted internal error. Re-run with "
                "--debug for the traceback and please report it.")
    assert plain.stderr.strip() == expected
    assert "Traceback (most recent call last):" in debug.stderr
    assert 'in broken\nRuntimeError: planted internal error' in debug.stderr
    assert debug.stderr.strip().endswith(expected)


def test_debug_shows_no_traceback_for_an_expected_mistake(tmp_path: Path) -> None:
    done = run_cli("check", "--debug", "--repo", "no-such-folder", cwd=tmp_path)
    assert done.code == 2
    assert done.stderr.strip() == ("onnx-parity: --repo no-such-folder: no such folder. Fix: pass "
                                   "the repository root.")


# ---------------------------------------------------------------------------------------------
# The bundled example: the README's promise, checked through the CLI


# The whole bundled example (6 models on 2 workers, one localised): 7 s of CPU, 25 s on a shared
# machine, so the tests reading it are `slow`, as pyproject.toml's marker says; CI runs them.
@pytest.fixture(scope="module")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    # A copy: importing the example's models must not leave __pycache__ in the working tree.
    root = tmp_path_factory.mktemp("example")
    repo = root / "seed-failures"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    return run_cli("check", "--repo", str(repo), "--jobs", "2", cwd=root, out=root / "out")


def _errors(model: dict) -> list[dict]:
    return [finding for finding in model["findings"] if finding["severity"] == "error"]


@pytest.mark.slow
def test_example_exits_1_with_exactly_the_documented_verdicts(example_run: CliRun) -> None:
    assert example_run.code == 1, example_run.stderr
    assert example_run.stderr == ""
    verdicts = {name: model["passed"] for name, model in example_run.models().items()}
    assert verdicts == {"small-cnn": True, "small-cnn-frozen": False, "branchy": False,
                        "spectrum": True, "spectrum-torchscript": False,
                        "spectral-head": False}
    assert "2 of 6 models pass" in example_run.stdout
    assert example_run.report()["config"] == "onnx-parity.toml"


@pytest.mark.slow
def test_example_frozen_cnn_fails_on_frozen_dimension_only(example_run: CliRun) -> None:
    model = example_run.models()["small-cnn-frozen"]
    assert {f["code"] for f in _errors(model)} == {"frozen-dimension"}
    assert any('"input" axis 0' in f["message"] for f in _errors(model))


@pytest.mark.slow
def test_example_branchy_fails_at_the_if_line(example_run: CliRun) -> None:
    model = example_run.models()["branchy"]
    branch = [f for f in _errors(model) if f["code"] == "data-dependent-branch"]
    assert branch, model["findings"]
    line = line_of(EXAMPLE / "models" / "branchy.py", "if x.mean() > 0:")
    assert (branch[0]["file"], branch[0]["line"]) == ("models/branchy.py", line)
    assert branch[0]["details"]["source"] == "if x.mean() > 0:"


@pytest.mark.slow
def test_example_torchscript_spectrum_names_the_unsupported_operator(example_run: CliRun) -> None:
    model = example_run.models()["spectrum-torchscript"]
    assert {f["code"] for f in _errors(model)} == {"unsupported-operator"}
    assert "aten::fft_rfft" in _errors(model)[0]["message"]


@pytest.mark.slow
def test_example_passing_models_pass_clean(example_run: CliRun) -> None:
    for name in ("small-cnn", "spectrum"):
        model = example_run.models()[name]
        assert _errors(model) == []
        assert model["max_abs_diff"] < model["atol"]
        assert {c["batch_size"] for c in model["comparisons"]} == {1, 8}


@pytest.mark.slow
def test_example_writes_every_output_file(example_run: CliRun) -> None:
    out = example_run.out
    assert out is not None
    for name in example_run.models():
        assert (out / f"{name}.log").is_file()
        assert (out / f"{name}.parity.json").is_file()
    exported = {path.stem for path in out.glob("*.onnx")}
    assert exported == {"small-cnn", "small-cnn-frozen", "branchy", "spectrum", "spectral-head"}
    # only the model whose mismatch was localised pays for, and gets, a divergence record
    assert [path.name for path in out.glob("*.divergence.json")] == ["spectral-head.divergence.json"]
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert markdown.startswith("### ❌ ONNX parity: 2 of 6 models pass (4 failing)")


@pytest.mark.slow
def test_example_spectral_head_diverges_first_at_the_rfft_line(example_run: CliRun) -> None:
    model = example_run.models()["spectral-head"]
    assert {f["code"] for f in _errors(model)} == {"parity-mismatch"}
    finding = _errors(model)[0]
    line = line_of(EXAMPLE / "models" / "spectral.py", "torch.fft.rfft(bands).abs()")
    assert (finding["file"], finding["line"]) == ("models/spectral.py", line)
    first = finding["details"]["first_divergence"]
    assert (first["op"], first["line"], first["runtime_optimization"]) == (
        "aten._fft_r2c.default", line, "disabled")
    record = json.loads((example_run.folder / "spectral-head.divergence.json").read_text())
    assert record["first_divergence"] == first["node"] == "_fft_r2c"
    conv = next(node for node in record["nodes"] if node["op"] == "aten.conv1d.default")
    assert conv["inside"]
    assert conv["max_abs_diff"] < model["atol"] < first["max_abs_diff"]
    assert f"spectral-head: diverges first at models/spectral.py:{line}" in example_run.stdout


@pytest.mark.slow
def test_example_writes_sarif_and_junit_that_validate(example_run: CliRun) -> None:
    out = example_run.out
    assert out is not None
    sarif = json.loads((out / "report.sarif").read_text(encoding="utf-8"))
    assert sarif_errors(sarif) == []
    located = {(f["code"], f["file"], f["line"]) for m in example_run.models().values()
               for f in m["findings"] if f.get("file") and f.get("line")}
    results = {(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                r["locations"][0]["physicalLocation"]["region"]["startLine"])
               for r in sarif["runs"][0]["results"]}
    assert results == located
    assert ("data-dependent-branch", "models/branchy.py", 9) in results
    assert junit_errors(out / "report.junit.xml") == []
    junit = (out / "report.junit.xml").read_text(encoding="utf-8")
    assert '<testsuite name="onnx-parity: onnx-parity.toml" tests="6" failures="4"' in junit
    for name, model in example_run.models().items():  # each case's time: the worker's
        assert f'<testcase name="{name}" classname="onnx-parity.toml" time="{model["seconds"]:.3f}"' in junit


def _comparable(markdown: str) -> list[str]:
    """The report without its footer line, rounding-level figures masked."""
    masked = FIGURE.sub(lambda m: "<noise>" if float(m.group()) < NOISE else m.group(), markdown)
    lines = SHARE.sub("<share>", masked).splitlines()[:-1]
    return [_masked_bars(COUNT.sub("<count>", line) if "<noise>" in line else line)
            for line in lines]


def _masked_bars(line: str) -> str:
    """The drift chart's bars are log10 of the same figures: below log10(NOISE) they are
    rounding noise too (FFT kernels differ by CPU: -5.51 on one machine is -5.48 on another)."""
    if not line.startswith("    bar ["):
        return line
    return LOG10.sub(lambda m: "<noise>" if float(m.group()) < math.log10(NOISE) else m.group(),
                     line)


@pytest.mark.slow
def test_example_report_is_the_documented_comment(example_run: CliRun) -> None:
    """tests/expected/seed-failures.local.md is the comment the README shows: a real run of the
    example must produce it, so an engine message cannot change and leave it stale. Refresh it
    with `python tests/expected/regenerate.py --from-example`."""
    actual = (example_run.folder / "report.md").read_text(encoding="utf-8")
    expected = EXPECTED_LOCAL.read_text(encoding="utf-8")
    assert actual.splitlines()[-1].startswith("<sub>onnx-parity ")  # the footer: versions
    assert _comparable(actual) == _comparable(expected)


MEMORY = re.compile(r"\b\d+ [MG]B\b")
REPORT_LINE = re.compile(r"^report: .*report\.md$")


def _console_comparable(lines: list[str]) -> list[str]:
    """The console's verdict with what a machine decides masked: rounding-level figures, the
    workers' peak memory and the output folder's path (the README's run uses the default)."""
    masked = [FIGURE.sub(lambda m: "<noise>" if float(m.group()) < NOISE else m.group(), line)
              for line in lines]
    return [REPORT_LINE.sub("report: <out>/report.md", MEMORY.sub("<rss>", line))
            for line in masked]


@pytest.mark.slow
def test_readme_console_block_is_what_the_example_prints(example_run: CliRun) -> None:
    """README.md's console block is a run of the example (`python tests/expected/regenerate.py
    --from-example` rewrites it): its rows, verdicts, findings and figures above rounding noise
    are what a real run prints, so a change of the console cannot leave the README stale."""
    readme = README.read_text(encoding="utf-8").splitlines()
    start, end = readme_console_block("\n".join(readme))
    assert _console_comparable(readme[start:end]) == \
        _console_comparable(console_verdict(example_run.stdout))
