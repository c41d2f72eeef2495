"""Where a node of the exported graph comes from, and the one sentence that tells the user.

Dynamo records, on every ONNX node, its module path and aten op (`namespace`) and the Python
frames it was computed in (`pkg.torch.onnx.stack_trace`, outermost first). The user's line is
the innermost frame in the repository; a frame inside an installed package beyond it (the
`F.conv1d` inside `nn.Conv1d.forward`) is kept as `library_frame`.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def first_sentence(details: Mapping[str, object]) -> str:
    """'Diverges first at `models/net.py:42` in `encoder.layer.3.attn` (`aten.softmax`): max abs
    diff 2.1e-03 where its inputs differ by at most 3.0e-07'."""
    file, line, module = details.get("file"), details.get("line"), details.get("module")
    where = f"`{file}:{line}`" if file else f"node `{details.get('node')}`"
    within = f" in `{module}`" if module else ""
    op = str(details.get("op") or "").removesuffix(".default")
    inputs = details.get("inputs_max_abs_diff") or 0.0  # 0: the graph's inputs, exact
    return (f"Diverges first at {where}{within} (`{op}`): max abs diff "
            f"{_e(details.get('max_abs_diff'))} where its inputs differ by at most {_e(inputs)} "
            f"({details.get('nodes_compared')} values compared, graph optimizations "
            f"{details.get('runtime_optimization')})")


def _e(value: object) -> str:
    return f"{value:.2e}" if isinstance(value, (int, float)) else "n/a"
