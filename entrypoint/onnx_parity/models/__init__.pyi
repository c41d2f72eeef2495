# The front door of models/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .batches import batch_plan
from .binding import bind_inputs
from .bound_inputs import BoundInputs
from .checkpoints import checkpoint_classes
from .dtypes import to_array
from .factory import LoadedModel, build_model
from .flat_call import FlatInputs, flat_inputs, has_structure
from .generating.base import STATE_KINDS, CacheShape
from .generating.encoder_decoder import encoder_module, encoder_spec
from .generating.eval_tokens import EvalTokens, load_eval_tokens
from .generating.experts_loops import loop_findings
from .generating.moe import (
    RoutingLog,
    exported_experts,
    exported_implementations,
    implementations,
    recorded_routing,
)
from .generating.registry import cache_shape, decoder_module, step_samples, step_spec
from .generating.state_cache import cache_presents
from .generating.thresholds import PositionLimits, Threshold, position_limits
from .generating.whole_prefix import prefix_logits
from .load_errors import LoadError, load_finding
from .module_state import one_run
from .offload import OffloadedWeights
from .probe import ProbeResult, probe_model
from .reference import (
    Call,
    OutputKind,
    Reference,
    ReferenceFailure,
    as_call,
    batch_arrays,
    run_reference,
)
from .samples.loading import SampleSet, cast_samples, load_samples
from .samples.model_zoo import GoldenCase
from .shapes import Dimension, dimensions, input_shapes, resize, widened_for_export
from .torch_builds import companion_pins, installed_version, missing_release_note
from .vision_config import is_vision_language
from .vision_language.base import DerivedInput, Family, Image, PipelineContract
from .vision_language.files import (
    decoder_samples,
    decoder_spec,
    embedding_samples,
    embedding_spec,
    vision_samples,
    vision_spec,
)
from .vision_language.registry import declared_family, family_of

__all__ = [
    "STATE_KINDS",
    "BoundInputs",
    "CacheShape",
    "Call",
    "DerivedInput",
    "Dimension",
    "EvalTokens",
    "Family",
    "FlatInputs",
    "GoldenCase",
    "Image",
    "LoadError",
    "LoadedModel",
    "OffloadedWeights",
    "OutputKind",
    "PipelineContract",
    "PositionLimits",
    "ProbeResult",
    "Reference",
    "ReferenceFailure",
    "RoutingLog",
    "SampleSet",
    "Threshold",
    "as_call",
    "batch_arrays",
    "batch_plan",
    "bind_inputs",
    "build_model",
    "cache_presents",
    "cache_shape",
    "cast_samples",
    "checkpoint_classes",
    "companion_pins",
    "declared_family",
    "decoder_module",
    "decoder_samples",
    "decoder_spec",
    "dimensions",
    "embedding_samples",
    "embedding_spec",
    "encoder_module",
    "encoder_spec",
    "exported_experts",
    "exported_implementations",
    "family_of",
    "flat_inputs",
    "has_structure",
    "implementations",
    "input_shapes",
    "installed_version",
    "is_vision_language",
    "load_eval_tokens",
    "load_finding",
    "load_samples",
    "loop_findings",
    "missing_release_note",
    "one_run",
    "position_limits",
    "prefix_logits",
    "probe_model",
    "recorded_routing",
    "resize",
    "run_reference",
    "step_samples",
    "step_spec",
    "to_array",
    "vision_samples",
    "vision_spec",
    "widened_for_export",
]
