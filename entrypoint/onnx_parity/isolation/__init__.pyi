# The front door of isolation/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .logs import DUMP_HEADER
from .pool import Job, JobOutcome, Startup, WorkerFailure, WorkerPool, WorkerPoolError

__all__ = [
    "DUMP_HEADER",
    "Job",
    "JobOutcome",
    "Startup",
    "WorkerFailure",
    "WorkerPool",
    "WorkerPoolError",
]
