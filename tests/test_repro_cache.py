"""A failing model served from the result cache hands its repro folder back: through the real
CLI with --cache on the example's spectral-head, the second run is cached, its folder is whole
and repro.py (where torch, onnx and onnx_parity cannot be imported) prints the same figure; an
entry that does not say its files (written before the cache kept them) says the folder was not
kept, and a kept file that changed sends the model back to a worker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fixture_repo.harness import CliRun, run_cli
from test_repro import EXAMPLE, printed_diff, run_repro

FILES = ["REPORT.md", "expected.npz", "inputs.npz", "repro.py", "subgraph.onnx"]


def check(repo: Path, cache: Path, out: Path) -> CliRun:
    run = run_cli("check", "--repo", str(repo), "--model", "spectral-head", "--jobs", "1",
                  "--cache", str(cache), cwd=repo.parent, out=out)
    assert run.code == 1, run.stderr
    return run


def comment(run: CliRun) -> str:
    return (run.folder / "report.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_cached_failure_hands_back_its_repro_folder(tmp_path: Path) -> None:
    repo, cache = tmp_path / "seed-failures", tmp_path / "cache"
    shutil.copytree(EXAMPLE, repo)
    fresh = check(repo, cache, tmp_path / "fresh")
    assert fresh.models()["spectral-head"]["cached_from"] is None
    figure = printed_diff(run_repro(fresh.folder / "spectral-head.repro" / "repro.py",
                                    tmp_path).stdout)
    (entry,) = cache.glob("v1/spectral-head/*/*/entry.json")
    kept = json.loads(entry.read_text(encoding="utf-8"))["repro_files"]
    assert sorted(kept) == ["expected.npz", "inputs.npz", "subgraph.onnx"]

    cached = check(repo, cache, tmp_path / "cached")
    model = cached.models()["spectral-head"]
    assert model["cached_from"] is not None
    folder = cached.folder / "spectral-head.repro"
    assert sorted(path.name for path in folder.iterdir()) == FILES
    assert model["repro"] == fresh.models()["spectral-head"]["repro"]
    done = run_repro(folder / "repro.py", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert printed_diff(done.stdout) == figure
    assert "**Repro:** `spectral-head.repro/` holds `subgraph.onnx`" in comment(cached)
    assert (folder / "REPORT.md").read_text(encoding="utf-8") == (
        fresh.folder / "spectral-head.repro" / "REPORT.md").read_text(encoding="utf-8")
    stored = entry.parent / "repro" / "subgraph.onnx"
    if stored.stat().st_dev == (folder / "subgraph.onnx").stat().st_dev:
        assert (folder / "subgraph.onnx").samefile(stored)  # a hard link, no byte copied

    record = json.loads(entry.read_text(encoding="utf-8"))
    del record["repro_files"]  # what an entry written before the cache kept the folder holds
    entry.write_text(json.dumps(record), encoding="utf-8")
    older = check(repo, cache, tmp_path / "older")
    assert older.models()["spectral-head"]["cached_from"] is not None
    omitted = older.models()["spectral-head"]["repro"]["omitted"]
    assert "written before the cache kept repro folders" in omitted
    assert sorted(p.name for p in (older.folder / "spectral-head.repro").iterdir()) == [
        "REPORT.md"]
    assert "**Repro:** `spectral-head.repro/` holds only `REPORT.md`: the result came from a " \
           "cache entry written before" in comment(older)


@pytest.mark.slow
def test_a_kept_repro_file_that_changed_runs_the_model_again(tmp_path: Path) -> None:
    repo, cache = tmp_path / "seed-failures", tmp_path / "cache"
    shutil.copytree(EXAMPLE, repo)
    check(repo, cache, tmp_path / "fresh")
    (stored,) = cache.glob("v1/spectral-head/*/*/repro/inputs.npz")
    stored.unlink()
    stored.write_bytes(b"not the arrays")
    again = check(repo, cache, tmp_path / "again")
    assert again.models()["spectral-head"]["cached_from"] is None
    assert "repro/inputs.npz is missing or does not match its sha256" in again.stdout
    folder = again.folder / "spectral-head.repro"
    assert sorted(path.name for path in folder.iterdir()) == FILES
