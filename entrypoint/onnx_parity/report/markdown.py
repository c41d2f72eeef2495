"""The markdown verdict: what the PR comment, the step summary and report.md carry.

A pure function of the run's results. Deterministic: no timings, no machine paths, no
random values in the body; only the footer (versions) and the deployment variants' measured
latency (report/variants_table.py) differ between runs.
"""

from __future__ import annotations

from onnx_parity.findings import CATALOGUE, Finding, Severity
from onnx_parity.report.drift_chart import drift_chart
from onnx_parity.report.generation.generation_table import generation_section
from onnx_parity.report.repro.repro_text import repro_section
from onnx_parity.report.variants_table import variants_section
from onnx_parity.results import ModelResult, OutputComparison, RunResult

FULL, FINDINGS, TABLE = 2, 1, 0
STATUS = {True: "✅", False: "❌"}
CACHED_MARK = " ♻️"
ICON = {Severity.ERROR: "❌", Severity.WARNING: "⚠️", Severity.NOTE: "ℹ️"}


def render_markdown(run: RunResult, *, source_base: str | None = None, detail: int = FULL,
                    footer: str = "") -> str:
    parts = [_headline(run), "", *_table(run), *_below_table(run)]
    if detail > TABLE and (variants := variants_section(run)):
        parts += ["", *variants]
    if detail > TABLE and (generation := generation_section(run)):
        parts += ["", *generation]
    if detail > TABLE:
        for model in run.models:
            if not model.passed or _has_warnings(model):
                parts += ["", *_model_section(model, source_base, detail)]
    if detail < FULL and any(not m.passed for m in run.models):
        parts += ["", "_Details were shortened to fit; the run's summary has all of them._"]
    if footer:
        parts += ["", f"<sub>{footer}</sub>"]
    return "\n".join(parts) + "\n"


def _headline(run: RunResult) -> str:
    passed = sum(model.passed for model in run.models)
    verdict = "all pass" if run.passed else f"{len(run.models) - passed} failing"
    shard = f" (shard {run.shard.label})" if run.shard else ""
    return (f"### {STATUS[run.passed]} ONNX parity: {passed} of {len(run.models)} models pass "
            f"({verdict}) — `{run.config_path}`{shard}")


def _table(run: RunResult) -> list[str]:
    rows = ["| | Model | Exporter | Opset | Max abs diff (share of tolerance) | Shapes "
            "| Findings |",
            "|---|---|---|---|---|---|---|"]
    rows += [_row(model) for model in run.models]
    if run.baseline is not None:  # one more column: this run against the base branch's
        rows[0] += " vs base |"
        rows[1] += "---|"
        rows[2:] = [row + f" {vs_base(model)} |" for row, model in zip(rows[2:], run.models,
                                                                       strict=True)]
    return rows


def _row(model: ModelResult) -> str:
    cells = [STATUS[model.passed], f"`{model.name}`" + CACHED_MARK * model.cached,
             _inline(model.exporter or "—"), _opset(model), _diff_cell(model), shapes(model),
             _codes(model.findings)]
    return "| " + " | ".join(cells) + " |"


def _diff_cell(model: ModelResult) -> str:
    if model.max_abs_diff is None:
        return "—"
    return f"{_number(model.max_abs_diff)} ({share_of_tolerance(model.tolerance_share)})"


def share_of_tolerance(share: float | None) -> str:
    """How close the worst element came to `atol + rtol * |torch|`: 42% passes, 3.1x does not."""
    if share is None:
        return "—"
    if share < 0.01:
        return "<1% of tolerance" if share > 0 else "0% of tolerance"
    if share < 2:
        return f"{share * 100:.0f}% of tolerance"
    return f"{share:.3g}× tolerance"


def shapes(model: ModelResult) -> str:
    """What ran: `batch 1, 4 · sequence 8, 16`."""
    parts = ["batch " + ", ".join(str(size) for size in model.batch_sizes)]
    parts += [f"{name} " + ", ".join(str(size) for size in sizes) + _linked(model, name)
              for name, sizes in model.dimension_sizes.items()]
    return " · ".join(parts)


