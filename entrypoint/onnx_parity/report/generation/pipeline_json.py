"""A vision-language model's pipeline in report.json (`generation.pipeline`): its family, its
three files, each file's comparison per case (the vision file per image resolution, the
embedding file per prompt case), the inputs the tool derived and how positions were
computed."""

from __future__ import annotations

from typing import TypedDict

from onnx_parity.generation_results import FileCheck, PipelineChecks
from onnx_parity.report.json_figures import number_from_json, number_to_json


class FileCheckJson(TypedDict):  # generation_results.FileCheck
    file: str  # "vision", "embedding"
    case: str  # vision: the grid "1x4x6" (t x h x w); embedding: "one image", ...
    shape: list[int]  # the output's shape
    max_abs_diff: float | str | None  # None: the file did not run there; "inf" NaN or Inf
    passed: bool
    seen: bool  # vision: a resolution the samples hold (False: the unseen one)


class PipelineJson(TypedDict):  # generation_results.PipelineChecks
    family: str
    files: list[str]  # <name>.vision.onnx, <name>.embedding.onnx, <name>.onnx
    checks: list[FileCheckJson]
    derived: list[str]  # "mm_token_type_ids: derived from ..."
    positions: str  # how the decoder's position_ids were computed


def pipeline_to_json(pipeline: PipelineChecks) -> PipelineJson:
    return {"family": pipeline.family, "files": list(pipeline.files),
            "checks": [{"file": check.file, "case": check.case, "shape": list(check.shape),
                        "max_abs_diff": number_to_json(check.max_abs_diff), "passed": check.passed,
                        "seen": check.seen} for check in pipeline.checks],
            "derived": list(pipeline.derived), "positions": pipeline.positions}


def pipeline_from_json(data: PipelineJson | None) -> PipelineChecks | None:
    if not data:
        return None
    checks = tuple(FileCheck(check["file"], check["case"], tuple(check["shape"]),
                             number_from_json(check["max_abs_diff"]), check["passed"],
                             check["seen"])
                   for check in data["checks"])
    return PipelineChecks(data["family"], tuple(data["files"]), checks,
                          tuple(data["derived"]), data["positions"])
