"""Finding codes are one typed vocabulary; details and the report's JSON have typed shapes.

A misspelt code is a mypy error (checked here by running mypy on a module that misspells one);
the catalogue holds each code's policy in place of sets of bare strings; a report file with a
code this version does not know is an error that names the file; report.json, as written,
has exactly the keys its typed dicts name.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from pathlib import Path
from typing import NotRequired

import mypy.api
import pytest

from onnx_parity.finding_details import FindingDetails, FirstDivergence
from onnx_parity.findings import CATALOGUE, CODES, Code, Finding, parse_code
from onnx_parity.generation_results import FileCheck, PipelineChecks, StepRepro
from onnx_parity.publishing.files import read_report
from onnx_parity.report import json_shapes
from onnx_parity.report.generation import pipeline_json
from onnx_parity.report.json_values import finding_from_json, finding_to_json
from onnx_parity.report.serialization import ReportFormatError, run_from_json, run_to_json
from onnx_parity.results import (
    BaseFigures,
    Baseline,
    Divergence,
    ExportAttempt,
    NodeCheck,
    OutputComparison,
    Provenance,
    Repro,
    StepTiming,
    StoredFile,
    VariantComparison,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "expected" / "seed-failures.report.json"


def fixture() -> dict[str, typing.Any]:
    data: dict[str, typing.Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


# ---------------------------------------------------------------------------------------------
# The vocabulary and its policies


def test_the_code_type_and_the_catalogue_name_the_same_codes() -> None:
    assert set(typing.get_args(Code)) == set(CATALOGUE)
    assert len(CODES) == len(set(CODES)) == len(CATALOGUE)


def test_the_catalogue_holds_the_policies_the_scattered_sets_did() -> None:
    never_cached = {code for code, info in CATALOGUE.items() if not info.cached}
    localised = {code for code, info in CATALOGUE.items() if info.localised}
    explaining = {code for code, info in CATALOGUE.items() if info.explains_mismatch}
    assert never_cached == {"crash", "timeout", "out-of-memory", "load-error"}
    assert localised == {"parity-mismatch", "nan-or-inf"}
    assert explaining == {"data-dependent-branch", "frozen-dimension", "shape-assumption",
                          "length-mismatch", "nondeterministic-model"}


def test_a_misspelt_code_is_a_type_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    misspelt, right = tmp_path / "misspelt_code.py", tmp_path / "right_code.py"
    misspelt.write_text('from onnx_parity.findings import Finding\n\n'
                        'Finding("parity-mismach", "x")\n', encoding="utf-8")
    right.write_text('from onnx_parity.findings import Finding\n\n'
                     'Finding("parity-mismatch", "x")\n', encoding="utf-8")
    monkeypatch.chdir(ROOT)  # the configuration's mypy_path is relative to the project
    out, err, status = mypy.api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                     "--cache-dir", "/dev/null", str(misspelt), str(right)])
    assert status == 1, out + err
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1, out
    assert errors[0].startswith(f"{misspelt}:3: error: Argument 1 to \"Finding\"")
    assert "\"Literal['parity-mismach']\"" in errors[0]
    assert errors[0].endswith("[arg-type]")


def test_parse_code_takes_only_a_known_code() -> None:
    assert parse_code("nan-or-inf") == "nan-or-inf"
    with pytest.raises(ValueError, match="unknown finding code 'nan-or-infinity'"):
        parse_code("nan-or-infinity")


# ---------------------------------------------------------------------------------------------
# A report file with a code this version does not know


@pytest.mark.parametrize("where", ["finding", "explained_by", "baseline"])
def test_an_unknown_code_in_a_report_names_the_file_and_the_code(tmp_path: Path,
                                                                  where: str) -> None:
    data = fixture()
    model = data["models"][0]
    if where == "finding":
        model["findings"][0]["code"] = "parity-mismach"
    elif where == "explained_by":
        model["findings"][0]["details"] = {"explained_by": "parity-mismach"}
    else:
        model["baseline"] = {"passed": False, "max_abs_diff": 1.0,
                             "error_codes": ["parity-mismach"]}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ReportFormatError) as raised:
        read_report(path, "the baseline")
    assert str(raised.value).startswith(f"the baseline {path}: report.json is incomplete "
                                        "(unknown finding code 'parity-mismach'). Fix: ")


# ---------------------------------------------------------------------------------------------
# Typed details


def first_divergence() -> FirstDivergence:
    return {"node": "log_1", "op": "aten.log.default", "module": "head", "file": "models/a.py",
            "line": 3, "source": "y = x.log()", "max_abs_diff": math.inf, "max_rel_diff": None,
            "inputs_max_abs_diff": 0.0, "nodes_compared": 4, "nodes_skipped": 1,
            "runtime_optimization": "disabled", "batch_size": 2}


def test_details_come_back_from_json_as_the_finding_had_them() -> None:
    """Infinite figures are text in the file and floats again in the finding."""
    details: FindingDetails = {"output": "logits", "batches": [2],
                               "explained_by": "frozen-dimension",
                               "first_divergence": first_divergence()}
    finding = Finding("nan-or-inf", "output \"logits\" ...", details=details)
    written = finding_to_json(finding)
    assert json.dumps(written, allow_nan=False).count('"max_abs_diff": "inf"') == 1
    again = finding_from_json(json.loads(json.dumps(written)))
    assert again.details == finding.details
    assert again.details["first_divergence"]["max_abs_diff"] == math.inf
    assert finding_to_json(again) == written


def test_every_key_a_finding_of_the_fixture_holds_is_a_typed_detail() -> None:
    keys = set(FindingDetails.__annotations__)
    first = set(FirstDivergence.__annotations__)
    for model in fixture()["models"]:
        for finding in model["findings"]:
            details = finding.get("details", {})
            assert set(details) <= keys, (finding["code"], set(details) - keys)
            assert set(details.get("first_divergence", {})) <= first


# ---------------------------------------------------------------------------------------------
# The report's JSON shape


@pytest.mark.parametrize(("shape", "kind"), [
    (json_shapes.ComparisonJson, OutputComparison), (json_shapes.AttemptJson, ExportAttempt),
    (json_shapes.StepJson, StepTiming), (json_shapes.VariantComparisonJson, VariantComparison),
    (json_shapes.StoredFileJson, StoredFile),
    (json_shapes.NodeJson, NodeCheck), (json_shapes.DivergenceJson, Divergence),
    (json_shapes.ProvenanceJson, Provenance), (json_shapes.BaseFiguresJson, BaseFigures),
    (json_shapes.BaselineJson, Baseline), (json_shapes.FindingJson, Finding),
    (json_shapes.ReproJson, Repro), (json_shapes.StepReproJson, StepRepro),
    (pipeline_json.FileCheckJson, FileCheck), (pipeline_json.PipelineJson, PipelineChecks),
], ids=lambda value: getattr(value, "__name__", ""))
def test_a_shape_written_from_a_dataclass_names_its_fields_in_order(shape: type,
                                                                     kind: type) -> None:
    """serialization writes these dataclasses field by field (`encode`) as these shapes."""
    assert list(shape.__annotations__) == [f.name for f in dataclasses.fields(kind)]


def required_keys(shape: type) -> set[str]:
    """The keys not marked NotRequired (`__required_keys__` cannot tell them apart while the
    annotations are strings, as `from __future__ import annotations` makes them)."""
    hints = typing.get_type_hints(shape, include_extras=True)
    return {key for key, hint in hints.items() if typing.get_origin(hint) is not NotRequired}


@pytest.mark.parametrize(("shape", "key"), [
    (json_shapes.RunJson, None), (json_shapes.ModelJson, "models"),
    (json_shapes.FindingJson, "findings"),
])
def test_report_json_has_the_keys_its_shapes_name(shape: type, key: str | None) -> None:
    data = run_to_json(run_from_json(fixture()))
    written: list[dict[str, object]] = [dict(data)]
    if key == "models":
        written = [dict(model) for model in data["models"]]
    elif key == "findings":
        written = [dict(f) for model in data["models"] for f in model["findings"]]
    for item in written:
        assert required_keys(shape) <= set(item) <= set(shape.__annotations__), item.keys()


def test_report_json_is_written_back_byte_for_byte() -> None:
    data = fixture()
    again = run_to_json(run_from_json(data))
    assert json.dumps(again["models"], indent=2) == json.dumps(data["models"], indent=2)
