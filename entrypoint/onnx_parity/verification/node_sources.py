"""Where a node of the exported graph comes from (the sentence that tells the user is
divergence_text.py's).

Dynamo records, on every ONNX node, its module path and aten op (`namespace`) and the Python
frames it was computed in (`pkg.torch.onnx.stack_trace`, outermost first). The user's line is
the innermost frame in the repository; a frame inside an installed package beyond it (the
`F.conv1d` inside `nn.Conv1d.forward`) is kept as `library_frame`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from onnx_parity.locations import innermost_user_frame, scrub_paths, text_frames
from onnx_parity.verification.onnx_values import GraphNode, module_and_op


@dataclass(frozen=True)
class Origin:
    op: str | None
    module: str | None
    file: str | None
    line: int | None
    library_frame: str | None = None


def dynamo_origin(node: GraphNode, repo: Path) -> Origin:
    module, op = module_and_op(node.namespace)
    frames = text_frames(node.stack_trace or "")
    file, line = innermost_user_frame(frames, repo)
    library = None
    if frames and file is not None and not _is_users(frames[-1], file, line):
        path, number = frames[-1]
        library = scrub_paths(f"{path}:{number}", (repo,))
    return Origin(op=op or node.op_type, module=module, file=file, line=line,
                  library_frame=library)


def _is_users(frame: tuple[str, int], file: str, line: int | None) -> bool:
    path, number = frame
    return number == line and path.replace("\\", "/").endswith(file)
