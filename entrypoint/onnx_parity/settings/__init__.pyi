# The front door of settings/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .config_entry import entry_header, model_entry
from .config_file import CONFIG_NAME, PYPROJECT_NAME, PYPROJECT_TABLE
from .dtypes import at_dtype
from .init_request import FLOAT_DTYPES, InitError, InputRequest, NewModel, new_model, weights_option
from .keys.deployment_keys import GENAI, OPTIMUM
from .keys.dimension_names import Linear, parse_dimension
from .keys.environment import resolved_env
from .keys.generation_keys import Generation
from .keys.model_sources import command_arguments
from .keys.variant_keys import Int4
from .loading import load_settings
from .schema import (
    DEFAULT_TIMEOUT_SECONDS,
    EXPORTERS,
    OPTIMIZATION_LEVELS,
    AllowWarning,
    ModelSpec,
    Settings,
    declared_keys,
)
from .source_folders import SourceFolders, found_source_folders
from .source_root import source_root
from .values import ConfigError

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_TIMEOUT_SECONDS",
    "EXPORTERS",
    "FLOAT_DTYPES",
    "GENAI",
    "OPTIMIZATION_LEVELS",
    "OPTIMUM",
    "PYPROJECT_NAME",
    "PYPROJECT_TABLE",
    "AllowWarning",
    "ConfigError",
    "Generation",
    "InitError",
    "InputRequest",
    "Int4",
    "Linear",
    "ModelSpec",
    "NewModel",
    "Settings",
    "SourceFolders",
    "at_dtype",
    "command_arguments",
    "declared_keys",
    "entry_header",
    "found_source_folders",
    "load_settings",
    "model_entry",
    "new_model",
    "parse_dimension",
    "resolved_env",
    "source_root",
    "weights_option",
]
