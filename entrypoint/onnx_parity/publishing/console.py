"""What `onnx-parity check` prints: a progress line per model step, then the verdict table."""

from __future__ import annotations

import time
from typing import TextIO

from onnx_parity.results import RunResult
from onnx_parity.verification.node_sources import first_sentence


class Progress:
    """Receives the workers' step events; prints one line each with the elapsed time."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.started = time.perf_counter()

    def __call__(self, model: str, step: str, seconds: float) -> None:
        elapsed = time.perf_counter() - self.started
        self.stream.write(f"[{elapsed:6.1f}s] {model}: {step}\n")
        self.stream.flush()


def verdict_table(run: RunResult) -> str:
    header = ("", "model", "exporter", "opset", "max abs diff", "atol", "batches", "findings")
    rows = [header] + [
        ("PASS" if m.passed else "FAIL", m.name, m.exporter or "-", str(m.opset or "-"),
         "-" if m.max_abs_diff is None else f"{m.max_abs_diff:.2e}", f"{m.atol:g}",
         ",".join(map(str, m.batch_sizes)),
         ", ".join(dict.fromkeys(f"{f.code}({f.severity.value})" for f in m.findings)) or "-")
        for m in run.models
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    # The last column is not padded: zip stops at the widths of the others.
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
             + "  " + row[-1] for row in rows]
    passed = sum(m.passed for m in run.models)
    lines.append(f"{passed} of {len(run.models)} models pass")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def divergence_lines(run: RunResult) -> str:
    """For each localised mismatch: where it diverges first, then the source line."""
    lines: list[str] = []
    for model in run.models:
        for finding in model.findings:
            details = finding.details.get("first_divergence")
            if isinstance(details, dict):
                sentence = first_sentence(details).replace('`', '')
                lines.append(f"{model.name}: {sentence[:1].lower()}{sentence[1:]}")
                if details.get("source"):
                    lines.append(f"    {details['source']}")
    return "".join(f"{line}\n" for line in lines)
