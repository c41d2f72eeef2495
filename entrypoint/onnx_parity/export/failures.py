"""Why an exporter failed, in one line and one kind: the evidence export/review.py reports.

Both exporters fail with pages of text (IR dumps, ANSI colours, chained exceptions). This
module keeps the root cause in a line or two, the finding code it maps to, the operator it
names, and every source frame it mentions (the user's own is chosen later, knowing the
repository).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onnx_parity.ansi import strip_ansi
from onnx_parity.errors import ModelProblem
from onnx_parity.export.capture import CapturedWarning
from onnx_parity.locations import shorten, text_frames

OPERATOR = re.compile(r"operator '([\w:.]+)'|\b(aten[.:]{1,2}[\w.]+)")
# A TorchScript graph line names its source: `... = aten::fft_rfft(...) # /r/models/m.py:9:0`
GRAPH_SOURCE = re.compile(r"# (\S+\.py):(\d+):\d+\s*$")
# A TorchScript symbolic names its frames innermost first: `/r/models/broken.py(50): forward`
SCRIPT_FRAME = re.compile(r"(\S+\.py)\((\d+)\): \S+")
UNSUPPORTED_PHRASES = ("unsupported fx nodes", "no onnx function found", "is not supported",
                       "no decomposition", "unsupported operator", "does not currently support")
# `STFT does not currently support complex types`: the symbolic names what it cannot translate.
UNSUPPORTED_SUBJECT = re.compile(r"^(\w+) does not (?:currently )?support")
# A cache object the exporters cannot flatten: transformers' `DynamicCache` (and its kin) as an
# input or output, or the constants torch.export lifts out of one (`lifted_tensor_0`, measured
# with `register_dynamic_cache_export_support()` on torch 2.13).
CACHE = re.compile(r"\b(\w*Cache)\b|lifted_tensor")
CACHE_FIX = (
    "A cache object cannot be exported as it is: pass and return its tensors. Declare the cache "
    "flat (inputs `past_key_values.N.key` / `.value`, built into a DynamicCache for forward; "
    "forward-kwargs = { use_cache = true }; outputs `present.N.key` / `.value`), or wrap the "
    "model in a module whose forward builds the cache from tensors and returns each layer's "
    "keys and values as tensors.")
# torch.onnx's decomposition of the captured program gives a tensor other strides than the
# capture saw, and a `reshape` captured as a view of it fails: measured on torch 2.13 with T5
# under transformers' scaled-dot-product attention (T5's transpose-then-reshape of the
# attention's output was captured as a view); with eager attention it exports.
STRIDED_VIEW = ("Failed to decompose", "Cannot view a tensor")
STRIDED_VIEW_FIX = (
    "torch.onnx's decomposition gave a tensor other strides than the captured graph, whose "
    "`reshape` of it became a view (torch 2.13 does this to T5 under transformers' "
    "scaled-dot-product attention). For a dynamo export of a transformers model, build it "
    'with eager attention: model.set_attn_implementation("eager") in the factory, or '
    'from_pretrained(..., attn_implementation="eager") (the same attention, unfused); or '
    'pin `exporter = "torchscript"`, which exports it as it is.')
# Where a TorchScript symbolic's message turns into an IR dump (kept in the log only).
IR_DUMP = re.compile(r"\s*\[Caused by |\n\s*\(node defined in |\n\s*Inputs:\n")


@dataclass(frozen=True)
class AttemptLog:
    """What one exporter's run left behind: what it printed and warned, and how long it took."""

    output: str = ""
    warnings: tuple[CapturedWarning, ...] = ()
    seconds: float = 0.0


class ExportFailure(ModelProblem):
    """One exporter failed; `kind` is the finding code the failure maps to."""

    def __init__(self, exporter: str, kind: str, message: str, *, operator: str | None = None,
                 frames: tuple[tuple[str, int], ...] = (), log: AttemptLog = AttemptLog()):
        super().__init__(message)
        self.exporter = exporter
        self.kind = kind
        self.message = message
        self.operator = operator
        self.frames = frames  # source frames the failure names, outermost first
        self.output = log.output
        self.warnings = log.warnings
        self.seconds = log.seconds
        self.output_logged = False
        self.full_text = ""  # the exporter's whole message (IR dumps too), for the log only
        self.fix: str | None = None  # a fix of its own, when the standard one cannot help


def classify(exporter: str, error: BaseException, log: AttemptLog) -> ExportFailure:
    chain = _chain(error)
    names = {type(item).__name__ for item in chain}
    text = str(error)
    message = summarize(error)
    frames = tuple(text_frames(strip_ansi(text)))
    kind, operator = "export-error", None
    if names & {"GuardOnDataDependentSymNode", "UserError"} and "data-dependent" in text:
        kind = "data-dependent-branch"
    elif "UnsupportedOperatorError" in names or _mentions_unsupported(text):
        kind, operator = "unsupported-operator", _operator(text) or _subject(message)
        frames = frames or _script_frames(text) or _graph_frames(operator, log.output)
    failure = ExportFailure(exporter, kind, message, operator=operator, frames=frames, log=log)
    failure.full_text = strip_ansi(text)
    if kind == "export-error" and CACHE.search(failure.full_text + message):
        failure.fix = CACHE_FIX  # another exporter or opset cannot flatten it either
    elif kind == "export-error" and all(part in failure.full_text for part in STRIDED_VIEW):
        failure.fix = STRIDED_VIEW_FIX
    return failure


def _script_frames(text: str) -> tuple[tuple[str, int], ...]:
    """`path(line): function` frames, innermost first in the text: returned outermost first."""
    found = [(path, int(line)) for path, line in SCRIPT_FRAME.findall(strip_ansi(text))]
    return tuple(reversed(found))


def _subject(message: str) -> str | None:
    match = UNSUPPORTED_SUBJECT.match(message.partition(": ")[2])
    return match.group(1) if match else None


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _mentions_unsupported(text: str) -> bool:
    lowered = text.lower()
    return any(phrase in lowered for phrase in UNSUPPORTED_PHRASES)


def _operator(text: str) -> str | None:
    match = OPERATOR.search(strip_ansi(text))
    if not match:
        return None
    return (match.group(1) or match.group(2)).replace(".default", "")


def _graph_frames(operator: str | None, output: str) -> tuple[tuple[str, int], ...]:
    """The TorchScript graph printed at the failure names the source line of each node."""
    if not operator:
        return ()
    for line in output.splitlines():
        if f"{operator}(" in line:
            match = GRAPH_SOURCE.search(line)
            if match:
                return ((match.group(1), int(match.group(2))),)
    return ()


def summarize(error: BaseException, limit: int = 600) -> str:
    """The root cause in a line or two: the exporters' own text is pages long."""
    root = _chain(error)[-1]
    text = strip_ansi(str(root)).strip() or type(root).__name__
    if root is not error and "Exception summary" in str(error):
        text = _summary_section(strip_ansi(str(error))) or text
    text = IR_DUMP.split(text, maxsplit=1)[0]  # the graph dump is for the log, not the report
    first = " ".join(text.split("\n\n")[0].split())
    return shorten(f"{type(root).__name__}: {first}", limit)


def _summary_section(text: str) -> str | None:
    _, _, rest = text.partition("## Exception summary")
    body = rest.strip().split("\n\n")[0].strip()
    return re.sub(r"^<class '[\w.]+'>:\s*", "", body) or None
