# The front door of verification/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .compare import nonfinite_mismatch
from .cuts import Cut, CutRun, ort_feed, run_cut
from .decoding import OnnxDecoder, TorchDecoder
from .divergence_text import first_sentence
from .drift import drift_findings
from .encoder_decoding import EncoderSide
from .file_repro import file_repro
from .genai_runtime import check_runtime
from .generation import Decoders, FailingStep, Generated, check_generation, failing_cut
from .lengths import Assumed
from .localised_findings import attach_localised
from .outputs import output_names, sample_notes, variant_nonfinite
from .run_failures import reference_finding
from .runtime import RuntimeFailure, Session, open_session, run_session
from .step_repro import StepCase, not_localised, step_repro
from .threshold_past import PastSide
from .threshold_steps import ThresholdCheck, check_thresholds
from .verified import Exported, TorchSide, Verified, verify_model
from .vl_decoding import PipelineSide, open_pipeline
from .vl_files import FailingCall, FilesChecked, check_files
from .vl_runtime import check_vision_runtime
from .vl_thresholds import check_vl_thresholds

__all__ = [
    "Assumed",
    "Cut",
    "CutRun",
    "Decoders",
    "EncoderSide",
    "Exported",
    "FailingCall",
    "FailingStep",
    "FilesChecked",
    "Generated",
    "OnnxDecoder",
    "PastSide",
    "PipelineSide",
    "RuntimeFailure",
    "Session",
    "StepCase",
    "ThresholdCheck",
    "TorchDecoder",
    "TorchSide",
    "Verified",
    "attach_localised",
    "check_files",
    "check_generation",
    "check_runtime",
    "check_thresholds",
    "check_vision_runtime",
    "check_vl_thresholds",
    "drift_findings",
    "failing_cut",
    "file_repro",
    "first_sentence",
    "nonfinite_mismatch",
    "not_localised",
    "open_pipeline",
    "open_session",
    "ort_feed",
    "output_names",
    "reference_finding",
    "run_cut",
    "run_session",
    "sample_notes",
    "step_repro",
    "variant_nonfinite",
    "verify_model",
]
