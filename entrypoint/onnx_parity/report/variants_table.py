"""The comment's "Deployment variants" table: each variant of each model against fp32.

Latency is measured (onnxruntime's median at the first batch size), so it is the one figure
in report.md that differs between runs: it is shown as information, never as a verdict. A run
with a mixture-of-experts decoder's variant has one more column, "Router top-k changed": the
share of (token, router) choices whose top-k set of experts differs from the fp32 file's.
"""

from __future__ import annotations

import math

from onnx_parity.findings import Severity
from onnx_parity.report.generation.text_quality import text_section
from onnx_parity.results import ModelResult, RunResult, VariantResult

HEADER = ("| | Model | Variant | Size vs fp32 | SQNR (worst) | Top-1 agreement | Max abs diff "
          "| Latency vs fp32 |")
ROUTING = " Router top-k changed |"
STATUS = {True: "✅", False: "❌"}


def variants_section(run: RunResult) -> list[str]:
    """The table and its notes; nothing when no model asks for variants."""
    rows = [(model, variant) for model in run.models for variant in model.variants]
    if not rows:
        return []
    routed = any(variant.routing is not None for _, variant in rows)
    header, columns = (HEADER + ROUTING, 9) if routed else (HEADER, 8)
    lines = ["#### Deployment variants", "", header, "|---" * columns + "|"]
    lines += [_row(model, variant) + (_routing(variant) if routed else "")
              for model, variant in rows]
    notes = [f"- ℹ️ `{model.name}` {variant.name}: {note}"
             for model, variant in rows for note in variant.notes]
    text = text_section(run)
    return lines + (["", *notes] if notes else []) + (["", *text] if text else [])


def _row(model: ModelResult, variant: VariantResult) -> str:
    if variant.skipped is not None:
        why = ("the fp32 model did not pass" if "did not pass" in variant.skipped
               else "see its note")
        cells = ["⏭️", f"`{model.name}`", variant.name, "—", "—", "—", "—", f"not built: {why}"]
    else:
        cells = [STATUS[_passed(model, variant.name)], f"`{model.name}`", variant.name,
                 _size(variant), _sqnr(variant.worst_sqnr_db),
                 _share(variant.worst_top1_agreement), _figure(variant.max_abs_diff),
                 _latency(variant)]
    return "| " + " | ".join(cells) + " |"


def _routing(variant: VariantResult) -> str:
    """' 3 of 38 (7.9%), 2 routers |', or a dash for a variant without routers."""
    change = variant.routing
    if change is None:
        return " — |"
    return f" {change.changed} of {change.choices} ({change.share:.1%}), {change.routers} routers |"


def _passed(model: ModelResult, variant: str) -> bool:
    return not any(f.severity == Severity.ERROR and f.details.get("variant") == variant
                   for f in model.findings)


def _size(variant: VariantResult) -> str:
    if variant.size_bytes is None:
        return "not built"
    ratio = variant.size_bytes / variant.fp32_size_bytes if variant.fp32_size_bytes else math.nan
    return f"{ratio:.2f}x ({_kilobytes(variant.size_bytes)})"


def _kilobytes(size: int) -> str:
    return f"{size / 1024:.1f} KB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MB"


def _sqnr(value: float | None) -> str:
    if value is None:
        return "—"
    return "identical" if value == math.inf else f"{value:.1f} dB"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _figure(value: float | None) -> str:
    return "—" if value is None else f"{value:.2e}"


def _latency(variant: VariantResult) -> str:
    if variant.latency_ms is None or not variant.fp32_latency_ms:
        return "—"
    return f"{variant.latency_ms:.2f} ms ({variant.latency_ms / variant.fp32_latency_ms:.2f}x)"
