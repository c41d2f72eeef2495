"""A worker that died, hung or grew too big: its `crash`, `timeout` or `out-of-memory` finding.

Only the pipeline sees workers end, so these three codes are built here, from the evidence the
pool kept: its own account of what happened and the last lines of the model's log.
"""

from __future__ import annotations

from pathlib import Path

from onnx_parity.findings import Finding, parse_code
from onnx_parity.isolation import DUMP_HEADER, WorkerFailure
from onnx_parity.locations import stack_dump_location

# The last lines of a dead worker's log kept as a finding's evidence.
EVIDENCE_LINES = 10


def worker_finding(failure: WorkerFailure, repo: Path) -> Finding:
    lines = failure.log_tail.strip().splitlines()
    file, line = stack_dump_location(lines, repo)
    where = f" while running {file}:{line}" if file else ""
    evidence = _evidence(lines, repo)
    return Finding(parse_code(failure.kind), f"{failure.detail}{where}; the model's other "
                   "results are lost with its worker, the other models are unaffected",
                   file=file, line=line, evidence="\n".join(evidence) or None)


def _evidence(lines: list[str], repo: Path) -> list[str]:
    """What the worker printed last before a stack dump, the model's own frames, the end."""
    dump = next((i for i, text in enumerate(lines) if DUMP_HEADER.match(text)), len(lines))
    before = lines[max(0, dump - 3):dump]
    ours = [text for text in lines if str(repo.resolve()) in text][:4]
    return list(dict.fromkeys(before + ours + lines[-EVIDENCE_LINES:]))
