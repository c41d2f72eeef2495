# The front door of export/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .assumptions import ShapeAssumption
from .bundles import make_bundles, wanted
from .capture import native_stderr
from .constant_shapes import ConstantShape, constant_shape_evidence
from .export_batch import HardCodedBatch
from .genai_vision import Part, VisionParts
from .inspection import ModelFacts, inspect_model, is_symbolic
from .model_checks import model_findings
from .outcome import ExportOutcome, export_model
from .saving import drop_program_weights
from .unrolled import UnrolledLoop

__all__ = [
    "ConstantShape",
    "ExportOutcome",
    "HardCodedBatch",
    "ModelFacts",
    "Part",
    "ShapeAssumption",
    "UnrolledLoop",
    "VisionParts",
    "constant_shape_evidence",
    "drop_program_weights",
    "export_model",
    "inspect_model",
    "is_symbolic",
    "make_bundles",
    "model_findings",
    "native_stderr",
    "wanted",
]
