# The front door of report/: what other stages may import from it (ARCHITECTURE.md).
# Read by type checkers, and by __init__.py at run time to load each name on first use.

from .console_text import (
    atol_text,
    diff_text,
    divergence_lines,
    error_codes,
    verdict_table,
    verdict_word,
)
from .gate import FailOn, gate_passed
from .junit import render_junit
from .markdown import render_markdown
from .merging import merge_runs
from .records import divergence_record, parity_record, variant_record
from .repro.repro_text import repro_report, repro_script
from .sarif import render_sarif
from .serialization import (
    ReportFormatError,
    model_from_json,
    model_to_json,
    run_from_json,
    run_to_json,
    variant_file,
)

__all__ = [
    "FailOn",
    "ReportFormatError",
    "atol_text",
    "diff_text",
    "divergence_lines",
    "divergence_record",
    "error_codes",
    "gate_passed",
    "merge_runs",
    "model_from_json",
    "model_to_json",
    "parity_record",
    "render_junit",
    "render_markdown",
    "render_sarif",
    "repro_report",
    "repro_script",
    "run_from_json",
    "run_to_json",
    "variant_file",
    "variant_record",
    "verdict_table",
    "verdict_word",
]
