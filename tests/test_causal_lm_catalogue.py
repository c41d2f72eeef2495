"""Issue 34's catalogue: every causal-LM architecture transformers 5.23 lists, built tiny from its
own config class (bench/causal_lm_catalogue.py: seeded, nothing downloaded), that PyTorch builds
and generates with, declared with `generate = { steps = 6 }` and checked in ONE run of the real
CLI. At least 95% pass; a failure is an export or numeric defect whose finding carries its
evidence and fix, never the tool failing (`crash`), a model the tool cannot read (`load-error`)
or PyTorch failing on what the tool gave it (`runtime-error`); the report is always written."""

from __future__ import annotations

from pathlib import Path

import pytest

from causal_lm_catalogue import kinds, probe, summary, write_repo
from fixture_repo.harness import run_cli

LISTED = 189  # MODEL_FOR_CAUSAL_LM_MAPPING_NAMES in the pinned transformers 5.23
BUILT = 179   # of them, the ones the tiny configs build and PyTorch generates with
NEVER = {"crash", "load-error", "runtime-error"}


@pytest.mark.slow
def test_the_catalogue_passes_through_one_cli_run(tmp_path: Path) -> None:
    listed = kinds()
    assert len(listed) == LISTED
    found = probe(listed)
    built = [kind for kind, error in found.items() if error is None]
    assert len(built) >= BUILT, {kind: error for kind, error in found.items() if error}

    repo = write_repo(tmp_path, built)
    run = run_cli("check", "--jobs", "2", cwd=repo, out=tmp_path / "out", timeout=3600)
    assert run.code in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    models = run.models()
    assert sorted(models) == sorted(built)

    failed = {name: model for name, model in models.items() if not model["passed"]}
    errors = {name: [f for f in model["findings"] if f["severity"] == "error"]
              for name, model in failed.items()}
    codes = {name: sorted({f["code"] for f in shown}) for name, shown in errors.items()}
    assert not {name for name, shown in codes.items() if NEVER & set(shown)}, codes
    for name, shown in errors.items():
        assert shown, f"{name} failed without an error finding"
        for finding in shown:
            assert finding["message"], (name, finding)
            assert finding["fix"], (name, finding)
    figures = summary(run.report())
    assert figures["passed"] >= 0.95 * len(built), codes
    for name, model in models.items():
        if model["passed"]:
            generation = model["generation"]
            assert generation["tokens_agree"] == [6] * len(generation["tokens_agree"]), name
