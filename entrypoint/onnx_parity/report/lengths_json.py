"""The lengths a model's declared dimensions ran at, as report.json writes and reads them: per
input and axis (`axis_sizes`), and per dimension (`lengths`: run, skipped with why, and the
lengths added on the far side of what the export assumed)."""

from __future__ import annotations

from onnx_parity.report.json_shapes import LengthsJson, Shapes
from onnx_parity.results import DimensionLengths


def axis_sizes_to_json(sizes: dict[str, dict[int, tuple[int, ...]]]) -> dict[str, Shapes]:
    return {name: {str(axis): list(ran) for axis, ran in axes.items()}
            for name, axes in sizes.items()}


def axis_sizes_from_json(data: dict[str, Shapes]) -> dict[str, dict[int, tuple[int, ...]]]:
    return {name: {int(axis): tuple(ran) for axis, ran in axes.items()}
            for name, axes in data.items()}


def lengths_to_json(lengths: DimensionLengths) -> LengthsJson:
    data: LengthsJson = {"run": list(lengths.run),
                         "skipped": {str(length): why for length, why in lengths.skipped.items()}}
    if lengths.far_side:
        data["far_side"] = list(lengths.far_side)
    return data


def lengths_from_json(data: LengthsJson) -> DimensionLengths:
    return DimensionLengths(tuple(data["run"]),
                            {int(length): why for length, why in data["skipped"].items()},
                            tuple(data.get("far_side", ())))
