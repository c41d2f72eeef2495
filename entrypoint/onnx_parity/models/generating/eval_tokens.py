"""The text a generating model's variants are scored on (`eval-tokens`): rows of token ids,
read without pickles as every sample is, with the mask of the positions that hold text.

A `.npy` holds the ids (rows, tokens), every position text. An `.npz` holds `input_ids` and,
optionally, `attention_mask` (1 for text, 0 for padding, on either side of a row).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx_parity.models.samples.files import Collector, Where, file_arrays

KEY = "eval-tokens"
IDS, MASK = "input_ids", "attention_mask"
_NPZ_FIX = ('save the ids (rows, tokens) with numpy.save("samples/text_ids.npy", ids), or with '
            'a mask as numpy.savez("samples/text.npz", input_ids=ids, attention_mask=mask)')


@dataclass(frozen=True)
class EvalTokens:
    ids: np.ndarray  # (rows, tokens), int64
    mask: np.ndarray  # (rows, tokens), int64: 1 where a row holds text
    file: str  # as the user wrote it, relative to the repository
    sha256: str


def load_eval_tokens(path: Path, repo: Path, vocab: int | None) -> EvalTokens:
    """The ids and mask; a SampleError names the file, `eval-tokens` and the fix."""
    seen = Collector(repo, {}, [])
    where = seen.where(path, KEY)
    named = {name: array for name, array in file_arrays(path, where, seen)}
    if path.suffix.lower() == ".npz" and IDS not in named:
        raise where.error(f"holds no `{IDS}` (it holds {', '.join(map(str, named))})", _NPZ_FIX)
    ids = named.get(IDS, next(iter(named.values())))
    mask = named.get(MASK, np.ones_like(ids))
    _check(where, ids, mask, vocab)
    return EvalTokens(ids.astype(np.int64), mask.astype(np.int64), where.file,
                      next(iter(seen.files.values()), ""))


def _check(where: Where, ids: np.ndarray, mask: np.ndarray, vocab: int | None) -> None:
    if ids.ndim != 2 or ids.dtype.kind not in "iu":
        raise where.error(f"holds {ids.dtype} ids of shape {list(ids.shape)}, not integer token "
                          "ids (rows, tokens)", _NPZ_FIX)
    if mask.shape != ids.shape or not np.isin(mask, (0, 1)).all():
        raise where.error(f"has an {MASK} of shape {list(mask.shape)} that is not 0/1 of the "
                          f"ids' shape {list(ids.shape)}", "give 1 where a row holds text and 0 "
                          "where it is padded, one value per id")
    if int((mask.sum(axis=1) >= 2).sum()) == 0:
        raise where.error("has no row of 2 or more tokens, so nothing can be predicted",
                          "commit rows of real text, e.g. 4 rows of 64 tokens")
    text = ids[mask == 1]
    if vocab is not None and (text.min() < 0 or text.max() >= vocab):
        raise where.error(f"holds ids from {text.min()} to {text.max()}, outside the model's "
                          f"vocabulary of {vocab}", "tokenize the text with the model's own "
                          "tokenizer")
