# The front door of pipeline/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .all_models import Workers, run_models
from .baseline import compare_with_baseline
from .cache.entries import ModelCache, ResultCodec
from .cache.fingerprint import configuration_sha256
from .new_model import probe_in_worker
from .shards import ShardError, parse_shard, plan_digest, shard_models

__all__ = [
    "ModelCache",
    "ResultCodec",
    "ShardError",
    "Workers",
    "compare_with_baseline",
    "configuration_sha256",
    "parse_shard",
    "plan_digest",
    "probe_in_worker",
    "run_models",
    "shard_models",
]
