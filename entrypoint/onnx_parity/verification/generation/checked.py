"""A generating model checked the way it generates (`generate`): greedy decoding, token by token.

Step 0 is the prompt pass (past length 0, the committed prompts, left-padded batches being the
normal case); step k >= 1 feeds one token with a past of prompt + k - 1 positions. Each side
keeps its own cache (decoding.py). onnxruntime is fed PyTorch's token at each
step: while the tokens agree that is free-running decoding on both sides, and after the first
difference it is teacher forcing, so the per-step logit drift is still measured. Every step's
logits and presents are compared with the model's tolerance, padded positions left out
(`parity-mismatch` naming the step); the tokens must agree (`generation-mismatch`,
review.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_parity.findings import Finding
from onnx_parity.generation_results import GenerationResult
from onnx_parity.models import STATE_KINDS, BoundInputs, PositionLimits
from onnx_parity.results import OutputComparison
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.compare import Mask, NonFinite, compare_masked, nonfinite_counts
from onnx_parity.verification.cuts import Cut, CutRun, run_cut
from onnx_parity.verification.generation.decoders import Decoders
from onnx_parity.verification.generation.decoding import StepOutput
from onnx_parity.verification.generation.encoder_decoding import (
    OnnxEncoderDecoder,
    start_tokens,
)
from onnx_parity.verification.generation.expert_routing import coverage_findings, routed_steps
from onnx_parity.verification.generation.full_prefix import onnx_full_prefix, torch_full_prefix
from onnx_parity.verification.generation.prefix_decoding import onnx_decoder
from onnx_parity.verification.generation.review import Miss, mismatch_finding, token_difference
from onnx_parity.verification.generation.thresholds import cached_loop_findings
from onnx_parity.verification.generation.torch_steps import RecordedChunk
from onnx_parity.verification.generation.vision_language.decoding import (
    OnnxPipeline,
    PipelineSessions,
    open_pipeline,
)
from onnx_parity.verification.outputs import comparison_findings, layout_mismatch, own_nonfinite
from onnx_parity.verification.run_failures import load_failure_finding, runtime_finding
from onnx_parity.verification.runtime import RuntimeFailure, Session, open_session

# The decoder's session, and the encoder's or a vision-language pipeline's other two.
Sides = tuple[Decoders, Session, Session | PipelineSessions | None]


@dataclass(frozen=True)
class FailingStep:
    """The first step whose outputs are outside the tolerance: its inputs as onnxruntime got
    them (the past being its own presents), for localisation and the repro folder, and
    PyTorch's outputs there with the positions the check compared (step_repro.py)."""

    step: int
    feed: dict[str, np.ndarray]  # by the ONNX input names (position_ids even if unused)
    expected: dict[str, np.ndarray]  # PyTorch's outputs: logits, present.N.key ...
    # (batch, total_sequence): 1 where the check compared a position (padded positions and
    # rows stopped at the end-of-sequence token are 0).
    compared: np.ndarray
    first_row: int  # the prompt row of the batch's first row

    @property
    def past(self) -> int:
        """The past's length at this step."""
        return next((int(value.shape[2]) for name, value in self.feed.items()
                     if name.startswith("past_key_values.")), 0)


@dataclass
class Generated:
    """The generation check's result, its findings and its comparisons (step in `dimensions`)."""

    result: GenerationResult
    findings: list[Finding] = field(default_factory=list)
    comparisons: list[OutputComparison] = field(default_factory=list)
    failing: FailingStep | None = None
    session: Session | None = None  # the decoder file's, when it ran (the threshold steps')


@dataclass
class _Run:
    steps: int
    tolerance: tuple[float, float]  # atol, rtol
    comparisons: list[OutputComparison] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    agree: list[int] = field(default_factory=list)
    drift: list[float] = field(default_factory=list)
    # (step, output) of a failing comparison, or the logits, with NaN or Inf on either side
    nonfinite: dict[tuple[int, str], NonFinite] = field(default_factory=dict)
    step: int = 0  # the step running (a failure's)
    failing: FailingStep | None = None
    last: dict[int, np.ndarray] = field(default_factory=dict)  # last step's logits, by first row


