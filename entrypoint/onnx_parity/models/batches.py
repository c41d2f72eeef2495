"""Which samples go into each batch: consecutive samples along axis 0, wrapping around.

Wrapping lets a model with 3 committed samples still be checked at batch size 4 (samples
0, 1, 2, 0), so `batch-sizes` never depends on how many samples were committed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BatchCut:
    """`size` consecutive samples starting at `start` (indices taken modulo the sample count)."""

    size: int
    start: int


def cut_batch(samples: np.ndarray, start: int, size: int) -> np.ndarray:
    """`size` samples from axis 0 starting at `start`, cycling when there are fewer samples.

    Always a new array (never a view), so a model that writes into its input cannot change
    the samples the other runtime sees.
    """
    if samples.ndim == 0 or samples.shape[0] == 0:
        raise ValueError("cut_batch needs at least one sample along axis 0")
    if size < 1:
        raise ValueError(f"batch size must be at least 1, not {size}")
    indices = np.arange(start, start + size)
    return np.take(samples, indices, axis=0, mode="wrap")


def batch_plan(n_samples: int, batch_sizes: tuple[int, ...]) -> tuple[BatchCut, ...]:
    """For each batch size, the cuts that together cover every sample at least once.

    Batch size b over n samples gives ceil(n / b) cuts starting at 0, b, 2b, ...; the last
    one wraps to the first samples when b does not divide n. In batch-size order.
    """
    if n_samples < 1:
        raise ValueError("batch_plan needs at least one sample")
    return tuple(BatchCut(size, start) for size in batch_sizes
                 for start in range(0, n_samples, size))
