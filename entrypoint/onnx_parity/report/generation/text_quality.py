"""The comment's "Text quality" table, under the deployment variants: a generating model's
variants scored teacher-forced on `eval-tokens` beside PyTorch fp32 (its own row), with each
variant's greedy token agreement, so the two figures users of quantized LLMs ask for sit side
by side."""

from __future__ import annotations

from onnx_parity.generation_results import TextScore
from onnx_parity.results import ModelResult, RunResult, VariantResult

HEADER = ("| | Model | Variant | Greedy tokens agree | NLL per token | Perplexity | vs fp32 "
          "| Top-1 agreement |")
GATE = "perplexity_ratio"


def text_section(run: RunResult) -> list[str]:
    """The table; nothing when no variant was scored on text."""
    lines: list[str] = []
    for model in run.models:
        scored = [(variant, variant.text) for variant in model.variants if variant.text]
        if scored:
            lines += [_fp32(model, scored[0][1])]
            lines += [_row(model, variant, text) for variant, text in scored]
    if not lines:
        return []
    return ["#### Text quality (`eval-tokens`)", "", HEADER, "|---" * 8 + "|", *lines]


def _fp32(model: ModelResult, text: TextScore) -> str:
    cells = ["", f"`{model.name}`", "fp32 (PyTorch)", "—", f"{text.fp32_nll:.4f}",
             f"{text.fp32_perplexity:.4g}", "1.000x", "—"]
    return "| " + " | ".join(cells) + " |"


def _row(model: ModelResult, variant: VariantResult, text: TextScore) -> str:
    gated = any(miss.get("figure") == GATE for finding in model.findings
                if finding.details.get("variant") == variant.name
                for miss in finding.details.get("misses", []))
    agree = variant.worst_top1_agreement
    cells = ["❌" if gated else "✅", f"`{model.name}`", variant.name,
             "—" if agree is None else f"{agree:.1%}", f"{text.nll:.4f}",
             f"{text.perplexity:.4g}", f"{text.ratio:.3f}x", f"{text.top1_agreement:.1%}"]
    return "| " + " | ".join(cells) + " |"