def check_generation(decoders: Decoders, prompts: dict[str, np.ndarray], spec: ModelSpec,
                     explained: list[Finding] | None = None,
                     limits: PositionLimits | None = None) -> Generated:
    """Every committed prompt, decoded in batches of the largest configured batch size; the
    prompt pass also at each other batch size. PyTorch runs every step first (torch_steps.py),
    then the module's weights leave memory (`decoders.weights`) while onnxruntime replays them.
    `explained`: the model's findings so far, of which a baked branch or a TracerWarning of a
    value explains a mismatch (outputs.py). `limits`: a decoder's position thresholds, whose
    steps and the last one the file's cached loop is compared at with the model's full
    forward (full_prefix.py; None: not compared)."""
    assert spec.generate is not None
    run = _Run(spec.generate.steps, (spec.atol, spec.rtol), drift=[0.0] * spec.generate.steps)
    ids, mask = _first_tokens(decoders, prompts)
    if decoders.weights is not None:
        decoders.weights.restore()
    chunks, experts = routed_steps(decoders, (ids, mask), spec)  # a MoE's routing recorded
    # A decoder with no cache has no cached loop: its every step is the full forward already.
    full = (torch_full_prefix(decoders, chunks, dict(spec.forward_kwargs), limits)
            if limits is not None and not decoders.shape.whole_prefix else None)
    if decoders.weights is not None:
        released = decoders.weights.release()
        print(f"--- PyTorch's {len(chunks)} chunk(s) decoded: {released / 2**20:.0f} MiB of its "
              "weights written out while onnxruntime decodes", flush=True)
    try:
        session = open_session(decoders.model, spec.runtime_optimization, decoders.threads)
        encoder = _other_sessions(decoders, spec)
    except RuntimeFailure as error:
        return Generated(_unrun(run, len(ids)), [load_failure_finding(error, decoders.model)])
    missing = [name for name in ("logits", *decoders.shape.names("present"))
               if name not in session.output_names]
    if missing:
        return Generated(_unrun(run, len(ids)), [layout_mismatch(missing, session.output_names)])
    try:
        for chunk in chunks:
            _replay((decoders, session, encoder), chunk, run)
        prefix = (onnx_full_prefix(full, session, decoders, run.last, run.tolerance)
                  if full is not None else None)
    except RuntimeFailure as error:
        return Generated(_unrun(run, len(ids)), [runtime_finding(
            f"onnxruntime fails at generation step {run.step}", error)])
    first = min(run.misses, default=None, key=lambda miss: (miss.step, miss.row))
    difference = token_difference(first, run.tolerance) if first else None
    forced = first.step + 1 if first is not None and first.step + 1 < run.steps else None
    findings = _parity_findings(run, spec, explained or []) + _own_nonfinite(run)
    if difference is not None:
        findings.append(mismatch_finding(difference, run.steps))
    if prefix is not None and limits is not None:
        findings += cached_loop_findings(prefix, limits, run.tolerance)
    findings += coverage_findings(experts)
    result = GenerationResult(run.steps, len(ids), tuple(run.agree), difference,
                              tuple(run.drift), forced, full_prefix=prefix,
                              experts=experts, whole_prefix=decoders.shape.whole_prefix,
                              whole_prefix_reason=decoders.shape.whole_prefix_reason)
    return Generated(result, findings, run.comparisons, run.failing, session)


