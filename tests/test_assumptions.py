"""What the export assumed of a declared dimension: guards torch.export kept, ranges narrower
than the axis, and a TorchScript trace's baked shapes, read and judged by the lengths run.

The guard strings below were captured from `ExportedProgram._guards_code` on torch 2.13 (the
pinned stack) for the models beside them; the end-to-end tests run the real CLI.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import line_of, run_cli
from onnx_parity.export.assumptions import (
    RecordedGuard,
    ShapeAssumption,
    read_assumptions,
    read_guard,
)
from onnx_parity.findings import Severity
from onnx_parity.verification.assumptions import (
    assumption_findings,
    constant_shape_findings,
    explained,
)

NAMES = {("x", 0): "batch", ("x", 1): "time", ("ids", 1): "sequence", ("mask", 1): "sequence"}
SIZES = {"L['x'].size()[0]": 2, "L['x'].size()[1]": 16, "L['ids'].size()[1]": 8,
         "L['mask'].size()[1]": 8, "L['y'].size()[1]": 16}

MODELS = '''
import torch
import torch.nn.functional as F


class PaddedAttention(torch.nn.Module):
    """Pads time to a multiple of 8 (a block size), attends within the padded length."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        t = x.shape[1]
        if t % 8 != 0:  # the branch taken at 16 is the one exported
            x = F.pad(x, (0, 0, 0, 8 - t % 8))
        scores = torch.softmax(x @ x.transpose(1, 2), dim=-1)
        return self.proj(scores @ x)


