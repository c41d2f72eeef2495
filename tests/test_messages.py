"""Messages a user can act on: each misleading message found on real architectures, fixed and
checked, through the real command line where the user reads it (report.json, report.md, logs)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fixture_repo.harness import CliRun, copy_repo, line_of, run_cli, write_samples
from onnx_parity.findings import Finding
from onnx_parity.report.markdown import render_markdown, share_of_tolerance
from onnx_parity.results import ModelResult, RunResult
from onnx_parity.verification.compare import compare_output

CONFIG = """batch-sizes = [1, 4]

[[model]]
name = "stft-ts"
factory = "models.messages:Spectrogram"
inputs = { x = "samples/x.npy" }
exporter = "torchscript"

[[model]]
name = "gpt2-ts"
factory = "models.language:tiny_gpt2"
inputs = { input_ids = "samples/ids.npy", attention_mask = "samples/mask.npy" }
exporter = "torchscript"
dynamic-axes = { input_ids = { 0 = "batch", 1 = "sequence" }, attention_mask = { 0 = "batch", 1 = "sequence" } }

[[model]]
name = "view"
factory = "models.tiny:Flatten1"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }

[[model]]
name = "dropout-zero"
factory = "models.messages:dropout_zero"
inputs = { x = "samples/x.npy" }
dynamic-axes = { x = { 0 = "batch" } }
"""
# An absolute path of this machine, whole or cut short: never in anything published.
MACHINE_PATH = re.compile(r"(?<![\w.])/(home|usr|tmp|opt|root|work|var)/|\.\.\./lib/|/sit\b|site-packages/[^ ]*\.\.\.")


# Four models (a GPT-2 and an STFT through TorchScript among them) on 2 workers: 7 s of CPU,
# 15 s on a shared machine, so the tests reading this run are `slow`; CI runs them.
@pytest.fixture(scope="module")
def messages_run(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    root = tmp_path_factory.mktemp("messages")
    repo = copy_repo(root / "repo")
    write_samples(repo)
    (repo / "onnx-parity.toml").write_text(CONFIG, encoding="utf-8")
    return run_cli("check", "--jobs", "2", cwd=repo, out=root / "out")


def _finding(run: CliRun, model: str, code: str) -> dict:
    found = [f for f in run.models()[model]["findings"] if f["code"] == code]
    assert found, [(f["code"], f["message"]) for f in run.models()[model]["findings"]]
    return found[0]


@pytest.mark.slow
def test_torchscript_symbolic_failure_is_an_unsupported_operator_at_the_users_line(
        messages_run: CliRun) -> None:
    finding = _finding(messages_run, "stft-ts", "unsupported-operator")
    source = messages_run.folder.parent / "repo" / "models" / "messages.py"
    assert (finding["file"], finding["line"]) == ("models/messages.py",
                                                  line_of(source, "torch.stft("))
    assert "STFT does not currently support complex types" in finding["message"]
    assert "Caused by" not in finding["message"]
    assert "Inputs:" not in finding["message"]
    assert "dynamo" in finding["message"]  # what the other exporter does with the same model
    assert "other_exporter" in finding["details"]
    log = (messages_run.folder / "stft-ts.log").read_text(encoding="utf-8")
    assert "[Caused by the value" in log  # the IR dump is kept, in the log


@pytest.mark.slow
def test_no_machine_path_reaches_the_report_cut_or_not(messages_run: CliRun) -> None:
    published = [(messages_run.folder / "report.md").read_text(encoding="utf-8"),
                 (messages_run.folder / "report.json").read_text(encoding="utf-8")]
    published += [p.read_text(encoding="utf-8") for p in messages_run.folder.glob("*.parity.json")]
    for text in published:
        assert not MACHINE_PATH.search(text), MACHINE_PATH.search(text)


@pytest.mark.slow
def test_a_tracer_warning_inside_an_installed_package_says_whose_code_it_is(
        messages_run: CliRun) -> None:
    warnings = [f for f in messages_run.models()["gpt2-ts"]["findings"]
                if f["severity"] == "warning" and "transformers/" in f["message"]]
    assert warnings, messages_run.models()["gpt2-ts"]["findings"]
    for finding in warnings:
        assert "Rewrite the branch as tensor ops" not in finding["fix"]
        assert "belongs to the installed package transformers" in finding["fix"]
        assert "allow-warnings" in finding["fix"]
        # dynamo was not tried for this model (exporter = "torchscript"): not recommended.
        assert 'exporter = "dynamo"' not in finding["fix"]
    shape = [f for f in warnings if "masking_utils.py" in f["message"]]
    assert shape
    assert all("It reads a shape" in f["fix"] for f in shape)
    # and the model itself, its logits_to_keep default fed, runs and compares
    assert messages_run.models()["gpt2-ts"]["comparisons"]


@pytest.mark.slow
def test_frozen_view_names_the_line_says_once_why_batch_2_was_tried(messages_run: CliRun) -> None:
    finding = _finding(messages_run, "view", "frozen-dimension")
    assert finding["message"].count("declared dynamic, but") == 1
    assert "batch 2 is where a dynamic batch is exported from, whatever `batch-sizes` asks for" in finding["message"]
    source = messages_run.folder.parent / "repo" / "models" / "tiny.py"
    assert (finding["file"], finding["line"]) == ("models/tiny.py", line_of(source, "self.fc(x.view(1, -1))"))
    assert finding["details"]["source"] == "return self.fc(x.view(1, -1))"


@pytest.mark.slow
def test_a_dropout_with_p_0_is_no_training_mode_note(messages_run: CliRun) -> None:
    model = messages_run.models()["dropout-zero"]
    assert model["passed"]
    assert "training-mode" not in [f["code"] for f in model["findings"]]


@pytest.mark.slow
def test_the_table_shows_how_close_each_model_came_to_its_tolerance(messages_run: CliRun) -> None:
    markdown = (messages_run.folder / "report.md").read_text(encoding="utf-8")
    assert "| Max abs diff (share of tolerance) | Shapes |" in markdown
    row = next(line for line in markdown.splitlines() if "`dropout-zero`" in line)
    assert re.search(r"\d\.\d\de-\d\d \((<1|\d+)% of tolerance\)", row), row
    assert "batch 1, 4" in row


def test_share_of_tolerance_counts_rtol() -> None:
    # |d| = 1.69e-5 at |torch| = 1: atol 1e-5 + rtol 1e-4 * 1 = 1.1e-4 allowed -> 15%
    row = compare_output("y", 1, np.array([1.0, 0.5]), np.array([1.0000169, 0.5]), 1e-5, 1e-4)
    assert row.passed
    assert row.tolerance_share == pytest.approx(1.69e-5 / 1.1e-4, rel=1e-3)
    assert share_of_tolerance(row.tolerance_share) == "15% of tolerance"
    failing = compare_output("y", 1, np.array([1.0]), np.array([1.01]), 1e-5, 1e-4)
    assert share_of_tolerance(failing.tolerance_share) == "90.9× tolerance"
    model = ModelResult("m", "dynamo", 18, 18, 1e-5, 1e-4, (1, 4), (), comparisons=(row,))
    text = render_markdown(RunResult("onnx-parity.toml", {}, (model,)))
    assert "| 1.69e-05 (15% of tolerance) | batch 1, 4 |" in text


def test_a_mismatch_a_baked_branch_explains_never_suggests_a_tolerance(check_model) -> None:
    result = check_model('batch-sizes = [1, 3]\n[[model]]\nname = "branchy"\n'
                         'factory = "models.tiny:Branchy"\ninputs = { x = "samples/mixed.npy" }\n'
                         'dynamic-axes = { x = { 0 = "batch" } }\n')
    parity: Finding = next(f for f in result.findings if f.code == "parity-mismatch")
    assert "atol" not in parity.suggested_fix.replace("no atol makes", "")
    assert "Python branch on tensor values at models/tiny.py:" in parity.suggested_fix
    assert "smallest passing atol" not in parity.message
    assert parity.details["explained_by"] == "data-dependent-branch"
    assert result.divergence is None  # a baked branch is not an operator's drift: not localised
