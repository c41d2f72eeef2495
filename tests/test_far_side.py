"""What the export assumed is tested on its far side (issue 22 §1): torch's guard arithmetic is
read (true division, floats, rounding, powers, bitwise), lengths that break each guard are found
by evaluating it and run like the sweep's own, a guard that cannot be read is a warning, and a
guard inside torch is reported only when its far side fails. Through the real CLI on a model
whose blur follows the image width, as kornia's does."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import copy_repo, run_cli
from onnx_parity.export.assumptions import (
    RecordedGuard,
    ShapeAssumption,
    evaluate,
    read_assumptions,
)
from onnx_parity.findings import Severity
from onnx_parity.verification.assumptions import assumption_findings
from onnx_parity.verification.far_side import far_side_lengths

WIDTH = "L['frames'].size()[3]"
NAMES = {("frames", 3): "width", ("frames", 0): "batch"}


def read(text: str, frame: tuple[str, int] | None = None) -> ShapeAssumption:
    [assumption] = read_assumptions([RecordedGuard(text, frame)], {WIDTH: 64}, NAMES, Path("/repo"))
    return assumption


@pytest.mark.parametrize(("text", "at_64", "at_128"), [
    (f"4.0*((((-1.0) + ({WIDTH} / 32)) / 2.0)) < 3.0", True, False),
    (f"math.ceil({WIDTH} / 3) > 20", True, True),
    (f"math.floor({WIDTH} / 3.0) <= 21", True, False),
    (f"math.trunc({WIDTH} / 3) > 21", False, True),
    (f"torch.sym_float({WIDTH}) ** 0.5 > 7.5", True, True),
    (f"({WIDTH} & 7) == 0", True, True),
    (f"({WIDTH} >> 5) == 2", True, False),
])
def test_torchs_guard_arithmetic_is_evaluated(text: str, at_64: bool, at_128: bool) -> None:
    tree = ast.parse(text, mode="eval").body
    assert bool(evaluate(tree, {WIDTH: 64})) is at_64
    assert bool(evaluate(tree, {WIDTH: 128})) is at_128


def test_a_float_guard_reads_as_a_bound_on_the_dimension() -> None:
    assumption = read(f"4.0*((((-1.0) + ({WIDTH} / 32)) / 2.0)) < 3.0")
    assert assumption.condition == "width must be at most 79"
    assert assumption.guard == "4.0 * ((-1.0 + width / 32) / 2.0) < 3.0"


def test_far_side_lengths_are_the_nearest_breaking_one_and_one_half_again_as_far() -> None:
    below = read(f"{WIDTH} <= 102")  # breaks above only
    assert far_side_lengths(below, 64) == (103, 123)  # 39 away, then >= 58.5 away
    window = read(f"{WIDTH} % 16 == 0")
    assert far_side_lengths(window, 64) == (63, 62, 65, 66)
    assert far_side_lengths(read(f"{WIDTH} <= 300"), 64) == ()  # nothing breaks it in 16..256


def test_a_guard_that_cannot_be_read_is_a_warning_quoting_it_by_dimension_name() -> None:
    assumption = read(f"math.erf({WIDTH} / 100) > 0.5", ("/repo/models/m.py", 7))
    assert assumption.kind == "unread"
    [finding] = assumption_findings([assumption], {}, {"width": (64, 32)})
    assert finding.severity == Severity.WARNING
    assert finding.message == (
        "the export assumed `math.erf(width / 100) > 0.5` (torch recorded it at models/m.py:7), "
        "which onnx-parity could not evaluate and the ONNX file does not check")
    assert finding.file == "models/m.py"


def test_a_guard_inside_torch_is_reported_only_when_its_far_side_fails() -> None:
    inside = ShapeAssumption("batch", "at-most", "batch must be at most 15", "batch < 16",
                             "L['frames'].size()[0] < 16", ("L['frames'].size()[0]",),
                             origin="torch/_subclasses/fake_impls.py:1811")
    assert assumption_findings([inside], {}, {"batch": (1, 2, 16, 23)}) == []
    assert assumption_findings([inside], {}, {"batch": (1, 2)}) == []
    [failing] = assumption_findings([inside], {"batch": {16: "onnxruntime fails at batch 16: x"}},
                                    {"batch": (1, 2, 16)})
    assert failing.severity == Severity.ERROR
    assert "it breaks at batch 16, where the model fails" in failing.message
    [named] = assumption_findings([inside], {"batch": {16: "x"}}, {"batch": (1, 2, 16)},
                                  batch=frozenset({"batch"}))
    assert "`batch-sizes`" in (named.fix or "")  # axis-sizes refuses the batch axis
    assert "axis-sizes" not in (named.fix or "")


def test_a_note_says_where_the_far_side_was_tested() -> None:
    assumption = read(f"{WIDTH} <= 102", ("/repo/models/m.py", 9))
    [note] = assumption_findings([assumption], {}, {"width": (64, 32, 103, 123)})
    assert note.severity == Severity.NOTE
    assert note.message.endswith("; tested at width 103, 123: matches")
    [none] = assumption_findings([read(f"{WIDTH} <= 300", ("/repo/m.py", 1))], {},
                                 {"width": (64,)})
    assert "no width from a quarter to four times its export length breaks it" in none.message
    assert "()" not in none.message
    assert none.fix is None


# --- through the CLI --------------------------------------------------------------------------

def blur_repo(tmp_path: Path, extra: str = "") -> Path:
    repo = copy_repo(tmp_path / "repo")
    (repo / "samples").mkdir()
    np.save(repo / "samples" / "frames.npy",
            np.random.default_rng(0).standard_normal((4, 1, 48, 64)).astype(np.float32))
    (repo / "onnx-parity.toml").write_text(
        'batch-sizes = [1, 2]\n[[model]]\nname = "blur"\nfactory = "models.far_side:sized_blur"\n'
        'exporter = "dynamo"\ninputs = { frames = "samples/frames.npy" }\n'
        'dynamic-axes = { frames = { 0 = "batch", 3 = "width" } }\n' + extra, encoding="utf-8")
    return repo


@pytest.mark.slow
@pytest.mark.parametrize("extra", ["", 'axis-sizes = { frames = { 3 = [64, 80] } }\n'])
def test_a_size_derived_blur_fails_at_a_far_side_length_the_tool_found(tmp_path: Path,
                                                                      extra: str) -> None:
    """Every length the sweep runs by itself (or the user's) keeps the 3-tap kernel: the model
    would pass; the guard's far side (103 and up) has the 5-tap one and fails."""
    run = run_cli("check", cwd=blur_repo(tmp_path, extra), out=tmp_path / "out")
    assert run.code == 1, run.stdout + run.stderr
    model = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))["models"][0]
    planned = [64, 32, 49, 80, 1] if not extra else [64, 80]
    assert model["lengths"]["width"]["run"] == [*planned, 103, 123]
    [finding] = [f for f in model["findings"] if f["severity"] == "error"]
    assert finding["code"] == "shape-assumption"
    assert finding["message"].startswith(
        "the export assumed width must be at most 102 (torch recorded it at "
        "models/far_side.py:22: `1.0 + width / 64 < 2.6`), which the ONNX file does not check; "
        "it breaks at width 103, 123, where the model fails: the outputs differ at width 103")
    assert finding["details"]["failed_sizes"] == [103, 123]
    assert model["lengths"]["width"]["far_side"] == [103, 123]


@pytest.mark.slow
def test_an_export_whose_guards_torch_kept_no_record_of_is_a_warning(tmp_path: Path) -> None:
    """torch.export cannot capture the model with `width` dynamic (`math.log2` of a size);
    torch.onnx's own capture keeps no guard: the report says what it cannot know, where the
    model passed silently before."""
    repo = blur_repo(tmp_path)
    config = repo / "onnx-parity.toml"
    config.write_text(config.read_text(encoding="utf-8").replace("models.far_side:sized_blur",
                                                                 "models.far_side:log_scale"),
                      encoding="utf-8")
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 0, run.stdout + run.stderr  # every width run (up to 80) matches
    model = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))["models"][0]
    assert model["exporter"] == "dynamo"
    [warning] = [f for f in model["findings"] if f["severity"] == "warning"]
    assert warning["code"] == "shape-assumption"
    assert warning["message"].startswith("torch.export could not keep width general (")
    assert "was not recorded" in warning["message"]
    assert "`axis-sizes`" in warning["fix"]
