# The front door of variants/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .checked import VerifiedModel, check_variants, skipped_variants

__all__ = [
    "VerifiedModel",
    "check_variants",
    "skipped_variants",
]
