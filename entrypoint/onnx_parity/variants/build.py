"""Build a deployment variant from the verified fp32 model with onnxruntime's own tools.

`int8-dynamic`: int8 weights, activations quantized at run time (`quantize_dynamic`).
`int8-static`: QDQ int8, activation ranges calibrated on the committed samples
(`quantize_static` with a `CalibrationDataReader`). `fp16`: float16 weights and activations,
inputs and outputs kept float32 (`convert_float_to_float16(keep_io_types=True)`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.ansi import strip_ansi
from onnx_parity.errors import ModelProblem

Feed = dict[str, np.ndarray]
CALIBRATION_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}


class VariantFailure(ModelProblem):
    """A variant could not be built or run; `message` is onnxruntime's own words, one line."""

    def __init__(self, variant: str, stage: str, error: BaseException):
        self.variant, self.stage = variant, stage
        self.message = " ".join(strip_ansi(f"{type(error).__name__}: {error}").split())[:700]
        super().__init__(self.message)


def build_variant(kind: str, fp32: Path, folder: Path, calibration: Sequence[Feed],
                  method: str) -> bytes:
    """The variant's model bytes; raises VariantFailure with onnxruntime's message."""
    target = folder / f"{kind}.onnx"
    try:
        if kind == "int8-dynamic":
            _dynamic(fp32, target)
        elif kind == "int8-static":
            _static(fp32, target, calibration, method)
        else:
            _fp16(fp32, target)
        return target.read_bytes()
    except Exception as error:  # onnxruntime raises many kinds; each one is evidence
        raise VariantFailure(kind, "built", error) from error


def _dynamic(fp32: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(fp32), str(target), weight_type=QuantType.QInt8)


def _static(fp32: Path, target: Path, calibration: Sequence[Feed], method: str) -> None:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, quantize_static

    quantize_static(str(fp32), str(target), feed_reader(calibration),
                    quant_format=QuantFormat.QDQ,
                    calibrate_method=getattr(CalibrationMethod, CALIBRATION_METHODS[method]))


def _fp16(fp32: Path, target: Path) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    converted = convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True)
    onnx.save(converted, str(target))


def feed_reader(feeds: Sequence[Feed]) -> Any:
    """The feeds one at a time, as onnxruntime's calibration and activation runs read them."""
    from onnxruntime.quantization import CalibrationDataReader

    class FeedReader(CalibrationDataReader):  # type: ignore[misc]  # untyped onnxruntime base
        def __init__(self) -> None:
            self._feeds: Iterator[Feed] = iter(list(feeds))

        def get_next(self) -> Feed | None:
            return next(self._feeds, None)

    return FeedReader()
