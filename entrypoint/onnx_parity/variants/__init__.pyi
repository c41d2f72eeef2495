# The front door of variants/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .checked import VerifiedModel, check_variants, skipped_variants
from .generated import GeneratingModel, generation_variants

__all__ = [
    "GeneratingModel",
    "VerifiedModel",
    "check_variants",
    "generation_variants",
    "skipped_variants",
]