def _linked(model: ModelResult, dimension: str) -> str:
    """` (attention_mask axis 1 = past + 1)`: the axes whose length follows the dimension."""
    axes = model.linked_axes.get(dimension, ())
    return f" ({'; '.join(axes)})" if axes else ""


def _below_table(run: RunResult) -> list[str]:
    """The cache legend, the models removed since the baseline and the baseline's notes."""
    lines = []
    cached = [model for model in run.models if model.cached]
    if cached:
        lines.append(f"{CACHED_MARK.strip()} {len(cached)} of {len(run.models)} models unchanged "
                     "since an earlier run: their results were reused from the cache.")
    if run.baseline is not None:
        removed = ", ".join(f"`{name}`" for name in run.baseline.removed_models)
        lines += [f"Removed since the base: {removed}."] if removed else []
        lines += [f"_Note: {_inline(note)}; compared all the same._"
                  for note in run.baseline.notes]
    lines += lengths_lines(run)
    lines += left_out_lines(run)
    return ["", *"\n\n".join(lines).split("\n")] if lines else []


def left_out_lines(run: RunResult) -> list[str]:
    """Per model and output that `compare-mask` masks: how many elements it left out, and why."""
    lines = []
    for model in run.models:
        masked = [c for c in model.comparisons if c.left_out]
        for output in dict.fromkeys(c.output for c in masked):
            rows = [c for c in model.comparisons if c.output == output]
            left_out = sum(c.left_out for c in rows)
            by = next(c.left_out_by for c in masked if c.output == output)
            lines.append(f"`{model.name}` compared `{output}` only where `{by}` is not 0 "
                         f"(`compare-mask`): {left_out:,} of "
                         f"{left_out + sum(c.total for c in rows):,} elements left out.")
    return lines


def lengths_lines(run: RunResult) -> list[str]:
    """How the other lengths of declared axes were built, and each length skipped with why."""
    models = [model for model in run.models if model.lengths]
    if not models:
        return []
    lines = ["Other lengths of a declared axis are its committed samples repeated along the "
             "axis (wrapping around), never random values, each run at the smallest and the "
             "largest batch size."]
    for model in models:
        for name, lengths in model.lengths.items():
            if lengths.skipped:
                whys = list(lengths.skipped.values())
                lines.append(f"`{model.name}` skipped {name} "
                             + ", ".join(str(length) for length in lengths.skipped)
                             + f": {_inline(whys[0])[:300]}")
    return lines


def vs_base(model: ModelResult) -> str:
    """`2.9e-08 -> 4.1e-06 (x140)`, `new model`, `already failing on base`."""
    base = model.base
    if base is None:
        return "new model"
    if not base.passed and not model.passed:
        return "already failing on base"
    change = f"{_short(base.max_abs_diff)} -> {_short(model.max_abs_diff)}"
    if base.max_abs_diff and model.max_abs_diff is not None:
        change += f" (x{_ratio(model.max_abs_diff / base.max_abs_diff)})"
    return change + (" (failing on base)" if not base.passed else "")


def _short(value: float | None) -> str:
    return "—" if value is None else f"{value:.2g}"


