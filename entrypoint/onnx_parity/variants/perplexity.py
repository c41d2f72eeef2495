"""A generating model's variants judged by text (`eval-tokens`): the rows of token ids run
teacher-forced, in one pass each, through PyTorch's fp32 model and through each variant's
decoder file (its empty past, as the prompt pass of generation).

At every position t whose token and next token are text (the mask is 1 at both), the model
predicts token t+1: its negative log-likelihood is logsumexp(logits[t]) - logits[t][id[t+1]],
in float64. The figures are the mean over those positions (nats per token), the perplexity
exp(mean), the variant's ratio to fp32's, and the share of positions whose argmax agrees with
PyTorch's (`max-perplexity-ratio` gates the ratio, variants/review.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnx_parity.generation_results import TextScore
from onnx_parity.models import EvalTokens
from onnx_parity.settings import ModelSpec
from onnx_parity.verification import Decoders, Session, onnx_decoder, torch_decoder


@dataclass(frozen=True)
class Scored:
    """Each scored position's negative log-likelihood and argmax, in row order."""

    nll: np.ndarray  # float64
    top1: np.ndarray  # int64


@dataclass(frozen=True)
class TextReference:
    """PyTorch fp32 on the text, scored once for every variant."""

    text: EvalTokens
    fp32: Scored
    chunk: int  # rows per pass (the largest configured batch size)


def reference_score(decoders: Decoders, text: EvalTokens, spec: ModelSpec) -> TextReference:
    """PyTorch fp32's scores, in passes of the largest batch size (a ReferenceFailure when its
    forward fails, as in decoding)."""
    chunk, constants = max(spec.batch_sizes), dict(spec.forward_kwargs)
    logits = [torch_decoder(decoders, constants).step(ids, mask).logits
              for ids, mask in _chunks(text, chunk)]
    return TextReference(text, _scored(logits, text, chunk), chunk)


def variant_score(reference: TextReference, session: Session, decoders: Decoders) -> TextScore:
    """The variant's decoder file (opened as `session`) against PyTorch fp32 on the text."""
    text = reference.text
    logits = [onnx_decoder(session, decoders).step(ids, mask).logits
              for ids, mask in _chunks(text, reference.chunk)]
    ours, fp32 = _scored(logits, text, reference.chunk), reference.fp32
    return TextScore(text.file, len(text.ids), int(fp32.nll.size), float(np.mean(fp32.nll)),
                     float(np.mean(ours.nll)), float(np.mean(ours.top1 == fp32.top1)))


def _chunks(text: EvalTokens, size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(text.ids[start:start + size], text.mask[start:start + size])
            for start in range(0, len(text.ids), size)]


def _scored(logits: list[np.ndarray], text: EvalTokens, chunk: int) -> Scored:
    parts = [_positions(value, ids, mask)
             for value, (ids, mask) in zip(logits, _chunks(text, chunk), strict=True)]
    return Scored(np.concatenate([nll for nll, _ in parts]),
                  np.concatenate([top1 for _, top1 in parts]))


def _positions(logits: np.ndarray, ids: np.ndarray,
               mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each predicting position's negative log-likelihood of the next token, and its argmax."""
    scored = (mask[:, :-1] == 1) & (mask[:, 1:] == 1)
    predicting = logits[:, :-1].astype(np.float64)[scored]  # (positions, vocab)
    targets = ids[:, 1:][scored]
    top = predicting.max(axis=-1, keepdims=True)
    log_total = np.log(np.exp(predicting - top).sum(axis=-1)) + top[:, 0]
    chosen = np.take_along_axis(predicting, targets[:, None], axis=-1)[:, 0]
    return log_total - chosen, predicting.argmax(axis=-1).astype(np.int64)