def _first_tokens(decoders: Decoders,
                  prompts: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Step 0's tokens and mask: the prompts, or an encoder-decoder's start token."""
    if decoders.encoder is not None:
        return start_tokens(decoders.shape, len(next(iter(prompts.values()))))
    ids, mask = (np.asarray(prompts[name]).astype(np.int64)
                 for name in ("input_ids", "attention_mask"))
    return ids, mask


def _other_sessions(decoders: Decoders, spec: ModelSpec) -> Session | PipelineSessions | None:
    """An encoder-decoder's encoder session, or a vision-language model's vision and embedding
    sessions."""
    if decoders.pipeline is not None:
        return open_pipeline(decoders.pipeline, spec.runtime_optimization, decoders.threads)
    if decoders.encoder is None:
        return None
    return open_session(decoders.encoder.model, spec.runtime_optimization, decoders.threads)


def _unrun(run: _Run, rows: int) -> GenerationResult:
    """What a generation that onnxruntime could not run measured: nothing agreed."""
    return GenerationResult(run.steps, rows, (0,) * rows, None, tuple(run.drift), None)


def _parity_findings(run: _Run, spec: ModelSpec, explained: list[Finding]) -> list[Finding]:
    """`parity-mismatch` at the first step any output is outside the tolerance, naming it;
    `nan-or-inf` where a side is NaN or infinite there and the other not, saying whether
    PyTorch computes NaN or Inf there too."""
    comparisons = run.comparisons
    failing = sorted({row.dimensions["step"] for row in comparisons if not row.passed})
    if not failing:
        return []
    step = failing[0]
    later = (f" (and at step(s) {', '.join(map(str, failing[1:6]))}"
             f"{' ...' if len(failing) > 6 else ''})" if len(failing) > 1 else "")
    rows = [row for row in comparisons if row.dimensions["step"] == step]
    past = rows[0].dimensions["past_sequence"]
    counts = {name: c for (at, name), c in run.nonfinite.items() if at == step}
    mismatched = {name for name, c in counts.items() if c.mismatched}
    return [dataclasses.replace(finding, message=f"generation step {step} (past length {past})"
                                f"{later}: {finding.message}"
                                f"{_nonfinite_text(counts.get(finding.details.get('output', '')))}")
            for finding in comparison_findings(rows, mismatched, spec, explained=explained)]


def _own_nonfinite(run: _Run) -> list[Finding]:
    """A warning where PyTorch's own logits hold NaN or Inf and every logits comparison passed
    (where one failed, its finding says whether PyTorch computes them too)."""
    steps = sorted(step for (step, name), c in run.nonfinite.items()
                   if name == "logits" and (c.torch_nan or c.torch_inf))
    if not steps or not all(row.passed for row in run.comparisons if row.output == "logits"):
        return []
    first = run.nonfinite[(steps[0], "logits")]
    return [own_nonfinite("logits", steps, (first.torch_nan, first.torch_inf))]


def _nonfinite_text(counts: NonFinite | None) -> str:
    """Whose NaN or Inf it is: the model's own (PyTorch computes it too) or the export's."""
    if counts is None:
        return ""
    text = (f"; {counts.mismatched} value(s) NaN or infinite on one side only"
            if counts.mismatched else "")
    if counts.torch_nan or counts.torch_inf:
        return (text + f"; PyTorch itself computes {counts.torch_nan} NaN and "
                f"{counts.torch_inf} infinite value(s) there: the model's own numbers")
    return text + "; PyTorch's own values are all finite there: the NaN or Inf is onnxruntime's"


def _replay(sides: Sides, chunk: RecordedChunk, run: _Run) -> None:
    """onnxruntime through one chunk's steps as PyTorch ran them (PyTorch's token fed at every
    step), compared step by step; a decoding chunk's differing tokens are kept."""
    onnx_side = _onnx_side(sides, chunk.rows)
    agree = [run.steps] * len(chunk.steps[0].ids)
    for recorded in chunk.steps:
        run.step, mask, live = recorded.step, recorded.mask, recorded.live
        expected, actual = recorded.expected, onnx_side.step(recorded.ids, mask)
        if not _compare(expected, actual, (mask, run.step, live), run) and _first(run, run.step):
            run.failing = FailingStep(run.step, dict(onnx_side.feed), _named(expected),
                                      mask * live[:, None], chunk.first_row)
        if not chunk.decoding:
            continue
        run.last[chunk.first_row] = actual.logits[:, -1]
        chosen = expected.logits[:, -1].argmax(-1)
        picked = actual.logits[:, -1].argmax(-1)
        for row in np.flatnonzero(live & (chosen != picked)):
            run.misses.append(Miss(run.step, chunk.first_row + int(row),
                                   expected.logits[row, -1], actual.logits[row, -1]))
            agree[row] = min(agree[row], run.step)
    if chunk.decoding:
        run.agree += agree


