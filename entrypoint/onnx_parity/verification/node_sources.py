"""Where a node of the exported graph comes from (the sentence that tells the user is
localisation/divergence_text.py's).

One rule for both exporters: a node's frames, outermost first, end with its own (the operation
or the module's `forward`); the user's line is the innermost frame in the repository, and the
innermost frame, when it is not that line (the `F.conv1d` inside `nn.Conv1d.forward`), is kept
as `library_frame`. Where no frame lies in the repository, only the module path names it.

- dynamo records, on every ONNX node, its module path and aten op (`namespace`) and the Python
  frames it was computed in (`pkg.torch.onnx.stack_trace`), only those of functions named
  `forward`; where none of them is the user's, the frames that called the node's module come
  first (localisation/call_sites.py).
- TorchScript names only the module scope; its frames are those that called the leaf module
  (read by localisation/torch_values.py's forward hook while PyTorch runs again) and the
  module's `forward`.
  So a child of `nn.Sequential`, whose `forward` is torch's, is named at the user's line that
  called the container (`hidden = self.blocks(x)`), and a module of the user's at its `forward`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnx_parity.locations import innermost_user_frame, scrub_paths, text_frames
from onnx_parity.verification.onnx_values import GraphNode, module_and_op

Frame = tuple[str, int]


@dataclass(frozen=True)
class Origin:
    op: str | None
    module: str | None
    file: str | None
    line: int | None
    library_frame: str | None = None


def dynamo_origin(node: GraphNode, repo: Path, callers: Sequence[Frame] = ()) -> Origin:
    """Where a dynamo node comes from: its recorded frames, after `callers` (the frames that
    called its module, when the recorded ones name no line of the repository:
    localisation/call_sites.py)."""
    module, op = module_and_op(node.namespace)
    file, line, library = _placed([*callers, *text_frames(node.stack_trace or "")], repo)
    return Origin(op=op or node.op_type, module=module, file=file, line=line,
                  library_frame=library)


def module_origin(name: str, module: Any, callers: Sequence[Frame], repo: Path) -> Origin:
    """Where the output of the leaf module `name` comes from: its `forward` when the repository
    defines it, else the user's innermost frame among those that called it, else nowhere."""
    own = forward_frame(module)
    file, line, library = _placed([*callers, own] if own else list(callers), repo)
    return Origin(op=type(module).__name__, module=name, file=file, line=line,
                  library_frame=library)


def forward_frame(module: Any) -> Frame | None:
    """Where a module's `forward` is defined (its `def` line), or None when it has no source."""
    try:
        forward = type(module).forward
        path = inspect.getsourcefile(forward)
        _, line = inspect.getsourcelines(forward)
    except (OSError, TypeError):
        return None
    return (path, line) if path is not None else None


def _placed(frames: Sequence[Frame], repo: Path) -> tuple[str | None, int | None, str | None]:
    """The user's file and line among `frames`, and the innermost frame when it is not theirs."""
    file, line = innermost_user_frame(frames, repo)
    library = None
    if frames and (file is None or not _is_users(frames[-1], file, line)):
        path, number = frames[-1]
        library = scrub_paths(f"{path}:{number}", (repo,))
    return file, line, library


def _is_users(frame: Frame, file: str, line: int | None) -> bool:
    path, number = frame
    return number == line and path.replace("\\", "/").endswith(file)
