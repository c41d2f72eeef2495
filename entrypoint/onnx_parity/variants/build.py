"""Build a deployment variant from the verified fp32 model with onnxruntime's own tools.

`int8-dynamic`: int8 weights, activations quantized at run time (`quantize_dynamic`).
`int8-static`: QDQ int8, activation ranges calibrated on the committed samples
(`quantize_static` with a `CalibrationDataReader`). `fp16`: float16 weights and activations,
inputs and outputs kept float32 (`convert_float_to_float16(keep_io_types=True)`). `int4`:
weight-only 4-bit MatMulNBits (`MatMulNBitsQuantizer`, variants/int4.py).

A variant of a model with external data is written with external data too, as
`<model>.<variant>.onnx` and its `.data` beside it (the quantizers' `use_external_data_format`;
the float16 converter is given the path, so its shape inference runs on the file, and its
result is saved with external data): the names it is built under are the names it ships under,
since the .onnx names its data file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.ansi import strip_ansi
from onnx_parity.errors import ModelProblem
from onnx_parity.model_files import ModelFile, data_file, remove_model
from onnx_parity.settings import ModelSpec
from onnx_parity.variants.int4 import build_int4

Feed = dict[str, np.ndarray]
CALIBRATION_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}


class VariantFailure(ModelProblem):
    """A variant could not be built or run; `message` is onnxruntime's own words, one line."""

    def __init__(self, variant: str, stage: str, error: BaseException):
        self.variant, self.stage = variant, stage
        self.message = " ".join(strip_ansi(f"{type(error).__name__}: {error}").split())[:700]
        super().__init__(self.message)


def build_variant(kind: str, fp32: ModelFile, target: Path, calibration: Sequence[Feed],
                  spec: ModelSpec) -> ModelFile:
    """The variant's files at `target`; raises VariantFailure with onnxruntime's message."""
    remove_model(target)
    external = fp32.data_path is not None
    try:
        if kind == "int8-dynamic":
            _dynamic(fp32.path, target, external)
        elif kind == "int8-static":
            _static(fp32.path, target, calibration, spec.calibration, external)
        elif kind == "int4":
            build_int4(fp32.path, target, spec.int4, external)
        else:
            _fp16(fp32.path, target, external)
    except Exception as error:  # onnxruntime raises many kinds; each one is evidence
        raise VariantFailure(kind, "built", error) from error
    return ModelFile.at(target)


def _dynamic(fp32: Path, target: Path, external: bool) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = _gemms_as_matmuls(fp32, target) if external else fp32
    try:
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8,
                         use_external_data_format=external)
    finally:
        if source != fp32:
            remove_model(source)


def _gemms_as_matmuls(fp32: Path, target: Path) -> Path:
    """The model with its Gemms already rewritten as MatMuls by the quantizer's own rewrite,
    the weights they no longer read dropped, saved beside the variant with external data.

    quantize_dynamic makes that rewrite itself inside its copy of the model, where each
    transposed weight is added beside the original one, and then copies and reloads the model
    with both: past 2 GiB that is about six times the weights in memory at once, against about
    three from the rewritten file. The variant it builds is the same."""
    import onnx
    from onnxruntime.quantization.onnx_model import ONNXModel

    model = ONNXModel(onnx.load(str(fp32)))
    model.replace_gemm_with_matmul()
    model.clean_initializers()  # as quantize_model does at its end
    source = target.with_name(f".{target.stem}.matmul.onnx")
    remove_model(source)
    onnx.save(model.model, str(source), save_as_external_data=True,
              all_tensors_to_one_file=True, location=data_file(source).name)
    return source


def _static(fp32: Path, target: Path, calibration: Sequence[Feed], method: str,
            external: bool) -> None:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, quantize_static

    quantize_static(str(fp32), str(target), feed_reader(calibration),
                    quant_format=QuantFormat.QDQ, use_external_data_format=external,
                    calibrate_method=getattr(CalibrationMethod, CALIBRATION_METHODS[method]))


def _fp16(fp32: Path, target: Path, external: bool) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    if not external:
        onnx.save(convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True),
                  str(target))
        return
    # A path, not a proto: the converter then infers shapes on the file (infer_shapes_path),
    # the one way that works past 2 GiB; the float16 weights are written beside the graph.
    converted = convert_float_to_float16(str(fp32), keep_io_types=True)
    onnx.save(converted, str(target), save_as_external_data=True,
              all_tensors_to_one_file=True, location=data_file(target).name)


def feed_reader(feeds: Sequence[Feed]) -> Any:
    """The feeds one at a time, as onnxruntime's calibration and activation runs read them."""
    from onnxruntime.quantization import CalibrationDataReader

    class FeedReader(CalibrationDataReader):  # type: ignore[misc]  # untyped onnxruntime base
        def __init__(self) -> None:
            self._feeds: Iterator[Feed] = iter(list(feeds))

        def get_next(self) -> Feed | None:
            return next(self._feeds, None)

    return FeedReader()
