"""The keys of the int4 variant and of the text a generating model's variants are scored on.

`int4 = { block-size = 32, symmetric = true, accuracy-level = 4 }` (or a `[model.int4]`
table): how onnxruntime's MatMulNBitsQuantizer builds the `int4` variant. The defaults are what
onnxruntime-genai's model builder uses on CPU (`int4_block_size` 32, symmetric,
`int4_accuracy_level` 4: int8 activations in the MatMulNBits kernel).

`eval-tokens`: rows of token ids scored teacher-forced (variants/perplexity.py), and
`max-perplexity-ratio`: how much a variant's perplexity may grow over PyTorch fp32's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from onnx_parity.settings.declaration import Declaration, plain
from onnx_parity.settings.paths import resolve_inside
from onnx_parity.settings.values import (
    ConfigError,
    KeyContext,
    dotted,
    finite_number,
    integer,
    show_value,
    shown,
    string,
    wrong_type,
)

# onnxruntime's MatMulNBits: 0 = unset (the input's type, fp32 on CPU), 1 fp32, 2 fp16,
# 3 bf16, 4 int8 activations.
ACCURACY_LEVELS = (0, 1, 2, 3, 4)
MIN_BLOCK_SIZE = 16  # MatMulNBits' block_size: a power of 2, at least 16
MAX_BLOCK_SIZE = 256
# Measured (bench/perplexity.py, docs/generation.md "Why 1.1"): on random-weight Llamas the
# largest healthy ratio was 1.0101 (int4, 25M parameters); a fragile model's broken int8 and
# int4 reached 3.16 and 903. 1.1 is ten times the largest healthy loss.
DEFAULT_MAX_PERPLEXITY_RATIO = 1.1
EVAL_SUFFIXES = (".npy", ".npz")
OVERRIDES = "Set at the top level for every model, or in a `[[model]]` for that model only."
_INT4_FIELDS = ("block-size", "symmetric", "accuracy-level")
_INT4_FIX = "a table, e.g. int4 = { block-size = 32, symmetric = true, accuracy-level = 4 }"


@dataclass(frozen=True)
class Int4:
    """How the int4 variant is built (onnxruntime-genai's CPU defaults)."""

    block_size: int = 32
    symmetric: bool = True
    accuracy_level: int = 4


def int4_value(value: object, context: KeyContext) -> Int4:
    if not isinstance(value, dict):
        raise wrong_type(context.where, value, _INT4_FIX)
    unknown = [name for name in value if name not in _INT4_FIELDS]
    if unknown:
        raise ConfigError(f"{context.place.at(dotted(context.key, unknown[0]))}: not a key of "
                          f"`int4`; its keys are {', '.join(_INT4_FIELDS)}.")
    default = Int4()
    return Int4(_block_size(value.get("block-size", default.block_size),
                            _at(context, "block-size")),
                _symmetric(value.get("symmetric", default.symmetric), _at(context, "symmetric")),
                _level(value.get("accuracy-level", default.accuracy_level),
                       _at(context, "accuracy-level")))


def _at(context: KeyContext, name: str) -> str:
    return context.place.at(dotted(context.key, name))


def _block_size(value: object, where: str) -> int:
    size = integer(value, where, "a power of 2 from 16 to 256, e.g. block-size = 32")
    if size < MIN_BLOCK_SIZE or size > MAX_BLOCK_SIZE or size & (size - 1):
        raise ConfigError(f"{where}: {size} is not a power of 2 from {MIN_BLOCK_SIZE} to "
                          f"{MAX_BLOCK_SIZE} (MatMulNBits' block_size). Write block-size = 32 "
                          "(onnxruntime-genai's default on CPU), 64 or 128.")
    return size


def _symmetric(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise wrong_type(where, value, "true (no zero points, the default) or false")
    return value


def _level(value: object, where: str) -> int:
    level = integer(value, where, "an accuracy level 0-4, e.g. accuracy-level = 4")
    if level not in ACCURACY_LEVELS:
        raise ConfigError(
            f"{where}: {level} is not a MatMulNBits accuracy_level. Write 4 (int8 activations, "
            "onnxruntime-genai's default on CPU), 0 (unset: fp32 activations on CPU), or 1-3 "
            "(fp32, fp16, bf16).")
    return level


def eval_tokens_value(value: object, context: KeyContext) -> Path:
    raw = string(value, context.where,
                 'a path to rows of token ids, e.g. eval-tokens = "samples/text_ids.npy"')
    path = resolve_inside(context.root, raw, context.where)
    if path.suffix.lower() not in EVAL_SUFFIXES:
        raise ConfigError(
            f'{context.where}: "{shown(raw)}" is not a .npy or .npz file. Save the token ids '
            '(rows, tokens) with numpy.save("samples/text_ids.npy", ids), or with a mask as '
            'numpy.savez("samples/text.npz", input_ids=ids, attention_mask=mask).')
    if "generate" not in context.read:
        raise ConfigError(f"{context.where}: applies to a generating model only; add "
                          "generate = { steps = 16 } before it, or remove `eval-tokens`.")
    return path


def perplexity_ratio_value(value: object, where: str) -> float:
    ratio = finite_number(value, where, "a ratio >= 1, e.g. max-perplexity-ratio = 1.1")
    if ratio < 1:
        raise ConfigError(f"{where}: {show_value(value)} is below 1. Write how many times "
                          "PyTorch fp32's perplexity a variant may reach, e.g. "
                          "max-perplexity-ratio = 1.1.")
    return float(ratio)


# The declarations of the three keys (settings/schema.py declares each with one `setting`).
INT4_KEY: Declaration = {
    "kind": "table { block-size, symmetric, accuracy-level }", "check": int4_value,
    "shown": "{ block-size = 32, symmetric = true, accuracy-level = 4 }",
    "example": "int4 = { block-size = 32, accuracy-level = 0 }",
    "doc": "How the `int4` variant is built by onnxruntime's `MatMulNBitsQuantizer` (weight-only "
           "4-bit `MatMulNBits`; a `[model.int4]` table under a `[[model]]` works too): "
           "`block-size` (a power of 2 from 16 to 256), `symmetric` (no zero points) and "
           "`accuracy-level` (0: fp32 activations on CPU; 4: int8 activations). The defaults are "
           "onnxruntime-genai's model builder's on CPU. A generating model's int4 token that "
           "differs from PyTorch's is decoded again at level 0, to say whether the 4-bit weights "
           "or the int8 activations chose it. " + OVERRIDES}
PERPLEXITY_KEY: Declaration = {
    "kind": "number >= 1", "check": plain(perplexity_ratio_value),
    "example": "max-perplexity-ratio = 1.05",
    "doc": "Above it a generating model's variant fails the model (`variant-degraded`): its "
           "perplexity on `eval-tokens` divided by PyTorch fp32's. The default, 1.1, is ten "
           "times the largest healthy loss measured on random-weight Llamas (int4: 1.0101), "
           "far below broken variants' (3.2 to 900); see docs/generation.md. " + OVERRIDES}
EVAL_TOKENS_KEY: Declaration = {
    "kind": "path (.npy or .npz)", "check": eval_tokens_value, "model_only": True,
    "shown": "none (variants are judged by their tokens only)",
    "example": 'eval-tokens = "samples/text_ids.npy"',
    "doc": "A generating model's text, scored teacher-forced by PyTorch fp32 and by each "
           "variant's decoder file: negative log-likelihood per token, perplexity, the ratio to "
           "fp32's (`max-perplexity-ratio`) and the share of positions whose top-1 agrees. A "
           "`.npy` of token ids (rows, tokens), every position scored, or an `.npz` with "
           "`input_ids` and `attention_mask` (0 where a row is padded, on either side)."}
