# The front door of verification/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .compare import nonfinite_mismatch
from .cuts import Cut, CutRun, ort_feed, run_cut
from .drift import drift_findings
from .generation.checked import FailingStep, Generated, check_generation, failing_cut
from .generation.decoders import Decoders
from .generation.decoding import OnnxDecoder, TorchDecoder
from .generation.encoder_decoding import EncoderSide
from .generation.genai_runtime import check_runtime
from .generation.prefix_decoding import onnx_decoder, torch_decoder
from .generation.step_repro import StepCase, not_localised, step_repro
from .generation.threshold_past import PastSide
from .generation.thresholds import ThresholdCheck, check_thresholds
from .generation.vision_language.decoding import PipelineSide, open_pipeline
from .generation.vision_language.files import FailingCall, FilesChecked, check_files
from .generation.vision_language.runtime import check_vision_runtime
from .generation.vision_language.thresholds import check_vl_thresholds
from .lengths import Assumed
from .localisation.divergence_text import first_sentence
from .localisation.file_repro import file_repro
from .localisation.localise import deadline_for, localisation_target, localise
from .localisation.localised_findings import attach_localised
from .localisation.request import Localisation
from .outputs import output_names, sample_notes, variant_nonfinite
from .run_failures import reference_finding
from .runtime import RuntimeFailure, Session, open_session, run_session
from .verified import Exported, TorchSide, Verified, verify_model

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
    "Localisation",
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
    "deadline_for",
    "drift_findings",
    "failing_cut",
    "file_repro",
    "first_sentence",
    "localisation_target",
    "localise",
    "nonfinite_mismatch",
    "not_localised",
    "onnx_decoder",
    "open_pipeline",
    "open_session",
    "ort_feed",
    "output_names",
    "reference_finding",
    "run_cut",
    "run_session",
    "sample_notes",
    "step_repro",
    "torch_decoder",
    "variant_nonfinite",
    "verify_model",
]