def _ratio(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def _opset(model: ModelResult) -> str:
    if model.opset is None:
        return "—"
    if model.opset != model.requested_opset:
        return f"{model.opset} (asked {model.requested_opset})"
    return str(model.opset)


def _codes(findings: tuple[Finding, ...]) -> str:
    counted: dict[tuple[str, Severity], int] = {}
    for finding in findings:
        key = (finding.code, finding.severity)
        counted[key] = counted.get(key, 0) + 1
    shown = [f"{ICON[severity]} `{code}`" + (f" ×{n}" if n > 1 else "")
             for (code, severity), n in counted.items()]
    return ", ".join(shown) or "—"


def _has_warnings(model: ModelResult) -> bool:
    return any(finding.severity == Severity.WARNING for finding in model.findings)


def _model_section(model: ModelResult, source_base: str | None, detail: int) -> list[str]:
    summary = f"{STATUS[model.passed]} <b>{_html(model.name)}</b>: " + ", ".join(
        dict.fromkeys(f.code for f in model.findings if f.severity != Severity.NOTE))
    lines = ["<details>", f"<summary>{summary}</summary>", ""]
    for finding in _ordered(model.findings):
        lines += _finding_lines(finding, source_base, detail)
    if detail == FULL and model.divergence is not None:
        lines += drift_chart(model.name, model.divergence)
    if detail == FULL:
        lines += repro_section(model)
    if detail == FULL and (rows := _shown_rows(model)):
        lines += ["", *_comparison_table(rows)]
    if detail == FULL and model.attempts:
        lines += ["", "Exporters tried: " + "; ".join(
            f"{_inline(a.exporter)} {'succeeded' if a.succeeded else 'failed'}"
            for a in model.attempts)]
    return [*lines, "", "</details>"]


def _shown_rows(model: ModelResult) -> tuple[OutputComparison, ...]:
    """Every comparison; a generating model's outside the tolerance only (one per output and
    step: its table of every step is report.json's and the drift table's)."""
    if model.generation is None:
        return model.comparisons
    return tuple(c for c in model.comparisons if not c.passed)


def _ordered(findings: tuple[Finding, ...]) -> list[Finding]:
    rank = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.NOTE: 2}
    return sorted(findings, key=lambda f: rank[f.severity])


def _finding_lines(finding: Finding, source_base: str | None, detail: int) -> list[str]:
    where = f" at {_location(finding, source_base)}" if finding.file else ""
    head = f"- {ICON[finding.severity]} **{finding.severity.value}** `{finding.code}`{where}: "
    lines = [head + _inline(finding.message)]
    source = finding.details.get("source") if finding.details else None
    if source and detail == FULL:
        lines += ["  ```python", f"  {source}", "  ```"]
    if finding.allowed_by:
        lines.append(f"  Allowed by `allow-warnings`: {_inline(finding.allowed_by)}")
    elif finding.severity != Severity.NOTE or _own_fix(finding):
        lines.append(f"  **Fix:** {finding.suggested_fix}")
    return lines


def _own_fix(finding: Finding) -> bool:
    """A note shows its fix only when it is the note's own (the catalogue's is in the docs)."""
    return finding.suggested_fix != CATALOGUE[finding.code].fix


def _location(finding: Finding, source_base: str | None) -> str:
    label = f"{finding.file}:{finding.line}" if finding.line else f"{finding.file}"
    if not source_base:
        return f"`{label}`"
    anchor = f"#L{finding.line}" if finding.line else ""
    return f"[`{label}`]({source_base.rstrip('/')}/{finding.file}{anchor})"


def _comparison_table(comparisons: tuple[OutputComparison, ...]) -> list[str]:
    rows = ["| Output | Batch | Max abs diff | Max rel diff | Outside tolerance "
            "| Smallest passing atol |",
            "|---|---|---|---|---|---|"]
    for c in comparisons:
        batch = " · ".join([str(c.batch_size), *(f"{k} {v}" for k, v in c.dimensions.items())])
        rows.append(f"| `{c.output}` | {batch} | {_number(c.max_abs_diff)} | "
                    f"{_number(c.max_rel_diff)} | {c.mismatched} of {c.total} "
                    f"({c.mismatched_percent:.1f}%){_left_out(c)} | "
                    f"{_number(c.smallest_passing_atol)} |")
    return rows


def _left_out(c: OutputComparison) -> str:
    """The elements `compare-mask` left out of the comparison, and why."""
    return f"; {c.left_out} left out (`{c.left_out_by}` = 0)" if c.left_out else ""


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2e}"


def _inline(text: str) -> str:
    """One markdown line: no raw newlines, no table-breaking pipes, no HTML injection."""
    return _html(" ".join(text.split())).replace("|", "\\|")


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
