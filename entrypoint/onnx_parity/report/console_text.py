"""The run as the console prints it: the verdict table, and where each localised mismatch starts.

Pure functions of the `RunResult` (the one source line they quote is looked up through the
function handed in, so this module reads no file). The plain console prints them after the
run; the live view (publishing/live_console.py) draws each finished model with the same cells.
"""

from __future__ import annotations

from collections.abc import Callable

from onnx_parity.findings import Severity
from onnx_parity.report.generation.generation_table import generation_lines
from onnx_parity.results import ModelResult, RunResult
from onnx_parity.verification import first_sentence

# The stripped text of `file:line` in the checked repository, or None when it cannot be read
# (locations.source_line, bound to the repository by the command).
SourceLine = Callable[[str, int], str | None]

HEADER = ("", "model", "exporter", "opset", "max abs diff", "atol", "batches", "peak RSS",
          "findings")


def verdict_word(model: ModelResult) -> str:
    return "PASS" if model.passed else "FAIL"


def diff_text(model: ModelResult) -> str:
    """`7.45e-08`, and `(3,520 left out)` when `compare-mask` left elements out."""
    if model.max_abs_diff is None:
        return "-"
    left_out = sum(c.left_out for c in model.comparisons)
    return f"{model.max_abs_diff:.2e}" + (f" ({left_out:,} left out)" if left_out else "")


def atol_text(model: ModelResult) -> str:
    return f"{model.atol:g}"


def memory_text(model: ModelResult) -> str:
    """The worker's peak resident memory (console only: report.md stays reproducible)."""
    size = model.max_rss_bytes
    if size is None:
        return "-"
    return f"{size / 2**30:.1f} GB" if size >= 2**30 else f"{size / 2**20:.0f} MB"


def error_codes(model: ModelResult) -> list[str]:
    """The codes of the model's error findings, once each, in the order found."""
    return list(dict.fromkeys(f.code for f in model.findings if f.severity == Severity.ERROR))


def _row(model: ModelResult) -> tuple[str, ...]:
    findings = dict.fromkeys(f"{f.code}({f.severity.value})" for f in model.findings)
    return (verdict_word(model), model.name, model.exporter or "-", str(model.opset or "-"),
            diff_text(model), atol_text(model), ",".join(map(str, model.batch_sizes)),
            memory_text(model), ", ".join(findings) or "-")


def verdict_table(run: RunResult) -> str:
    rows = [HEADER] + [_row(model) for model in run.models]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER) - 1)]
    # The last column is not padded: zip stops at the widths of the others.
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
             + "  " + row[-1] for row in rows]
    passed = sum(m.passed for m in run.models)
    lines.append(f"{passed} of {len(run.models)} models pass")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def divergence_lines(run: RunResult, source: SourceLine) -> str:
    """For each localised mismatch: where it diverges first, then the source line; for each
    generating model, how its greedy decoding went."""
    lines: list[str] = generation_lines(run)
    for model in run.models:
        lines += _divergence_of(model, source)
    return "".join(f"{line}\n" for line in lines)


def _divergence_of(model: ModelResult, source: SourceLine) -> list[str]:
    first = model.divergence.first if model.divergence is not None else None
    if model.divergence is None or first is None:
        return []  # not localised, or no node named (the finding says why)
    sentence = first_sentence(model.divergence, first).replace("`", "")
    lines = [f"{model.name}: {sentence[:1].lower()}{sentence[1:]}"]
    text = source(first.file, first.line) if first.file and first.line else None
    if text:
        lines.append(f"    {text}")
    return lines
