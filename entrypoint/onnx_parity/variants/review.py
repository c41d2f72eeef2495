"""What a variant's figures and failures say, as findings: `variant-degraded` (an output's
figures, or a generating model's perplexity on `eval-tokens`), `fp16-overflow`, `variant-error`,
`int4-token-difference` (an int4 token's cause, from the rerun at accuracy_level 0). Each
carries `details.variant`, so the report files it under its variant."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnx_parity.findings import Finding
from onnx_parity.generation_results import TextScore
from onnx_parity.results import VariantComparison, VariantResult
from onnx_parity.settings import ModelSpec
from onnx_parity.variants.activations import Overflow, TensorLoss
from onnx_parity.variants.build import VariantFailure
from onnx_parity.variants.int4 import LevelRerun

# Tensors named as losing the most, in a variant-degraded finding.
WORST_TENSORS = 3


@dataclass(frozen=True)
class Miss:
    """One output whose figure is below its threshold, at its worst batch."""

    output: str
    comparison: VariantComparison
    figure: str  # "sqnr_db" | "top1_agreement"
    value: float
    threshold: float
    key: str  # the configuration key of the threshold

    def describe(self) -> str:
        shapes = ", ".join(f"{name} {list(dims)}"
                           for name, dims in self.comparison.input_shapes.items())
        shown = (f"SQNR {self.value:.1f} dB" if self.figure == "sqnr_db"
                 else f"top-1 agreement {self.value:.1%}")
        limit = f"{self.threshold:g} dB" if self.figure == "sqnr_db" else f"{self.threshold:g}"
        return (f'output "{self.output}" at batch {self.comparison.batch_size} ({shapes}): '
                f"{shown} < `{self.key}` {limit}")


def misses(variant: VariantResult, spec: ModelSpec) -> list[Miss]:
    """The thresholds a variant misses: per output and figure, its worst comparison."""
    found: list[Miss] = []
    for figure, key, threshold in (("sqnr_db", "min-sqnr-db", spec.min_sqnr_db),
                                   ("top1_agreement", "min-top1-agreement",
                                    spec.min_top1_agreement)):
        if threshold is None:
            continue
        for output in dict.fromkeys(c.output for c in variant.comparisons):
            worst = _worst(variant.comparisons, output, figure)
            if worst is not None and getattr(worst, figure) < threshold:
                found.append(Miss(output, worst, figure, getattr(worst, figure), threshold, key))
    return found


def _worst(comparisons: Sequence[VariantComparison], output: str,
           figure: str) -> VariantComparison | None:
    known = [c for c in comparisons if c.output == output and getattr(c, figure) is not None]
    return min(known, key=lambda c: getattr(c, figure), default=None)


def degraded(variant: str, found: Sequence[Miss], losses: Sequence[TensorLoss]) -> Finding:
    worst = list(losses[:WORST_TENSORS])
    located = next((loss.source for loss in worst if loss.source.file), None)
    tensors = "; ".join(f"{loss.source.describe()} {loss.sqnr_db:.1f} dB" for loss in worst)
    return Finding(
        "variant-degraded",
        f"{variant}: " + "; ".join(miss.describe() for miss in found)
        + (f". The tensors that lose the most (SQNR against fp32): {tensors}" if worst else ""),
        file=located.file if located else None, line=located.line if located else None,
        details={"variant": variant,
                 "misses": [{"output": m.output, "batch_size": m.comparison.batch_size,
                             "figure": m.figure, "value": m.value, "threshold": m.threshold}
                            for m in found],
                 "worst_tensors": [{"tensor": loss.source.tensor, "op": loss.source.op,
                                    "file": loss.source.file, "line": loss.source.line,
                                    "sqnr_db": loss.sqnr_db} for loss in worst]},
    )


def overflow(found: Sequence[Overflow]) -> Finding:
    first = found[0]
    more = f"; {len(found) - 1} later tensor(s) overflow too" if len(found) > 1 else ""
    return Finding(
        "fp16-overflow",
        f"fp16: {first.source.describe()} reaches {first.largest:.4g} on the samples, beyond "
        f"float16's largest value 65504: in the fp16 variant it becomes inf{more}",
        file=first.source.file, line=first.source.line,
        details={"variant": "fp16", "tensor": first.source.tensor, "op": first.source.op,
                 "largest": first.largest, "tensors": [o.source.tensor for o in found]},
    )


def variant_error(failure: VariantFailure) -> Finding:
    return Finding(
        "variant-error",
        f"{failure.variant} could not be {failure.stage}: {failure.message}. The fp32 model's "
        "verdict and figures are unaffected.",
        evidence=failure.message, details={"variant": failure.variant},
    )


def perplexity_degraded(variant: str, score: TextScore, spec: ModelSpec) -> Finding:
    """A generating model's variant whose perplexity on `eval-tokens` grew past the gate."""
    threshold = spec.max_perplexity_ratio
    return Finding(
        "variant-degraded",
        f"{variant}: perplexity on {score.file} {score.perplexity:.4g} against PyTorch fp32's "
        f"{score.fp32_perplexity:.4g}, {score.ratio:.4f}x > `max-perplexity-ratio` "
        f"{threshold:g} ({score.nll:.4f} against {score.fp32_nll:.4f} nats per token over "
        f"{score.tokens} positions of {score.rows} rows; top-1 agrees at "
        f"{score.top1_agreement:.1%} of them)",
        details={"variant": variant,
                 "misses": [{"output": "logits", "batch_size": max(spec.batch_sizes),
                             "figure": "perplexity_ratio",
                             "value": score.ratio, "threshold": threshold}],
                 "perplexity": score.perplexity, "fp32_perplexity": score.fp32_perplexity,
                 "tokens": score.tokens, "top1_agreement": score.top1_agreement},
    )


def int4_token_difference(rerun: LevelRerun) -> Finding:
    first = rerun.difference
    head = (f"int4 (accuracy_level {rerun.level}): the greedy token differs from PyTorch fp32's "
            f"at step {first.step}, row {first.row} ({first.pytorch_token} vs "
            f"{first.onnx_token}, PyTorch's top-2 margin {first.margin:.2g})")
    if rerun.level == 0:
        cause = ("; at accuracy_level 0 the activations are fp32, so the difference is the "
                 "quantization of the weights to 4 bits")
    elif rerun.stopped is not None:
        cause = (f". Decoding again at accuracy_level 0 failed ({rerun.stopped}), so the cause "
                 "is not named")
    elif rerun.weights:
        cause = (f". Decoded again with the same weights at accuracy_level 0, that row differs "
                 f"too (from step {rerun.level0_first}): the difference is the quantization of "
                 "the weights to 4 bits, not the kernel's int8 activations")
    else:
        cause = (". Decoded again with the same weights at accuracy_level 0, that step picks "
                 "PyTorch's token: the difference is the kernel's int8 activations "
                 f"(accuracy_level {rerun.level}), not the 4-bit weights")
    return Finding(
        "int4-token-difference", head + cause,
        details={"variant": "int4", "step": first.step, "row": first.row,
                 "pytorch_token": first.pytorch_token, "onnx_token": first.onnx_token,
                 "margin": first.margin, "accuracy_level": rerun.level,
                 "level0_first_difference": rerun.level0_first,
                 "cause": _cause(rerun)},
    )


def _cause(rerun: LevelRerun) -> str:
    if rerun.stopped is not None:
        return "unknown"
    return "weights" if rerun.weights else "int8-activations"