class Chunked(torch.nn.Module):
    """Asserts its length is a multiple of 4, then sums chunks of 4."""

    def forward(self, x):
        torch._check(x.shape[1] % 4 == 0)  # chunks of four
        return x.reshape(x.shape[0], x.shape[1] // 4, 4, x.shape[2]).sum(2)


class WindowAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        b, t, c = x.shape
        windows = int(t) // 4  # a Python int: the tracer bakes the window count
        w = self.proj(x.reshape(-1, 4, c))
        return w.reshape(b, windows * 4, c)


class Windowed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(WindowAttention())

    def forward(self, x):
        return self.blocks(x) + 1


def padded():
    torch.manual_seed(0)
    return PaddedAttention().eval()


def chunked():
    return Chunked().eval()


def windowed():
    torch.manual_seed(0)
    return Windowed().eval()
'''


def guard(text: str, frame: tuple[str, int] | None = None) -> list[ShapeAssumption]:
    return read_guard(RecordedGuard(text, frame), SIZES, NAMES, Path("/repo"))


# ---- the guard parser, on guards captured from torch 2.13 ----

@pytest.mark.parametrize(("text", "condition", "holds", "breaks"), [
    # `if t % 8 != 0: pad` exported at 16
    ("(L['x'].size()[1] % 8) == 0", "time must be a multiple of 8", (8, 16, 24), (12, 15, 20)),
    # `x.view(b, 4, t // 4, c)` with sizes 0/1 kept dynamic (torch.onnx's setting)
    ("(4*L['x'].size()[1]*L['x'].size()[0]) == (16*L['x'].size()[0]*(L['x'].size()[1] // 4))",
     "time must be a multiple of 4", (4, 12, 16), (6, 15)),
    # torch._check(x.shape[1] >= 4), torch._check(x.shape[1] <= 512), `if t > 6`, `if t != 9`
    ("L['x'].size()[1] >= 4", "time must be at least 4", (4, 100), (2, 3)),
    ("L['x'].size()[1] <= 512", "time must be at most 512", (2, 512), (513, 1000)),
    ("L['x'].size()[1] > 6", "time must be at least 7", (7,), (6,)),
    ("L['x'].size()[1] != 9", "time must not be 9", (8, 10), (9,)),
    ("(L['x'].size()[1] % 8) == 3", "time must leave 3 when divided by 8", (11, 19), (16,)),
    # the reshape helper's own guard without size-oblivious reasoning: no simpler form
    ("(L['x'].size()[1] // 4) != 1", "time must satisfy `time // 4 != 1`", (3, 8), (4, 7)),
])
def test_a_captured_guard_reads_as_a_condition_on_the_configured_name(
        text: str, condition: str, holds: tuple[int, ...], breaks: tuple[int, ...]) -> None:
    [assumption] = guard(text)
    assert assumption.dimension == "time"
    assert assumption.condition == condition
    assert all(assumption.holds(n) for n in holds)
    assert not any(assumption.holds(n) for n in breaks)


def test_a_guard_on_the_same_dimension_twice_or_never_narrower_assumes_nothing() -> None:
    # `ids` and `mask` are both "sequence": their equality holds at every length
    assert guard("L['ids'].size()[1] == L['mask'].size()[1]") == []
    # torch's own range for a dynamic size, and a check every length passes
    assert guard("L['x'].size()[1] >= 2") == []
    assert guard("2*L['x'].size()[0]*L['x'].size()[1] >= 2") == []


def test_a_guard_relating_an_undeclared_size_names_it_as_the_code_does() -> None:
    [assumption] = guard("L['x'].size()[1] == L['y'].size()[1]")
    assert assumption.condition == "time must satisfy `time == y.shape[1]`"
    assert assumption.holds(16)  # y at its export size, 16
    assert not assumption.holds(12)


def test_the_users_line_or_the_package_torch_recorded_it_in(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    mine = RecordedGuard("(L['x'].size()[1] % 8) == 0", (str(repo / "models" / "m.py"), 14))
    package = RecordedGuard("(L['x'].size()[1] % 4) == 0", (
        str(tmp_path / "venv/lib/python3.11/site-packages/transformers/models/swin/m.py"), 90))
    [first, second] = read_assumptions((mine, package), SIZES, NAMES, repo)
    assert (first.file, first.line, first.origin) == ("models/m.py", 14, None)
    assert (second.file, second.line) == (None, None)
    assert second.origin == "transformers/models/swin/m.py:90"


def test_one_assumption_per_condition_keeps_the_one_with_a_line(tmp_path: Path) -> None:
    ranged = RecordedGuard("L['x'].size()[1] <= 512")  # a range constraint: no frame
    checked = RecordedGuard("L['x'].size()[1] <= 512", (str(tmp_path / "m.py"), 7))
    [assumption] = read_assumptions((ranged, checked), SIZES, NAMES, tmp_path)
    assert (assumption.file, assumption.line) == ("m.py", 7)


def test_a_guard_in_a_form_not_read_is_kept_quoted_not_guessed(
        capsys: pytest.CaptureFixture[str]) -> None:
    [found] = read_assumptions((RecordedGuard("math.erf(L['x'].size()[1] / 3) > 0.5"),), SIZES,
                               NAMES, Path("/repo"))
    assert (found.kind, found.condition) == ("unread", "`math.erf(time / 3) > 0.5`")
    assert "guard not read" in capsys.readouterr().out


# ---- judged by the lengths run ----

def multiple_of_8(file: str | None = "models/pad.py", line: int | None = 14) -> ShapeAssumption:
    [assumption] = read_assumptions(
        (RecordedGuard("(L['x'].size()[1] % 8) == 0",
                       (f"/repo/{file}", line or 0) if file else None),), SIZES, NAMES,
        Path("/repo"))
    return assumption


def test_a_length_that_breaks_it_and_fails_there_is_an_error() -> None:
    failed = {"time": {12: 'the outputs differ: output "y" max abs diff 0.41'}}
    [finding] = assumption_findings([multiple_of_8()], failed, {"time": [16, 8, 12]})
    assert finding.code == "shape-assumption"
    assert finding.severity == Severity.ERROR
    assert (finding.file, finding.line) == ("models/pad.py", 14)
    assert finding.message.startswith(
        "the export assumed time must be a multiple of 8 (torch recorded it at models/pad.py:14: "
        "`time % 8 == 0`), which the ONNX file does not check; it breaks at time 12, where the "
        'model fails: at time 12: the outputs differ: output "y" max abs diff 0.41')
    assert finding.details["failed_sizes"] == [12]
    assert explained([finding]) == {"time": {12}}


def test_a_length_that_breaks_it_and_still_matches_is_a_note() -> None:
    [finding] = assumption_findings([multiple_of_8()], {}, {"time": [16, 12]})
    assert finding.severity == Severity.NOTE
    assert finding.message.endswith("; tested at time 12: matches")
    assert explained([finding]) == {}


def test_no_length_that_breaks_it_ran_is_a_note_naming_one_to_add() -> None:
    [finding] = assumption_findings([multiple_of_8(None, None)], {}, {"time": [16, 8]})
    assert finding.severity == Severity.NOTE
    assert "torch recorded no line for it" in finding.message
    assert "no length that breaks it ran (time ran at 16, 8)" in finding.message
    assert "`axis-sizes` of time (e.g. 15)" in (finding.fix or "")


def test_a_length_that_breaks_it_where_pytorch_fails_too_is_the_models_own_requirement(
        ) -> None:
    [finding] = assumption_findings([multiple_of_8()], {}, {"time": [16, 8]}, {"time": [13]})
    assert finding.severity == Severity.NOTE
    assert "PyTorch itself cannot run the model at time 13, which break it" in finding.message
    assert (finding.fix or "").startswith("Document the requirement")


def test_a_failure_at_a_length_that_keeps_the_assumption_is_not_explained_by_it() -> None:
    failed = {"time": {8: "onnxruntime fails: Reshape"}}
    [finding] = assumption_findings([multiple_of_8()], failed, {"time": [16, 8]})
    assert finding.severity == Severity.NOTE
    assert explained([finding]) == {}


# ---- torch.export's program, read (real torch) ----

@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    """The models module, written into a repository folder and imported from there."""
    import importlib.util

    repo = tmp_path_factory.mktemp("repo")
    (repo / "models").mkdir()
    (repo / "models" / "assumed.py").write_text(textwrap.dedent(MODELS), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("assumed_models", repo / "models" /
                                                  "assumed.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return repo, module


def program_assumptions(repo: Path, module, factory: str) -> tuple[ShapeAssumption, ...]:
    import torch

    from onnx_parity.export.guards import capture_program, recorded_guards

    program = capture_program(getattr(module, factory)(), (torch.randn(2, 16, 4),), {},
                              {"x": {0: "batch", 1: "time"}})
    guards, sizes = recorded_guards(program)
    return read_assumptions(guards, sizes, {("x", 0): "batch", ("x", 1): "time"}, repo)


def test_the_padded_models_guard_is_read_at_the_users_if(models) -> None:
    repo, module = models
    [assumption] = program_assumptions(repo, module, "padded")
    assert assumption.condition == "time must be a multiple of 8"
    assert (assumption.file, assumption.line) == (
        "models/assumed.py", line_of(repo / "models" / "assumed.py", "if t % 8 != 0"))


def test_an_asserted_divisibility_is_read_at_the_check(models) -> None:
    repo, module = models
    found = program_assumptions(repo, module, "chunked")
    assert [a.condition for a in found] == ["time must be a multiple of 4"]
    assert found[0].line == line_of(repo / "models" / "assumed.py", "torch._check(")


def test_a_torchscript_window_count_is_a_constant_shape_named_by_node_and_module(
        models, tmp_path: Path) -> None:
    import warnings

    import torch

    from onnx_parity.export.constant_shapes import constant_shape_evidence, located

    repo, module = models
    model = module.windowed()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TracerWarning of int(t)
        torch.onnx.export(model, (torch.randn(2, 16, 4),), str(tmp_path / "w.onnx"),
                          dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {0: "batch", 1: "time"}})
    [shape] = located(constant_shape_evidence(tmp_path / "w.onnx", {"time": 16}), model, repo)
    assert (shape.node, shape.op, shape.argument) == ("/blocks/blocks.0/Reshape_1", "Reshape",
                                                     "shape")
    assert (shape.module, shape.module_class) == ("blocks.0", "WindowAttention")
    assert shape.file == "models/assumed.py"
    lines = (repo / "models" / "assumed.py").read_text(encoding="utf-8").splitlines()
    start = line_of(repo / "models" / "assumed.py", "class WindowAttention")
    assert shape.line == next(n for n in range(start, len(lines) + 1)
                              if "def forward" in lines[n - 1])  # its class's forward
    assert shape.describe().startswith(
        "Reshape node /blocks/blocks.0/Reshape_1 in blocks.0 (WindowAttention), forward at "
        "models/assumed.py:")
    failing = {"time": {12: "onnxruntime fails: [ONNXRuntimeError] ... Reshape node. "
                            "Name:'/blocks/blocks.0/Reshape_1'"}}
    assert constant_shape_findings([shape], {}, {"time": [16, 12]}) == []
    [finding] = constant_shape_findings([shape], failing, {"time": [16, 12]})
    assert finding.severity == Severity.ERROR
    assert finding.details["node"] == "/blocks/blocks.0/Reshape_1"
    assert "baked time's export size 16 into a constant shape" in finding.message
    assert "takes a shape assembled from run-time sizes and the constant [16]" in \
        finding.message


# ---- end to end: the real CLI ----

def write_repo(root: Path, name: str, factory: str, extra: str = "") -> Path:
    repo = root / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "assumed.py").write_text(textwrap.dedent(MODELS), encoding="utf-8")
    rng = np.random.default_rng(0)
    np.save(repo / "samples" / "x.npy", rng.standard_normal((4, 16, 4)).astype(np.float32))
    (repo / "onnx-parity.toml").write_text(
        f'batch-sizes = [2]\n[[model]]\nname = "{name}"\nfactory = "models.assumed:{factory}"\n'
        'inputs = { x = "samples/x.npy" }\ndynamic-axes = { x = { 0 = "batch", 1 = "time" } }\n'
        f"{extra}", encoding="utf-8")
    return repo


def findings_of(run, code: str) -> list[dict]:
    [model] = run.report()["models"]
    return [f for f in model["findings"] if f["code"] == code]


@pytest.mark.slow
def test_the_padded_model_wrong_at_12_is_a_shape_assumption_error(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, "padded", "padded", "axis-sizes = { x = { 1 = [16, 12] } }\n")
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 1, run.stdout + run.stderr
    [finding] = findings_of(run, "shape-assumption")
    assert finding["severity"] == "error"
    assert finding["file"] == "models/assumed.py"
    assert finding["line"] == line_of(repo / "models" / "assumed.py", "if t % 8 != 0")
    assert "the export assumed time must be a multiple of 8" in finding["message"]
    assert "it breaks at time 12, where the model fails: " in finding["message"]
    assert "onnxruntime [2, 12, 4]" in finding["message"]  # the sweep's evidence, quoted
    assert finding["details"]["failed_sizes"] == [12]
    assert findings_of(run, "length-mismatch") == []  # the assumption explains it


@pytest.mark.slow
def test_an_asserted_divisibility_is_reported_through_the_cli(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, "chunked", "chunked")
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    [finding] = findings_of(run, "shape-assumption")
    assert "time must be a multiple of 4" in finding["message"]
    assert finding["line"] == line_of(repo / "models" / "assumed.py", "torch._check(")


@pytest.mark.slow
def test_a_torchscript_window_count_failing_at_other_lengths_names_its_node(
        tmp_path: Path) -> None:
    repo = write_repo(tmp_path, "windowed", "windowed",
                      'exporter = "torchscript"\naxis-sizes = { x = { 1 = [16, 12] } }\n')
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 1, run.stdout + run.stderr
    [finding] = findings_of(run, "shape-assumption")
    assert finding["severity"] == "error"
    assert finding["details"]["node"] == "/blocks/blocks.0/Reshape_1"
    assert "Reshape node /blocks/blocks.0/Reshape_1 in blocks.0 (WindowAttention)" in \
        finding["message"]
    assert finding["file"] == "models/assumed.py"
