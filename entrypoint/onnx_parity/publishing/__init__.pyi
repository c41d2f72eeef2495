# The front door of publishing/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .console import open_console
from .files import WrittenReport, prepare_output, read_report, write_outputs, write_report
from .github.action import (
    Check,
    CheckOutcome,
    CheckRequest,
    Merge,
    MergeRequest,
    publish_outcome,
    publish_report_file,
    run_check,
    run_merge,
)
from .github.commands import Writer
from .github.http import GitHubClient
from .github.inputs import InputError
from .github.preflight import inside, install_requirements, refuse_fork_code
from .github.session import ClientFactory, Session, guarded
from .init_files import ConfigTarget, config_target, existing_models, refuse_overwrites, write_entry

__all__ = [
    "Check",
    "CheckOutcome",
    "CheckRequest",
    "ClientFactory",
    "ConfigTarget",
    "GitHubClient",
    "InputError",
    "Merge",
    "MergeRequest",
    "Session",
    "Writer",
    "WrittenReport",
    "config_target",
    "existing_models",
    "guarded",
    "inside",
    "install_requirements",
    "open_console",
    "prepare_output",
    "publish_outcome",
    "publish_report_file",
    "read_report",
    "refuse_fork_code",
    "refuse_overwrites",
    "run_check",
    "run_merge",
    "write_entry",
    "write_outputs",
    "write_report",
]
