"""The result cache through the real CLI: hits, misses after each kind of change, corruption,
concurrent writers, and a fully cached run that never imports torch.

One warm-up run fills a cache for configs/cache.toml (three models in three modules); each test
copies the repository and that cache, changes one thing and runs `onnx-parity check --cache`
again. Fingerprints hold paths relative to the repository, so a copied cache still matches.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from junitparser import JUnitXml, Skipped

from fixture_repo.harness import CliRun, copy_repo, run_cli, write_samples
from onnx_parity.pipeline.cache.fingerprint import environment, fingerprint_key
from onnx_parity.settings.loading import load_settings

CONFIG = "configs/cache.toml"
MODELS = ("alpha", "good", "drifting")
# Runs main() in a fresh interpreter and says whether torch was imported by the end.
TORCH_PROBE = ("-c", "import sys\nfrom onnx_parity.cli import main\ncode = main(sys.argv[1:])\n"
               "print('torch imported:', 'torch' in sys.modules)\nsys.exit(code)\n")
# Each test runs the cache's repository through the command line, with workers, more than once.
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Warm:
    repo: Path
    cache: Path
    first: CliRun


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Warm:
    root = tmp_path_factory.mktemp("warm")
    repo = copy_repo(root / "repo")
    write_samples(repo)
    first = check(repo, root / "cache", root / "out")
    assert first.code == 0, first.stderr
    assert ran(first) == set(MODELS)
    return Warm(repo, root / "cache", first)


def check(repo: Path, cache: Path, out: Path, *extra: str,
          python: tuple[str, ...] = ("-m", "onnx_parity")) -> CliRun:
    # One worker at a time: two at once each record the files the other opens (the watch for
    # native reads cannot tell processes apart), and these tests count exactly who ran again.
    return run_cli("check", "--config", CONFIG, "--cache", str(cache), "--jobs", "1", *extra,
                   cwd=repo, out=out, python=python)


def ran(done: CliRun) -> set[str]:
    """The models a worker started for (the others came from the cache)."""
    return {name for name in MODELS if f"] {name}: started" in done.stdout}


def reused(done: CliRun) -> set[str]:
    return {name for name in MODELS if f"] {name}: cached" in done.stdout}


def created(entry: Path) -> str:
    return str(json.loads(entry.read_text(encoding="utf-8"))["provenance"]["created"])


def copied(warm: Warm, tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    shutil.copytree(warm.repo, repo)
    shutil.copytree(warm.cache, tmp_path / "cache")
    return repo, tmp_path / "cache"


def test_a_second_run_reuses_every_result_and_never_imports_torch(warm: Warm,
                                                                  tmp_path: Path) -> None:
    repo, cache = copied(warm, tmp_path)
    again = check(repo, cache, tmp_path / "out", python=TORCH_PROBE)
    assert again.code == 0, again.stderr
    assert "torch imported: False" in again.stdout
    assert reused(again) == set(MODELS)
    assert ran(again) == set()
    report = again.report()
    for model in report["models"]:
        assert model["cached"] is True
        assert model["cached_from"]["created"].endswith("Z")
    before = {m["name"]: m for m in warm.first.report()["models"]}
    for name, model in again.models().items():
        assert model["findings"] == before[name]["findings"]
        assert model["comparisons"] == before[name]["comparisons"]
        for suffix in (".onnx", ".parity.json", ".log"):
            assert (again.folder / f"{name}{suffix}").read_bytes() == \
                (warm.first.folder / f"{name}{suffix}").read_bytes(), suffix
    markdown = (again.folder / "report.md").read_text(encoding="utf-8")
    assert "| `alpha` ♻️ |" in markdown
    assert "♻️ 3 of 3 models unchanged since an earlier run" in markdown
    [suite] = list(JUnitXml.fromfile(str(again.folder / "report.junit.xml")))
    assert (suite.tests, suite.failures, suite.skipped) == (3, 0, 3)  # not checked by this run
    for case in suite:
        [skipped] = case.result
        assert isinstance(skipped, Skipped)
        assert skipped.message.startswith("not re-run")
    [first] = list(JUnitXml.fromfile(str(warm.first.folder / "report.junit.xml")))
    assert (first.tests, first.skipped) == (3, 0)


def test_a_cached_result_hands_back_its_deployment_variants_files(warm: Warm,
                                                                  tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(warm.repo, repo)
    config = repo / CONFIG
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('name = "good"', 'name = "good"\nvariants = ["fp16"]'),
                      encoding="utf-8")
    cache = tmp_path / "cache"
    first = check(repo, cache, tmp_path / "first", "--model", "good")
    again = check(repo, cache, tmp_path / "again", "--model", "good")
    assert first.code == again.code == 0, first.stderr + again.stderr
    assert reused(again) == {"good"}
    entry = next((cache / "v1" / "good").glob("*/*/entry.json")).parent
    assert sorted(path.name for path in entry.iterdir()) == \
        ["entry.json", "model.onnx", "variant.fp16.onnx"]
    for suffix in (".fp16.onnx", ".fp16.parity.json"):
        assert (again.folder / f"good{suffix}").read_bytes() == \
            (first.folder / f"good{suffix}").read_bytes(), suffix
    (entry / "variant.fp16.onnx").write_bytes(b"not the variant")
    third = check(repo, cache, tmp_path / "third", "--model", "good")
    assert ran(third) == {"good"}
    assert ("cache: ignoring the entry for good (variant.fp16.onnx is missing or does not match "
            "its sha256)") in third.stdout


def test_editing_one_models_source_reruns_only_the_models_that_imported_it(
        warm: Warm, tmp_path: Path) -> None:
    repo, cache = copied(warm, tmp_path)
    source = repo / "models" / "alpha.py"
    source.write_text(source.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    done = check(repo, cache, tmp_path / "out")
    assert done.code == 0, done.stderr
    assert ran(done) == {"alpha"}
    assert reused(done) == {"good", "drifting"}
    assert done.models()["alpha"]["cached"] is False


def test_a_file_the_factory_reads_is_part_of_the_fingerprint(warm: Warm, tmp_path: Path) -> None:
    repo, cache = copied(warm, tmp_path)
    settings = repo / "models" / "drifting.json"
    original = settings.read_text(encoding="utf-8")
    settings.write_text('{"scale": 1.0, "note": "same scale"}')
    done = check(repo, cache, tmp_path / "out")
    assert ran(done) == {"drifting"}
    assert reused(done) == {"alpha", "good"}
    # Both versions of the file keep their entry (a base branch's and a pull request's).
    settings.write_text(original, encoding="utf-8")
    assert reused(check(repo, cache, tmp_path / "back")) == set(MODELS)
    settings.write_text('{"scale": 1.0, "note": "same scale"}')
    assert reused(check(repo, cache, tmp_path / "again")) == set(MODELS)


def test_samples_and_configuration_changes_miss_but_a_judging_key_does_not(
        warm: Warm, tmp_path: Path) -> None:
    repo, cache = copied(warm, tmp_path)
    positive = repo / "samples" / "positive.npy"
    np.save(positive, np.load(positive) + 1)  # drifting's samples
    config = repo / CONFIG
    text = config.read_text(encoding="utf-8")
    text = text.replace('name = "good"', 'name = "good"\natol = 2e-5')  # good's configuration
    text = text.replace('name = "alpha"', 'name = "alpha"\ndrift-warning-ratio = 50')
    config.write_text(text, encoding="utf-8")
    done = check(repo, cache, tmp_path / "out")
    assert done.code == 0, done.stderr
    assert ran(done) == {"good", "drifting"}
    assert reused(done) == {"alpha"}
    assert done.models()["good"]["atol"] == 2e-5


def test_another_environment_is_another_fingerprint(warm: Warm) -> None:
    spec = load_settings(warm.repo, warm.repo / CONFIG).models[0]
    env = environment()
    installed = env["distributions"]
    assert isinstance(installed, list)
    newer_torch = {**env, "distributions": [*installed, "torch==9.9.9"]}
    other_tool = {**env, "tool": "0.0.0-other"}
    keys = {fingerprint_key(spec, warm.repo, e) for e in (env, newer_torch, other_tool)}
    assert len(keys) == 3
    assert fingerprint_key(spec, warm.repo, env) == fingerprint_key(spec, warm.repo, env)


def test_no_cache_checks_every_model_and_refreshes_the_entries(warm: Warm,
                                                               tmp_path: Path) -> None:
    repo, cache = copied(warm, tmp_path)
    before = max(created(path) for path in (cache / "v1").glob("*/*/*/entry.json"))
    done = check(repo, cache, tmp_path / "out", "--no-cache")
    assert done.code == 0, done.stderr
    assert ran(done) == set(MODELS)
    assert reused(done) == set()
    entries = list((cache / "v1").glob("*/*/*/entry.json"))
    assert len(entries) == len(MODELS)
    assert all(created(path) > before for path in entries)  # replaced by this run's results


def test_corrupt_truncated_and_foreign_entries_are_ignored_with_a_line(
        warm: Warm, tmp_path: Path) -> None:
    repo, cache = copied(warm, tmp_path)
    entry = {name: next((cache / "v1" / name).glob("*/*/entry.json")) for name in MODELS}
    text = entry["alpha"].read_text(encoding="utf-8")
    entry["alpha"].write_text(text[: len(text) // 2], encoding="utf-8")  # truncated
    foreign = json.loads(entry["good"].read_text(encoding="utf-8"))
    foreign["tool"] = "another-tool"
    entry["good"].write_text(json.dumps(foreign), encoding="utf-8")
    (entry["drifting"].parent / "model.onnx").write_bytes(b"not the exported model")
    done = check(repo, cache, tmp_path / "out")
    assert done.code == 0, done.stderr
    assert ran(done) == set(MODELS)
    assert "Traceback" not in done.stdout + done.stderr
    assert "cache: ignoring the entry for alpha (entry.json is not JSON" in done.stdout
    assert "cache: ignoring the entry for good (not an onnx-parity cache entry)" in done.stdout
    assert ("cache: ignoring the entry for drifting (model.onnx is missing or does not match "
            "its sha256)") in done.stdout
    after = check(repo, cache, tmp_path / "out-after")  # the bad entries were replaced
    assert reused(after) == set(MODELS)


def test_two_runs_writing_one_cache_at_once_leave_it_whole(warm: Warm, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(warm.repo, repo)
    cache = tmp_path / "cache"  # empty: both runs store every model at the same time
    commands = [[sys.executable, "-m", "onnx_parity", "check", "--config", CONFIG, "--cache",
                 str(cache), "--jobs", "1", "--out", str(tmp_path / f"out-{n}")] for n in (1, 2)]
    runs = [subprocess.Popen(command, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for command in commands]
    results = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], results
    entries = sorted((cache / "v1").glob("*/*/*"))
    # Each run's worker also records what the other run's opened meanwhile (the watch cannot
    # tell processes apart), so a model may keep one entry per run: each of them whole.
    assert {path.parent.parent.name for path in entries} == set(MODELS)
    assert all((path / "entry.json").is_file() for path in entries)
    assert not list((cache / "v1").glob("*/*/.*"))  # no staging folder left behind
    third = check(repo, cache, tmp_path / "out-3")
    assert reused(third) == set(MODELS)
