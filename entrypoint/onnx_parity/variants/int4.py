"""The `int4` variant: weight-only 4-bit `MatMulNBits`, built by onnxruntime's own
`MatMulNBitsQuantizer` (round to nearest, per block of `block-size` weights along K), the way
onnxruntime-genai's model builder ships LLMs for CPU.

`at_level` makes a copy of a built int4 file with every MatMulNBits node's `accuracy_level`
set to another value, the weights unchanged: onnxruntime's developers tell a difference caused
by the 4-bit weights from one caused by the kernel's int8 activations (level 4) by running the
same weights at level 0.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx_parity.findings import Severity
from onnx_parity.generation_results import TokenDifference
from onnx_parity.model_files import ModelFile, data_file, remove_model
from onnx_parity.settings import Int4, ModelSpec
from onnx_parity.verification import Decoders, check_generation

QUANTIZED_OP = "MatMulNBits"
# What a rerun that decoded says of itself; any other error means level 0 did not decode.
RERUN_VERDICTS = ("parity-mismatch", "nan-or-inf", "generation-mismatch")
LEVEL = "accuracy_level"


def build_int4(fp32: Path, target: Path, options: Int4, external: bool) -> None:
    """The int4 variant of `fp32` at `target` (with external data when the fp32 file has it).

    The quantizer takes MatMuls only; an exporter writes a Linear on a 2-D input as Gemm, so
    the Gemms are first rewritten as MatMul (+ Add) by onnxruntime's own rewrite, as
    quantize_dynamic does, and onnxruntime-genai's builder writes every projection as MatMul."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    from onnxruntime.quantization.onnx_model import ONNXModel

    model = ONNXModel(onnx.load(str(fp32)))
    model.replace_gemm_with_matmul()
    model.clean_initializers()
    quantizer = MatMulNBitsQuantizer(model.model, bits=4, block_size=options.block_size,
                                     is_symmetric=options.symmetric,
                                     accuracy_level=options.accuracy_level)
    quantizer.process()
    if not any(node.op_type == QUANTIZED_OP for node in quantizer.model.model.graph.node):
        raise NothingToQuantize(
            "MatMulNBitsQuantizer found no MatMul or Gemm with a constant weight to make 4-bit, "
            "so the file would be the fp32 model under an int4 name; int4 is for models whose "
            "weights are in MatMuls (transformers' Linear layers)")
    quantizer.model.save_model_to_file(str(target), use_external_data_format=external)


class NothingToQuantize(ValueError):
    """The model has no weight the int4 quantizer takes (its message says why)."""


def settings(options: Int4) -> dict[str, object]:
    """How the variant was built, for its report."""
    return {"block_size": options.block_size, "symmetric": options.symmetric,
            "accuracy_level": options.accuracy_level}


def at_level(built: ModelFile, level: int, target: Path) -> ModelFile:
    """A copy of `built` whose MatMulNBits nodes run at accuracy_level `level` (same weights)."""
    import onnx

    model = onnx.load(str(built.path))
    for node in model.graph.node:
        if node.op_type == QUANTIZED_OP:
            kept = [a for a in node.attribute if a.name != LEVEL]
            del node.attribute[:]
            node.attribute.extend([*kept, onnx.helper.make_attribute(LEVEL, level)])
    remove_model(target)
    if built.data_path is None:
        onnx.save(model, str(target))
    else:
        onnx.save(model, str(target), save_as_external_data=True,
                  all_tensors_to_one_file=True, location=data_file(target).name)
    return ModelFile.at(target)


@dataclass(frozen=True)
class LevelRerun:
    """An int4 variant's first differing greedy token, and the same decoding at level 0."""

    level: int  # the variant's accuracy_level
    difference: TokenDifference
    level0_first: int | None  # level 0's first differing step in that row (None: none)
    stopped: str | None = None  # why level 0 could not decode (onnxruntime's message)

    @property
    def weights(self) -> bool:
        """The 4-bit weights chose the token: level 0 differs at or before that step too."""
        return self.level == 0 or (self.level0_first is not None
                                   and self.level0_first <= self.difference.step)


def rerun_at_level0(built: ModelFile, decoders: Decoders, prompts: dict[str, np.ndarray],
                    spec: ModelSpec, difference: TokenDifference) -> LevelRerun:
    """The prompts decoded again by `built`'s weights at accuracy_level 0 (a copy beside it,
    not published), when the variant ran at another level; what that row did there."""
    level = spec.int4.accuracy_level
    if level == 0:
        return LevelRerun(0, difference, difference.step)
    copy = at_level(built, 0, built.path.with_name(f".{built.path.stem}.level0.onnx"))
    try:
        again = check_generation(dataclasses.replace(decoders, model=copy.path), prompts, spec)
    finally:
        remove_model(copy.path)
    failed = [f.message for f in again.findings if f.code not in RERUN_VERDICTS
               and f.severity == Severity.ERROR]
    if failed:
        return LevelRerun(level, difference, None, failed[0])
    agreed = again.result.tokens_agree
    row = difference.row
    first = agreed[row] if row < len(agreed) and agreed[row] < again.result.steps else None
    return LevelRerun(level, difference, first)
