"""The rendered markdown is the product's face: compare it byte for byte to committed files.

Regenerate after an intended change with `python tests/expected/regenerate.py` and review
the diff.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from onnx_parity.report.markdown import render_markdown
from onnx_parity.report.serialization import ReportFormatError, run_from_json, run_to_json
from onnx_parity.results import RunResult

EXPECTED = Path(__file__).parent / "expected"
sys.path.insert(0, str(EXPECTED))
import regenerate  # noqa: E402


@pytest.mark.parametrize("path", sorted(regenerate.expected_files()), ids=lambda p: p.name)
def test_markdown_matches_committed_expected_file(path: Path) -> None:
    rendered = regenerate.expected_files()[path]
    assert path.exists(), f"missing {path.name}: run python tests/expected/regenerate.py"
    assert rendered == path.read_text(encoding="utf-8"), (
        f"{path.name} changed: review, then run python tests/expected/regenerate.py")


def load_fixture() -> dict:
    return json.loads((EXPECTED / "seed-failures.report.json").read_text(encoding="utf-8"))


def test_report_json_round_trips_through_run_result() -> None:
    data = load_fixture()
    again = run_to_json(run_from_json(data))
    assert again["models"] == data["models"]
    assert again["passed"] == data["passed"] is False
    assert again["failed_models"] == ["small-cnn-frozen", "branchy", "spectrum-torchscript",
                                      "spectral-head"]


def test_report_json_carries_the_contract_fields() -> None:
    data = load_fixture()
    assert {"passed", "versions", "tool_version", "models"} <= set(data)
    assert {"torch", "onnx", "onnxruntime", "onnxscript"} <= set(data["versions"])
    for model in data["models"]:
        assert {"name", "passed", "exporter", "opset", "atol", "rtol", "batch_sizes",
                "max_abs_diff", "max_rel_diff", "findings"} <= set(model)
        for finding in model["findings"]:
            assert finding["severity"] in ("error", "warning", "note")
            assert finding["code"]
            assert finding["message"]
            assert finding["fix"]


def test_report_body_has_no_machine_paths_or_timings() -> None:
    text = render_markdown(run_from_json(load_fixture()))
    assert "/work/" not in text
    assert "/tmp/" not in text
    assert "seconds" not in text


def test_detail_levels_shrink_and_keep_every_model() -> None:
    run: RunResult = run_from_json(load_fixture())
    sizes = [len(render_markdown(run, detail=level)) for level in (2, 1, 0)]
    assert sizes[0] > sizes[1] > sizes[2]
    table = render_markdown(run, detail=0)
    assert all(f"`{model.name}`" in table for model in run.models)


def test_unknown_report_is_refused_with_a_fix() -> None:
    with pytest.raises(ReportFormatError, match="Fix"):
        run_from_json({"models": []})


def test_user_text_cannot_break_the_table_or_inject_html() -> None:
    data = load_fixture()
    data["models"][1]["findings"][0]["message"] = "a | b <script>alert(1)</script>\nnext"
    text = render_markdown(run_from_json(data))
    assert "<script>" not in text
    assert "a \\| b" in text


def test_infinite_figures_stay_strict_json() -> None:
    data = load_fixture()
    data["models"][2]["comparisons"][0]["max_abs_diff"] = "inf"
    data["models"][2]["comparisons"][0]["smallest_passing_atol"] = None
    run = run_from_json(data)
    assert run.models[2].max_abs_diff == float("inf")
    text = json.dumps(run_to_json(run), allow_nan=False)
    assert '"max_abs_diff": "inf"' in text
