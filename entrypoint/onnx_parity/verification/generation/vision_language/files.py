"""A vision-language model's vision and embedding files, each against the model's own code.

The vision file (one image per call) against the model's get_image_features at every image
resolution the samples hold and, for a family with dynamic resolutions, at one they do not
(a shape the export may have baked). The embedding file against the model's placeholder
merge on prompts with one image, two images and none (the prompts' ids with no features:
every image token then stays text, as a generated one does). A mismatch is a `parity-mismatch`
naming the file and the resolution or case; a file onnxruntime cannot run there, a
`runtime-error` naming them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_parity.findings import Finding
from onnx_parity.generation_results import FileCheck
from onnx_parity.models import Image
from onnx_parity.results import OutputComparison
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.compare import compare_output
from onnx_parity.verification.generation.vision_language.decoding import (
    PipelineSessions,
    PipelineSide,
)
from onnx_parity.verification.outputs import comparison_findings
from onnx_parity.verification.run_failures import runtime_finding
from onnx_parity.verification.runtime import RuntimeFailure, Session, run_session


@dataclass(frozen=True)
class FailingCall:
    """A call of the vision or embedding file outside the tolerance, to localise: the file,
    where the findings name it (`at resolution 1x4x6 `, `on a prompt with two images`) and
    the file's feed."""

    file: str  # "vision", "embedding"
    where: str
    feed: dict[str, np.ndarray]


@dataclass
class FilesChecked:
    """The two files' checks, their findings, and the calls that failed (to localise)."""

    checks: list[FileCheck] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    failing: list[FailingCall] = field(default_factory=list)


@dataclass(frozen=True)
class _Case:
    file: str  # "vision", "embedding"
    case: str
    path: str  # the file's name, as findings show it
    seen: bool = True
    unit: str = "t x h x w"  # what the vision case's name counts


def check_files(side: PipelineSide, sessions: PipelineSessions, model: Any,
                spec: ModelSpec) -> FilesChecked:
    """Both files' checks, in order: vision at each resolution, then embedding's cases."""
    checked = FilesChecked()
    features = _vision(side, sessions.vision, model, spec, checked)
    _embedding(side, sessions.embedding, model, (spec, features), checked)
    return checked


def grid_name(image: Image) -> str:
    """An image's resolution as the report names it: its grid (t x h x w) where the family
    gives one, else its pixel shape."""
    grid = image.get("image_grid_thw")
    values = np.asarray(grid).reshape(-1) if grid is not None else np.asarray(
        next(iter(image.values())).shape)
    return "x".join(str(int(value)) for value in values)


def _unit(image: Image) -> str:
    """What grid_name's numbers are: a grid, or the shape of the image's first input."""
    return "t x h x w" if "image_grid_thw" in image else f"{next(iter(image))}'s shape"


def _vision(side: PipelineSide, session: Session, model: Any, spec: ModelSpec,
            checked: FilesChecked) -> list[np.ndarray]:
    """The vision file per distinct resolution (and the unseen one); PyTorch's features of
    every sample image, in order (the embedding cases' features). Prompts without images are
    checked at the family's example image."""
    family = side.family
    # Prompts without images (a text-only entry): the image the file was exported from.
    images = family.images(side.prompts) or [family.example_image(model)]
    features = [family.image_features(model, image) for image in images]
    cases = {grid_name(image): (image, value) for image, value in zip(images, features,
                                                                       strict=True)}
    unseen = family.unseen_image(model, images) if side.contract.dynamic_resolution else None
    path = f"{spec.name}.vision.onnx"
    runs = [(_Case("vision", name, path, unit=_unit(image)), image, value)
            for name, (image, value) in cases.items()]
    if unseen is not None:
        runs.append((_Case("vision", grid_name(unseen), path, False, _unit(unseen)), unseen,
                     family.image_features(model, unseen)))
    for case, image, expected in runs:
        feed = {name: image[name] for name in session.input_names}
        _compared(case, session, feed, (expected, spec), checked)
    return features


def _embedding(side: PipelineSide, session: Session, model: Any,
               given: tuple[ModelSpec, list[np.ndarray]], checked: FilesChecked) -> None:
    spec, features = given
    path = f"{spec.name}.embedding.onnx"
    for name, ids, chosen in _prompt_cases(side, features):
        expected = side.family.merged_embeddings(model, ids, chosen)
        feed = {"input_ids": ids, "image_features": chosen}
        _compared(_Case("embedding", name, path), session, feed, (expected, spec), checked)


def _prompt_cases(side: PipelineSide, features: list[np.ndarray]
                  ) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Prompts with one image, two images (built of the samples' text and image tokens) and
    none (the committed prompts with no features)."""
    ids = np.asarray(side.prompts["input_ids"]).astype(np.int64)
    token, hidden = side.contract.image_token, side.contract.hidden_size
    text = ids[ids != token][-3:]  # a few of the prompts' own text tokens
    cases = []
    for count in (1, 2):
        chosen = [features[index % len(features)] for index in range(count)] if features else []
        if not chosen:
            break
        parts = [text] + [np.concatenate([np.full(len(item), token), text]) for item in chosen]
        cases.append((f"{'one image' if count == 1 else 'two images'}",
                      np.concatenate(parts)[None].astype(np.int64),
                      np.concatenate(chosen).astype(np.float32)))
    cases.append(("no image", ids, np.zeros((0, hidden), dtype=np.float32)))
    return cases


def _compared(case: _Case, session: Session, feed: dict[str, np.ndarray],
              given: tuple[np.ndarray, ModelSpec], checked: FilesChecked) -> bool:
    """One run of the file against PyTorch's value; whether it passed."""
    expected, spec = given
    where = _where(case)
    try:
        actual = run_session(session, feed)[0]
    except RuntimeFailure as error:
        checked.findings.append(runtime_finding(f"{where} does not run", error))
        checked.checks.append(FileCheck(case.file, case.case, tuple(expected.shape), None,
                                        False, case.seen))
        return False
    output = "image_features" if case.file == "vision" else "inputs_embeds"
    row = compare_output(output, 1, expected, actual, spec.atol, spec.rtol)
    checked.checks.append(FileCheck(case.file, case.case, tuple(int(n) for n in actual.shape),
                                    row.max_abs_diff, row.passed, case.seen))
    if not row.passed:
        checked.findings += _named(comparison_findings([_shaped(row, feed)], set(), spec), where)
        checked.failing.append(FailingCall(case.file, where, feed))
    return row.passed


def _where(case: _Case) -> str:
    if case.file == "vision":
        unseen = "" if case.seen else ", a resolution the samples do not hold"
        return f"the vision file {case.path} at resolution {case.case} ({case.unit}{unseen})"
    return f"the embedding file {case.path} on a prompt with {case.case}"


def _shaped(row: OutputComparison, feed: dict[str, np.ndarray]) -> OutputComparison:
    return dataclasses.replace(row, input_shapes={name: tuple(int(n) for n in value.shape)
                                                  for name, value in feed.items()})


def _named(findings: list[Finding], where: str) -> list[Finding]:
    return [dataclasses.replace(finding, message=f"{where}: {finding.message}")
            for finding in findings]