def _onnx_side(sides: Sides, rows: slice) -> Any:
    """onnxruntime with an empty cache (an encoder-decoder's: on the prompts' `rows`), or a
    decoder with no cache over its whole prefix."""
    decoders, session, encoder_session = sides
    if decoders.pipeline is not None and isinstance(encoder_session, PipelineSessions):
        return OnnxPipeline(session, encoder_session, decoders.pipeline, decoders.module, rows,
                            decoders.dtype)
    if decoders.encoder is not None and isinstance(encoder_session, Session):
        return OnnxEncoderDecoder(session, encoder_session, decoders.shape,
                                  decoders.encoder.rows(rows), decoders.dtype)
    return onnx_decoder(session, decoders)


def _first(run: _Run, step: int) -> bool:
    """Whether a failing `step` is the one to keep for the repro folder: the earliest (the
    one the parity finding names), on the first batch that fails there."""
    return run.failing is None or step < run.failing.step


def _named(output: StepOutput) -> dict[str, np.ndarray]:
    """PyTorch's outputs at the step (its presents copied when it was recorded)."""
    return {"logits": output.logits, **output.presents}


def _compare(expected: StepOutput, actual: StepOutput,
             where: tuple[np.ndarray, int, np.ndarray], run: _Run) -> bool:
    """The step's logits and presents, padded positions (and stopped rows) left out; whether
    every one is within the tolerance."""
    mask, step, live = where
    sequence = expected.logits.shape[1]
    keep = mask * live[:, None]
    pairs = [("logits", expected.logits, actual.logits,
              compared_positions("logits", keep, sequence))]
    pairs += [(name, value, *compared_present(name, value, actual.presents[name], keep))
              for name, value in expected.presents.items()]
    for name, torch_value, onnx_value, masked in pairs:
        row = compare_masked(name, len(mask), (torch_value, onnx_value), run.tolerance, masked)
        row = dataclasses.replace(row, input_shapes={"attention_mask": tuple(mask.shape)},
                                  dimensions={"step": step, "past_sequence":
                                              int(mask.shape[1]) - sequence})
        run.comparisons.append(row)
        if not row.passed or name == "logits":
            counts = nonfinite_counts(torch_value, onnx_value, masked)
            if counts.mismatched or counts.torch_nan or counts.torch_inf:
                run.nonfinite.setdefault((step, name), counts)
        if name == "logits" and row.max_abs_diff is not None:
            run.drift[step] = max(run.drift[step], row.max_abs_diff)
    return all(row.passed for row in run.comparisons[-len(pairs):])


def compared_positions(output: str, keep: np.ndarray, sequence: int) -> Mask:
    """Where a step's output is compared: `keep` (batch, total_sequence) along the logits'
    sequence axis (its last `sequence` columns: the step's new tokens) or a present's
    total_sequence axis."""
    if output == "logits":
        return Mask("attention_mask", keep[:, -sequence:], (0, 1))
    return Mask("attention_mask", keep, (0, 2))


def compared_present(name: str, torch_value: np.ndarray, onnx_value: np.ndarray,
                     keep: np.ndarray) -> tuple[np.ndarray, Mask]:
    """onnxruntime's present and its mask, on the positions PyTorch's cache holds: a
    sliding-window layer of the model's own cache keeps its window's last positions, the file's
    present the whole past (the layout's total_sequence). A hybrid model's conv or recurrent
    state (`present.N.conv`) has no positions: compared whole on every row still decoding."""
    if name.rpartition(".")[2] in STATE_KINDS:
        return onnx_value, Mask("attention_mask", keep.max(axis=1), (0,))
    held = torch_value.shape[2] if torch_value.ndim == 4 else onnx_value.shape[2]
    if onnx_value.ndim == 4 and 0 < held < onnx_value.shape[2] == keep.shape[1]:
        onnx_value, keep = onnx_value[:, :, -held:], keep[:, -held:]
    return onnx_value, compared_positions("present", keep, 0)


def failing_cut(module: Any, model: Path, bound: BoundInputs, spec: ModelSpec,
                failing: FailingStep) -> CutRun:
    """The failing step as a cut of the exported call (`module` and `bound`: the flat wrapper
    export/ exported, or the module itself), for localise.target and localise.localise."""
    session = open_session(model, spec.runtime_optimization)
    size = len(failing.feed.get("input_ids", failing.feed.get("inputs_embeds", [])))
    return run_cut(module, session, bound, spec,
                   Cut(failing.feed, size, {"step": failing.step, "past_sequence": failing.past}))
