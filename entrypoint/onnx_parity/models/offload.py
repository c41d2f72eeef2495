"""The model's weights out of memory while onnxruntime holds its own copy of them.

A generating model is decoded by PyTorch first and by onnxruntime afterwards
(verification/generation/checked.py), so the two copies of the weights need not be resident at once:
before onnxruntime's session opens, every parameter and buffer of the module is written into
one file of the work folder and its tensor emptied (`tensor.data` swapped for an empty one, so
every holder of that Parameter object sees it); when PyTorch runs the model again (a variant's
decoding, localisation) they are read back byte for byte, in place, as they were. Measured on a
Qwen2.5-0.5B-shaped decoder (docs/generation.md, "What it costs").
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class _Held:
    tensor: Any  # the Parameter or buffer object itself (its .data is swapped)
    offset: int
    shape: tuple[int, ...]
    dtype: Any


@dataclass
class OffloadedWeights:
    """`module`'s tensors, in memory or in the file at `path` (released)."""

    module: Any
    path: Path
    held: list[_Held] = field(default_factory=list)

    @property
    def released(self) -> bool:
        return bool(self.held)

    def release(self) -> int:
        """Write the tensors out and empty them; returns the bytes released."""
        if self.released:
            return 0
        import torch

        offset = 0
        with self.path.open("wb") as file:
            for tensor in _tensors(self.module):
                data = tensor.data
                size = data.numel() * data.element_size()
                file.write(data.reshape(-1).view(torch.uint8).numpy().data)
                self.held.append(_Held(tensor, offset, tuple(data.shape), data.dtype))
                offset += size
                tensor.data = torch.empty(0, dtype=data.dtype)
                del data
        gc.collect()
        return offset

    def restore(self) -> None:
        """Read every tensor back as it was (same bytes, shape and dtype); the file goes."""
        if not self.released:
            return
        import torch

        with self.path.open("rb") as file:
            for held in self.held:
                data = torch.empty(held.shape, dtype=held.dtype)
                file.seek(held.offset)
                file.readinto(data.reshape(-1).view(torch.uint8).numpy().data)
                held.tensor.data = data
        self.held.clear()
        self.path.unlink(missing_ok=True)


    def discard(self) -> None:
        """The file, when the tensors are not needed again (the worker's model is done)."""
        self.path.unlink(missing_ok=True)


def _tensors(module: Any) -> list[Any]:
    """Every parameter and buffer once (a tied weight is one Parameter), contiguous on the CPU,
    not empty and the only tensor on its storage: the ones safe to read back in place."""
    import torch

    unique = {id(tensor): tensor for tensor in [*module.parameters(), *module.buffers()]}
    candidates = [tensor for tensor in unique.values()
                  if tensor.device.type == "cpu" and tensor.layout == torch.strided
                  and not tensor.is_quantized and tensor.numel() > 0 and tensor.is_contiguous()]
    storages: dict[int, int] = {}
    for tensor in candidates:
        pointer = tensor.untyped_storage().data_ptr()
        storages[pointer] = storages.get(pointer, 0) + 1
    # A tensor sharing its storage (a view, or another's alias) is left as it is: released
    # alone it frees nothing, and read back alone it would no longer share.
    return [tensor for tensor in candidates
            if storages[tensor.untyped_storage().data_ptr()] == 1
            and tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()]
