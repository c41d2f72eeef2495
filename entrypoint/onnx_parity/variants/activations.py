"""Inside the models: every float activation of the fp32 model and of a variant, on the samples.

Used for the evidence a verdict needs: which tensors a variant loses the most on (per-tensor
SQNR against fp32; for `int8-static` onnxruntime's own `qdq_loss_debug` matching of the QDQ
pairs, for the others the same idea by tensor name), and which fp32 activations leave
float16's range. Each tensor is named with the operator that makes it and, where the exporter
recorded it (dynamo's `pkg.torch.onnx.stack_trace`), the user's source line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from onnx_parity.locations import innermost_user_frame, text_frames
from onnx_parity.model_files import ModelFile
from onnx_parity.variants.build import Feed, feed_reader
from onnx_parity.variants.figures import sqnr_db

if TYPE_CHECKING:  # onnx is imported where a model is read, not with this module
    from onnx import NodeProto

FLOAT16_MAX = 65504.0
STACK_TRACE = "pkg.torch.onnx.stack_trace"
NAMESPACE = "namespace"

Activations = dict[str, np.ndarray]  # tensor name -> every sample's values, flattened
Pairs = dict[str, tuple[np.ndarray, np.ndarray]]  # tensor name -> (fp32, variant)


@dataclass(frozen=True)
class TensorSource:
    """The node that makes a tensor in the fp32 model, and the user's line behind it."""

    tensor: str
    op: str  # the ONNX operator, with the aten op when dynamo recorded it
    file: str | None
    line: int | None

    def describe(self) -> str:
        where = f", {self.file}:{self.line}" if self.file else ""
        return f"`{self.tensor}` ({self.op}{where})"


@dataclass(frozen=True)
class TensorLoss:
    source: TensorSource
    sqnr_db: float


@dataclass(frozen=True)
class Overflow:
    source: TensorSource
    largest: float  # the largest |value| on the samples


class FloatModel:
    """The fp32 model's tensors: where each comes from, and (computed once) its activations."""

    def __init__(self, model: ModelFile, feeds: Sequence[Feed], repo: Path,
                 folder: Path) -> None:
        self.model, self.feeds, self.repo, self.folder = model, feeds, repo, folder

    @cached_property
    def sources(self) -> dict[str, TensorSource]:
        import onnx

        proto = onnx.load(str(self.model.path), load_external_data=False)
        return {output: _source(node, output, self.repo)
                for node in proto.graph.node for output in node.output}

    @cached_property
    def activations(self) -> Activations:
        return collect(self.model, self.feeds, self.folder)

    def overflows(self) -> list[Overflow]:
        """Activations outside float16's range, in graph order (the first is where it starts)."""
        found = []
        for tensor, source in self.sources.items():
            values = self.activations.get(tensor)
            if values is not None and values.size:
                largest = float(np.max(np.abs(values.astype(np.float64))))
                if largest > FLOAT16_MAX:
                    found.append(Overflow(source, largest))
        return found

    def losses(self, kind: str, variant: ModelFile) -> list[TensorLoss]:
        """Per-tensor SQNR of the variant against fp32, lowest first."""
        theirs = collect(variant, self.feeds, self.folder)
        pairs = (_qdq_pairs(theirs, self.activations) if kind == "int8-static"
                 else _same_names(theirs, self.activations))
        ranked = [TensorLoss(self.sources[name], sqnr_db(ours, got))
                  for name, (ours, got) in pairs.items() if name in self.sources]
        return sorted((loss for loss in ranked if not math.isnan(loss.sqnr_db)),
                      key=lambda loss: loss.sqnr_db)


def collect(model: ModelFile, feeds: Sequence[Feed], folder: Path) -> Activations:
    """Every float tensor of `model` on `feeds`, through qdq_loss_debug's augmented model
    (saved with external data, as its own copy of the weights, when the model has it)."""
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        modify_model_output_intermediate_tensors,
    )

    augmented = folder / f"{model.path.stem}.activations.onnx"
    modify_model_output_intermediate_tensors(str(model.path), str(augmented),
                                             save_as_external_data=model.data_path is not None)
    runs = collect_activations(str(augmented), feed_reader(feeds))
    return {name: np.concatenate([np.ravel(value) for value in values])
            for name, values in runs.items()}


def _qdq_pairs(qdq: Activations, fp32: Activations) -> Pairs:
    """onnxruntime's matching of a QDQ model's dequantized tensors with the fp32 ones."""
    from onnxruntime.quantization.qdq_loss_debug import create_activation_matching

    matched = create_activation_matching({k: [v] for k, v in qdq.items()},
                                         {k: [v] for k, v in fp32.items()})
    return {name: (match["float"][0], match["post_qdq"][0])
            for name, match in matched.items() if match.get("float")}


def _same_names(variant: Activations, fp32: Activations) -> Pairs:
    return {name: (values, variant[name]) for name, values in fp32.items()
            if name in variant and variant[name].shape == values.shape}


def _source(node: NodeProto, tensor: str, repo: Path) -> TensorSource:
    props = {prop.key: prop.value for prop in node.metadata_props}
    op = str(node.op_type)
    aten = props.get(NAMESPACE, "").rsplit(": ", 1)[-1]
    if aten.startswith("aten."):
        op = f"{op}, {aten.removesuffix('.default')}"
    file, line = innermost_user_frame(text_frames(props.get(STACK_TRACE, "")), repo)
    return TensorSource(tensor, op, file, line)
