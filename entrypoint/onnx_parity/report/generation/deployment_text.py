"""A generating model's bundles and runtime loop in its summary line (generation_table.py):
"; onnxruntime-genai's own loop: tokens agree 24/24 (4 prompts, unpadded); bundles:
onnxruntime-genai, optimum"."""

from __future__ import annotations

from onnx_parity.generation_results import GenerationResult


def deployment_clause(g: GenerationResult) -> str:
    text = ""
    runtime = g.runtime
    if runtime is not None:
        agreed, compared = sum(runtime.tokens_agree), sum(runtime.compared)
        text += (f"; {runtime.runtime}'s own loop: tokens agree {agreed}/{compared} "
                 f"({len(runtime.compared)} prompts, unpadded)")
        first = runtime.first_token_difference
        if first is not None:
            text += (f", first difference at token {first.step} of prompt {first.row} "
                     f"({first.pytorch_token} vs {first.onnx_token})")
    if g.bundles:
        text += f"; bundles: {', '.join(bundle.runtime for bundle in g.bundles)}"
    return text
