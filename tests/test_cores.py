"""Every core used, none oversubscribed: each worker's thread budget and the zygote's pre-imports.

Through the real CLI: two models at `--jobs 2` each get `max(1, cores // 2)` torch threads (intra-
and inter-op, set in the worker after the fork) and find transformers' BERT classes already
imported by the zygote, but not the repository's own helper module. The import reading itself is
checked on the fixture repository's files with `ast`, importing nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fixture_repo.harness import copy_repo, run_cli, write_samples
from onnx_parity.pipeline.preimports import installed_imports
from onnx_parity.pipeline.threads import cores, thread_budget
from onnx_parity.settings.loading import load_settings

PROBES = """\
batch-sizes = [1, 2]

[[model]]
name = "probe-a"
factory = "models.warm_probe:build"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "probe-b"
factory = "models.warm_probe:build"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }
"""


def test_the_thread_budget_shares_the_cores() -> None:
    assert [thread_budget(jobs, 8) for jobs in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    assert thread_budget(1) == cores() >= 1


def test_imports_are_read_not_run_and_only_installed_packages_are_kept(tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    (repo / "probes.toml").write_text(PROBES, encoding="utf-8")
    specs = load_settings(repo, repo / "probes.toml").models
    found = installed_imports(specs, repo)
    assert "transformers:BertConfig,BertModel" in found
    assert "torch:nn" in found  # `import torch` and `from torch import nn`, one entry
    assert not any(entry.split(":")[0].startswith("models") for entry in found)
    assert not any(entry.split(":")[0] in ("sys", "onnx_parity") for entry in found)
    assert "models.warm_probe" not in sys.modules  # nothing of the repository was imported


@pytest.mark.slow
def test_workers_get_their_share_of_the_cores_and_start_warm(tmp_path: Path) -> None:
    repo = copy_repo(tmp_path / "repo")
    write_samples(repo)
    (repo / "probes.toml").write_text(PROBES, encoding="utf-8")
    done = run_cli("check", "--config", "probes.toml", "--jobs", "2", cwd=repo,
                   out=tmp_path / "out")
    assert done.code == 0, done.stdout + done.stderr
    share = max(1, cores() // 2)
    for name in ("probe-a", "probe-b"):
        log = (tmp_path / "out" / f"{name}.log").read_text(encoding="utf-8")
        assert (f"onnx-parity: torch threads: intra-op {share}, inter-op {share}; "
                f"onnxruntime {share}") in log
        assert f"probe: threads {share} {share}" in log
        assert ("probe: preimported {'transformers.models.bert.modeling_bert': True, "
                "'models.probe_helper': False}") in log
